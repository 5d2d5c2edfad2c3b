package apply_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	composetypes "github.com/docker/cli/cli/compose/types"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
)

// composeFixtures holds the releases both deploy paths must turn into the
// same specs; see its README for the conventions.
const composeFixtures = "../testdata/compose"

// nsPlaceholder replaces each side's namespace, wherever it appears, before
// specs are compared.
const nsPlaceholder = "{ns}"

// TestParityWithDockerStackDeploy deploys every compose fixture twice on the
// real swarm, once with `docker stack deploy` and once through render, stack
// and apply, and requires the daemon to hold the same specs for both.
//
// Tolerated, and nothing else:
//   - names: each side's namespace is replaced by nsPlaceholder everywhere
//     (object names, network targets, aliases, label values);
//   - ids: network targets and config and secret references are compared
//     by the (normalised) name of the object they point to, since the
//     daemon allocates ids;
//   - Skep's own labels (io.skep.*): ownership and the spec hash, which
//     stack.Convert and apply add by design (package docs of both);
//   - the names of file-based configs and secrets, which stack.Convert
//     suffixes with a hash of their content (documented on stack.Convert):
//     the suffix is dropped only when it is the hash of that object's
//     content, and the content itself is compared;
//   - Skep's revision configs (io.skep.kind), its record of each deploy
//     (documented on package apply); stack deploy writes none;
//   - the VXLAN ids and subnets the daemon allocates to each overlay
//     network.
func TestParityWithDockerStackDeploy(t *testing.T) {
	cli := harness.RequireSwarm(t)
	docker := dockerCLI(t)
	image := harness.TestImage(t, cli, harness.ImageOptions{})

	entries, err := os.ReadDir(composeFixtures)
	if err != nil {
		t.Fatal(err)
	}
	var fixtures []string
	for _, e := range entries {
		if e.IsDir() {
			fixtures = append(fixtures, e.Name())
		}
	}
	if len(fixtures) < 10 {
		t.Fatalf("found %d compose fixtures in %s, want at least 10", len(fixtures), composeFixtures)
	}
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			testParity(t, cli, docker, filepath.Join(composeFixtures, name), image)
		})
	}
}

func testParity(t *testing.T, cli *client.Client, docker, dir, image string) {
	ctx := t.Context()
	nsA, nsB := harness.Name(t, "pa"), harness.Name(t, "pb")
	harness.CleanupStack(t, cli, nsA)
	harness.CleanupStack(t, cli, nsB)
	files := composeFiles(t, dir)

	doc, err := render.Compose(ctx, render.Input{Root: dir, Files: files, Variables: map[string]string{"IMAGE": image}})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	owner := stack.Owner{Controller: harness.Name(t, "ctl"), Application: filepath.Base(dir), Release: nsB}
	rel, err := stack.Convert(doc.Config, stack.Options{Owner: owner, Files: doc.Files})
	if err != nil {
		t.Fatalf("convert: %v", err)
	}

	stackDeploy(t, docker, dir, files, image, nsA)
	a := capture(t, cli, nsA, stackDeploySecrets(t, dir, nsA, doc.Config))
	if publishesHostPorts(doc.Config) {
		// Both copies would claim the same host port; stack A's specs are
		// captured already, and only they are compared.
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := harness.RemoveStack(rctx, cli, nsA); err != nil {
			t.Fatalf("remove stack %s before deploying %s: %v", nsA, nsB, err)
		}
	}

	if _, err := apply.Apply(ctx, cli, rel, apply.Options{Owner: owner, ResolveImage: apply.ResolveNever}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	skepSecrets := map[string][]byte{}
	for name, s := range rel.Secrets {
		skepSecrets[name] = s.Data
	}
	b := capture(t, cli, nsB, skepSecrets)

	if len(a.services) == 0 {
		t.Fatalf("docker stack deploy created no services in %s", nsA)
	}
	for _, c := range []struct {
		kind      string
		want, got any
	}{
		{"services", a.services, b.services},
		{"networks", a.networks, b.networks},
		{"configs", a.configs, b.configs},
		{"secrets", a.secrets, b.secrets},
	} {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("fixture %s: %s differ (-docker stack deploy +skep):\n%s", filepath.Base(dir), c.kind, diff)
		}
	}
}

// dockerCLI returns the path of the docker CLI, which only this test runs:
// the controller never does.
func dockerCLI(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"docker", "/usr/local/bin/docker", "/usr/bin/docker"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if harness.SwarmRequired() {
		t.Fatal("no docker CLI found; the parity test compares against `docker stack deploy`")
	}
	t.Skip("no docker CLI found")
	return ""
}

// composeFiles lists the fixture's compose files in merge order.
func composeFiles(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "files"))
	if os.IsNotExist(err) {
		return []string{"compose.yaml"}
	}
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			files = append(files, line)
		}
	}
	return files
}

// stackDeploy runs `docker stack deploy` in the fixture's directory. Its
// interpolation reads the process environment only, so the environment is
// IMAGE and the fixture's .env on top of what the CLI needs to reach the
// daemon; variables with defaults stay unset, as they are for Skep, which
// never reads the process environment.
func stackDeploy(t *testing.T, docker, dir string, files []string, image, ns string) {
	t.Helper()
	env := []string{"IMAGE=" + image}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k == "PATH" || k == "HOME" || strings.HasPrefix(k, "DOCKER_") {
			env = append(env, kv)
		}
	}
	env = append(env, dotEnv(t, dir)...)
	args := []string{"stack", "deploy", "--detach=true", "--resolve-image", "never"}
	for _, f := range files {
		args = append(args, "-c", f)
	}
	cmd := exec.CommandContext(t.Context(), docker, append(args, ns)...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// dotEnv returns the KEY=VALUE lines of the fixture's .env.
func dotEnv(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, ".env"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			env = append(env, line)
		}
	}
	return env
}

// stackDeploySecrets returns, by swarm name, the content `docker stack
// deploy` gave each file-based secret: the file next to the compose file.
// The Engine never returns a secret's value, so this is what gets compared.
func stackDeploySecrets(t *testing.T, dir, ns string, cfg *composetypes.Config) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for key, s := range cfg.Secrets {
		if s.External.External || s.File == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(s.File)))
		if err != nil {
			t.Fatal(err)
		}
		name := s.Name
		if name == "" {
			name = ns + "_" + key
		}
		out[name] = data
	}
	return out
}

func publishesHostPorts(cfg *composetypes.Config) bool {
	for _, s := range cfg.Services {
		if slices.ContainsFunc(s.Ports, func(p composetypes.ServicePortConfig) bool {
			return p.Mode == "host" && p.Published != 0
		}) {
			return true
		}
	}
	return false
}

// live is one namespace as the daemon holds it, normalised for comparison
// and keyed by normalised name.
type live struct {
	services map[string]swarm.ServiceSpec
	networks map[string]networkView
	configs  map[string]fileObjectView
	secrets  map[string]fileObjectView
}

// networkView is what a stack decides about a network; the rest is
// allocated by the daemon.
type networkView struct {
	Driver      string
	Options     map[string]string
	Attachable  bool
	Internal    bool
	Ingress     bool
	EnableIPv6  bool
	Scope       string
	IPAMDriver  string
	IPAMOptions map[string]string
	Labels      map[string]string
}

// fileObjectView is a config or secret. Data is the live content for a
// config, and the content each deploy path sent for a secret.
type fileObjectView struct {
	Labels     map[string]string
	Data       string
	Driver     *swarm.Driver
	Templating *swarm.Driver
}

// vxlanOption is the option the daemon sets on each overlay network with
// the VXLAN id it allocated.
const vxlanOption = "com.docker.network.driver.overlay.vxlanid_list"

// capture reads namespace ns from the daemon. secrets holds the content
// each secret was created with, by its swarm name.
func capture(t *testing.T, cli *client.Client, ns string, secrets map[string][]byte) live {
	t.Helper()
	ctx := t.Context()
	byNamespace := filters.NewArgs(filters.Arg("label", stack.LabelNamespace+"="+ns))
	out := live{
		services: map[string]swarm.ServiceSpec{},
		networks: map[string]networkView{},
		configs:  map[string]fileObjectView{},
		secrets:  map[string]fileObjectView{},
	}
	scope := func(name string) string { return strings.ReplaceAll(name, ns, nsPlaceholder) }
	labels := func(l map[string]string) map[string]string { return normalLabels(l, ns) }

	// A network the Engine has not allocated yet lists without its driver
	// and IPAM: right after a deploy, under load, the list may come first.
	var nets []network.Summary
	harness.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		var err error
		if nets, err = cli.NetworkList(ctx, network.ListOptions{Filters: byNamespace}); err != nil {
			return false, err.Error()
		}
		i := slices.IndexFunc(nets, func(n network.Summary) bool { return n.Driver == "" })
		return i < 0, "a network is not allocated yet"
	})
	netNames := map[string]string{} // id → normalised name
	for _, n := range nets {
		netNames[n.ID] = scope(n.Name)
		opts := map[string]string{}
		for k, v := range n.Options {
			if k != vxlanOption {
				opts[k] = v
			}
		}
		out.networks[scope(n.Name)] = networkView{
			Driver: n.Driver, Options: opts, Attachable: n.Attachable, Internal: n.Internal,
			Ingress: n.Ingress, EnableIPv6: n.EnableIPv6, Scope: n.Scope,
			IPAMDriver: n.IPAM.Driver, IPAMOptions: n.IPAM.Options, Labels: labels(n.Labels),
		}
	}

	configs, err := cli.ConfigList(ctx, swarm.ConfigListOptions{Filters: byNamespace})
	if err != nil {
		t.Fatal(err)
	}
	configNames := map[string]string{} // name and id → normalised name
	for _, c := range configs {
		if c.Spec.Labels[stack.LabelKind] != "" {
			continue // Skep's revision record
		}
		name := scope(unhashed(c.Spec.Name, c.Spec.Data))
		configNames[c.Spec.Name], configNames[c.ID] = name, name
		out.configs[name] = fileObjectView{Labels: labels(c.Spec.Labels), Data: string(c.Spec.Data), Templating: c.Spec.Templating}
	}

	secretList, err := cli.SecretList(ctx, swarm.SecretListOptions{Filters: byNamespace})
	if err != nil {
		t.Fatal(err)
	}
	secretNames := map[string]string{}
	for _, s := range secretList {
		data, ok := secrets[s.Spec.Name]
		if !ok && s.Spec.Driver == nil {
			t.Errorf("secret %s: no content known for it", s.Spec.Name)
		}
		name := scope(unhashed(s.Spec.Name, data))
		secretNames[s.Spec.Name], secretNames[s.ID] = name, name
		out.secrets[name] = fileObjectView{Labels: labels(s.Spec.Labels), Data: string(data), Driver: s.Spec.Driver, Templating: s.Spec.Templating}
	}

	services, err := cli.ServiceList(ctx, swarm.ServiceListOptions{Filters: byNamespace})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range services {
		spec := s.Spec
		//lint:ignore SA1019 the deprecated field is compared too, in case either path sets it
		for _, attachments := range [][]swarm.NetworkAttachmentConfig{spec.TaskTemplate.Networks, spec.Networks} {
			for i := range attachments {
				if name, ok := netNames[attachments[i].Target]; ok {
					attachments[i].Target = name
				}
			}
		}
		if cs := spec.TaskTemplate.ContainerSpec; cs != nil {
			for _, r := range cs.Configs {
				r.ConfigID, r.ConfigName = "", refName(configNames, r.ConfigID, r.ConfigName)
			}
			for _, r := range cs.Secrets {
				r.SecretID, r.SecretName = "", refName(secretNames, r.SecretID, r.SecretName)
			}
			if p := cs.Privileges; p != nil && p.CredentialSpec != nil && p.CredentialSpec.Config != "" {
				p.CredentialSpec.Config = refName(configNames, p.CredentialSpec.Config, "")
			}
		}
		out.services[scope(spec.Name)] = normalSpec(t, spec, ns)
	}
	return out
}

// refName is the normalised name of the object a reference points to, by
// id first; an unknown reference keeps what it had so the diff shows it.
func refName(names map[string]string, id, name string) string {
	if n, ok := names[id]; ok {
		return n
	}
	if n, ok := names[name]; ok {
		return n
	}
	if name != "" {
		return name
	}
	return id
}

// unhashed drops the "-<10 hex digits>" stack.Convert appends to the name of
// a file-based config or secret, but only when they are the hash of data:
// a suffix that does not match the content is a difference to report.
func unhashed(name string, data []byte) string {
	sum := sha256.Sum256(data)
	if suffix := "-" + hex.EncodeToString(sum[:])[:10]; data != nil && strings.HasSuffix(name, suffix) {
		return strings.TrimSuffix(name, suffix)
	}
	return name
}

// normalLabels drops Skep's own labels and replaces ns in the values.
func normalLabels(labels map[string]string, ns string) map[string]string {
	if labels == nil {
		return nil
	}
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if !strings.HasPrefix(k, "io.skep.") {
			out[k] = strings.ReplaceAll(v, ns, nsPlaceholder)
		}
	}
	return out
}

// normalSpec replaces ns everywhere in spec and drops Skep's own labels from
// every label map in it (service, container, volume), through its JSON.
func normalSpec(t *testing.T, spec swarm.ServiceSpec, ns string) swarm.ServiceSpec {
	t.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(data, []byte(ns), []byte(nsPlaceholder))
	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		t.Fatal(err)
	}
	dropSkepLabels(tree)
	if data, err = json.Marshal(tree); err != nil {
		t.Fatal(err)
	}
	var out swarm.ServiceSpec
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func dropSkepLabels(node any) {
	switch n := node.(type) {
	case map[string]any:
		for k, v := range n {
			if labels, ok := v.(map[string]any); ok && k == "Labels" {
				for key := range labels {
					if strings.HasPrefix(key, "io.skep.") {
						delete(labels, key)
					}
				}
			}
			dropSkepLabels(v)
		}
	case []any:
		for _, v := range n {
			dropSkepLabels(v)
		}
	}
}
