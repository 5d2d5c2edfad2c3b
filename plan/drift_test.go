package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/docker/cli/cli/compose/loader"
	composetypes "github.com/docker/cli/cli/compose/types"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/stack"
)

const appDigest = "sha256:4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b"

// networkIDs maps the ids live specs carry to the names of webRelease.
var networkIDs = map[string]string{"n0d3web": "web_default"}

// asLive returns spec the way the Engine hands it back after apply wrote
// it: the image pinned to a digest, Skep's and stack deploy's labels added,
// network ids for names, secret and config ids, daemon defaults filled.
func asLive(spec swarm.ServiceSpec, hash string) swarm.Service {
	s := copyService(spec)
	s.Labels[stack.LabelSpecHash] = hash
	s.Labels[stack.LabelStackImage] = s.TaskTemplate.ContainerSpec.Image
	cs := s.TaskTemplate.ContainerSpec
	cs.Image = "docker.io/library/" + cs.Image + "@" + appDigest
	cs.Isolation = "default"
	for _, r := range cs.Secrets {
		r.SecretID = "sec-id-" + r.SecretName
	}
	for _, r := range cs.Configs {
		r.ConfigID = "conf-id-" + r.ConfigName
	}
	for i := range s.TaskTemplate.Networks {
		s.TaskTemplate.Networks[i].Target = "n0d3web"
	}
	s.TaskTemplate.Runtime = swarm.RuntimeContainer
	s.TaskTemplate.ForceUpdate = 2
	s.TaskTemplate.Resources = &swarm.ResourceRequirements{}
	// apply restricts the tasks to the platforms of the digest's manifest.
	if s.TaskTemplate.Placement == nil {
		s.TaskTemplate.Placement = &swarm.Placement{}
	}
	s.TaskTemplate.Placement.Platforms = []swarm.Platform{{Architecture: "amd64", OS: "linux"}}
	return swarm.Service{ID: "svc-" + s.Name, Spec: s}
}

func liveWeb(fns ...func(*swarm.Service)) map[string]swarm.Service {
	svc := asLive(webRelease().Services["web_app"], "hash-1")
	for _, fn := range fns {
		fn(&svc)
	}
	return map[string]swarm.Service{svc.Spec.Name: svc}
}

var webOpts = DriftOptions{Owner: owner, NetworkNames: networkIDs}

func TestDriftIgnoresWhatApplyAndTheDaemonAdd(t *testing.T) {
	if got := Drift(webRelease(), liveWeb(), webOpts); len(got) != 0 {
		t.Errorf("Drift(as applied) = %+v, want no findings", got)
	}
}

func TestDrift(t *testing.T) {
	cs := func(s *swarm.Service) *swarm.ContainerSpec { return s.Spec.TaskTemplate.ContainerSpec }
	for _, tc := range []struct {
		name    string
		desired stack.Release
		live    map[string]swarm.Service
		opts    DriftOptions
		want    []Finding
	}{
		{
			name: "scaled replicas are modified",
			live: liveWeb(func(s *swarm.Service) { n := uint64(5); s.Spec.Mode.Replicated.Replicas = &n }),
			want: []Finding{{Kind: Modified, Field: "replicas", Path: "Mode.Replicated.Replicas", Desired: "2", Live: "5"}},
		},
		{
			name: "another image tag is modified",
			live: liveWeb(func(s *swarm.Service) { cs(s).Image = "app:v2" }),
			want: []Finding{{Kind: Modified, Field: "image", Path: "TaskTemplate.ContainerSpec.Image", Desired: `"app:v1"`, Live: `"app:v2"`}},
		},
		{
			name: "the same tag under another digest is not drift",
			live: liveWeb(func(s *swarm.Service) { cs(s).Image = "app:v1@sha256:" + strings.Repeat("0", 64) }),
		},
		{
			name:    "two different digest pins are modified",
			desired: edit(app(func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Image = "app:v1@" + appDigest })),
			live:    liveWeb(func(s *swarm.Service) { cs(s).Image = "app:v1@sha256:" + strings.Repeat("0", 64) }),
			want: []Finding{{Kind: Modified, Field: "image", Path: "TaskTemplate.ContainerSpec.Image",
				Desired: `"app:v1@` + appDigest + `"`, Live: `"app:v1@sha256:` + strings.Repeat("0", 64) + `"`}},
		},
		{
			name: "an added env variable is modified, value masked",
			live: liveWeb(func(s *swarm.Service) { cs(s).Env = append(cs(s).Env, "TOKEN=hunter2") }),
			want: []Finding{{Kind: Modified, Field: "env", Path: `TaskTemplate.ContainerSpec.Env["TOKEN"]`, Desired: "", Live: "***"}},
		},
		{
			name: "a changed env value is modified, both values masked",
			live: liveWeb(func(s *swarm.Service) { cs(s).Env[0] = "FOO=changed" }),
			want: []Finding{{Kind: Modified, Field: "env", Path: `TaskTemplate.ContainerSpec.Env["FOO"]`, Desired: "***", Live: "***"}},
		},
		{
			name: "a removed port is modified",
			live: liveWeb(func(s *swarm.Service) { s.Spec.EndpointSpec.Ports = s.Spec.EndpointSpec.Ports[:1] }),
			want: []Finding{{Kind: Modified, Field: "ports", Path: `EndpointSpec.Ports["443/tcp"]`,
				Desired: "{Protocol: \"tcp\", TargetPort: 443, PublishedPort: 8443, PublishMode: \"host\"}"}},
		},
		{
			name: "a removed secret is modified",
			live: liveWeb(func(s *swarm.Service) { cs(s).Secrets = nil }),
			want: []Finding{{Kind: Modified, Field: "secrets", Path: `TaskTemplate.ContainerSpec.Secrets["db_password"]`,
				Desired: `{File: {Name: "db_password", UID: "0", GID: "0", Mode: 0444}, SecretName: "web_db_password-7c1e55aa02"}`}},
		},
		{
			name: "a changed user label is modified but skep's labels are not drift",
			live: liveWeb(func(s *swarm.Service) {
				s.Spec.Labels["tier"] = "back"
				s.Spec.Labels[stack.LabelSpecHash] = "other"
				s.Spec.Labels[stack.LabelApplication] = "renamed"
			}),
			want: []Finding{{Kind: Modified, Field: "labels", Path: `Labels["tier"]`, Live: `"back"`}},
		},
		{
			name: "fields outside the named list are not drift",
			live: liveWeb(func(s *swarm.Service) {
				s.Spec.TaskTemplate.ForceUpdate = 9
				s.Spec.TaskTemplate.Runtime = "plugin"
			}),
		},
		{
			name: "network ids without names to map them are modified",
			live: liveWeb(),
			opts: DriftOptions{Owner: owner},
			want: []Finding{{Kind: Modified, Field: "networks", Path: `TaskTemplate.Networks["n0d3web"]`, Live: `{Target: "n0d3web", Aliases: ["app"]}`},
				{Kind: Modified, Field: "networks", Path: `TaskTemplate.Networks["web_default"]`, Desired: `{Target: "web_default", Aliases: ["app"]}`}},
		},
		{
			name: "a deleted service is missing",
			live: map[string]swarm.Service{},
			want: []Finding{{Kind: Missing, Desired: `"app:v1"`, Reason: "declared but not in the swarm"}},
		},
		{
			name: "an owned service git does not declare is unexpected",
			live: func() map[string]swarm.Service {
				m := liveWeb()
				extra := asLive(webRelease().Services["web_app"], "hash-1")
				extra.Spec.Name = "web_old"
				m["web_old"] = extra
				return m
			}(),
			want: []Finding{{Service: "web_old", Kind: Unexpected, Live: `"docker.io/library/app:v1@` + appDigest + `"`, Reason: "not declared in git"}},
		},
		{
			name: "an owned hook job in the namespace is not drift",
			live: func() map[string]swarm.Service {
				m := liveWeb()
				job := asLive(webRelease().Services["web_app"], "hash-1")
				job.Spec.Name = "web_migrate-abc1234-1"
				job.Spec.Labels = maps.Clone(job.Spec.Labels)
				job.Spec.Labels[stack.LabelKind] = stack.KindHook
				m[job.Spec.Name] = job
				return m
			}(),
		},
		{
			name: "a hand-made service in the namespace is not drift",
			live: func() map[string]swarm.Service {
				m := liveWeb()
				m["web_hand"] = swarm.Service{Spec: swarm.ServiceSpec{Annotations: swarm.Annotations{Name: "web_hand",
					Labels: map[string]string{stack.LabelNamespace: "web"}}}}
				other := asLive(webRelease().Services["web_app"], "x")
				other.Spec.Name = "other_app"
				other.Spec.Labels = stack.Owner{Controller: "default", Application: "web", Release: "other"}.Labels()
				m["other_app"] = other
				return m
			}(),
		},
		{
			name: "a service swarm rolled back is rolled-back, never modified",
			live: liveWeb(func(s *swarm.Service) {
				prev := s.Spec
				s.PreviousSpec = &prev
				s.Spec = copyService(s.Spec)
				s.Spec.TaskTemplate.ContainerSpec.Image = "app:v0"
				s.Spec.Labels[stack.LabelSpecHash] = "hash-0"
				s.UpdateStatus = &swarm.UpdateStatus{State: swarm.UpdateStateRollbackCompleted, Message: "rollback completed"}
			}),
			want: []Finding{{Kind: RolledBack, Field: "image", Path: "TaskTemplate.ContainerSpec.Image",
				Desired: `"app:v1"`, Live: `"app:v0"`, Reason: "rollback_completed: rollback completed"}},
		},
		{
			name: "a previous spec equal to git under another hash is a rollback without update status",
			live: liveWeb(func(s *swarm.Service) {
				prev := s.Spec
				s.PreviousSpec = &prev
				s.Spec = copyService(s.Spec)
				s.Spec.TaskTemplate.ContainerSpec.Image = "app:v0"
				s.Spec.Labels[stack.LabelSpecHash] = "hash-0"
			}),
			want: []Finding{{Kind: RolledBack, Field: "image", Path: "TaskTemplate.ContainerSpec.Image",
				Desired: `"app:v1"`, Live: `"app:v0"`, Reason: "the live spec went back to the one before the declared spec"}},
		},
		{
			name: "an out-of-band scale keeps the hash and is modified, not rolled back",
			live: liveWeb(func(s *swarm.Service) {
				prev := s.Spec
				s.PreviousSpec = &prev
				s.Spec = copyService(s.Spec)
				n := uint64(0)
				s.Spec.Mode.Replicated.Replicas = &n
				s.UpdateStatus = &swarm.UpdateStatus{State: swarm.UpdateStateCompleted}
			}),
			want: []Finding{{Kind: Modified, Field: "replicas", Path: "Mode.Replicated.Replicas", Desired: "2", Live: "0"}},
		},
		{
			name: "a rolled-back service that matches git again has no findings",
			live: liveWeb(func(s *swarm.Service) {
				s.UpdateStatus = &swarm.UpdateStatus{State: swarm.UpdateStateRollbackCompleted, Message: "manually requested rollback"}
			}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desired := tc.desired
			if desired.Name == "" {
				desired = webRelease()
			}
			opts := tc.opts
			if opts.Owner.Controller == "" {
				opts = webOpts
			}
			for i := range tc.want {
				tc.want[i].Release = "web"
				if tc.want[i].Service == "" {
					tc.want[i].Service = "web_app"
				}
			}
			want := tc.want
			if want == nil {
				want = []Finding{}
			}
			if diff := cmp.Diff(want, Drift(desired, tc.live, opts)); diff != "" {
				t.Errorf("Drift() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDriftDoesNotModifyItsInputs(t *testing.T) {
	desired := webRelease()
	live := liveWeb(func(s *swarm.Service) { s.Spec.TaskTemplate.ContainerSpec.Image = "app:v2" })
	before, _ := json.Marshal([]any{desired, live})
	Drift(desired, live, webOpts)
	after, _ := json.Marshal([]any{desired, live})
	if string(before) != string(after) {
		t.Errorf("Drift modified its inputs:\n%s", cmp.Diff(string(before), string(after)))
	}
}

// TestDriftFieldsNameRealPaths guards the named list against typos: every
// path must start with fields ServiceSpec has.
func TestDriftFieldsNameRealPaths(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range DriftFields {
		if seen[f.Name] {
			t.Errorf("field %q named twice", f.Name)
		}
		seen[f.Name] = true
		for _, p := range f.Paths {
			typ := reflect.TypeFor[swarm.ServiceSpec]()
			for _, part := range strings.Split(p, ".") {
				for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
					typ = typ.Elem()
				}
				sf, ok := typ.FieldByName(part)
				if !ok || typ.Kind() != reflect.Struct {
					t.Errorf("field %q: path %q: %s has no field %s", f.Name, p, typ, part)
					break
				}
				typ = sf.Type
			}
		}
	}
	for _, name := range []string{"image", "replicas", "env", "labels", "ports", "mounts", "networks", "constraints",
		"resources", "update policy", "rollback policy", "restart policy", "healthcheck", "secrets", "configs", "command", "user"} {
		if !seen[name] {
			t.Errorf("DriftFields lacks %q, which the issue names", name)
		}
	}
}

func TestDriftGolden(t *testing.T) {
	live := liveWeb(func(s *swarm.Service) {
		n := uint64(3)
		s.Spec.Mode.Replicated.Replicas = &n
		s.Spec.TaskTemplate.ContainerSpec.Env = append(s.Spec.TaskTemplate.ContainerSpec.Env, "DEBUG=1")
		grace := 30 * time.Second
		s.Spec.TaskTemplate.ContainerSpec.StopGracePeriod = &grace
		s.Spec.TaskTemplate.Placement.Constraints = []string{"node.role==manager"}
	})
	desired := edit(func(r *stack.Release) {
		s := r.Services["web_app"]
		s.Name = "web_worker"
		r.Services["web_worker"] = s
	})
	got, err := json.MarshalIndent(Drift(desired, live, webOpts), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "drift.json", append(got, '\n'))
}

// swarmCompose exercises most fields the Engine stores with defaults of its
// own; IMAGE, PORT and the files are filled in by loadRelease.
const swarmCompose = `version: "3.9"
services:
  web:
    image: IMAGE
    environment: {MODE: prod}
    labels: {tier: front}
    healthcheck: {test: ["CMD", "/testapp", "health"], interval: 2s, timeout: 2s, retries: 2, start_period: 1s}
    stop_grace_period: 2s
    volumes: ["data:/data"]
    networks: {front: {aliases: [www]}}
    ports: [{target: 8080, published: PORT, mode: host}]
    configs: [{source: conf, target: /etc/app.conf}]
    secrets: [token]
    deploy:
      replicas: 1
      endpoint_mode: dnsrr
      labels: {team: shop}
      resources: {limits: {memory: 64M}}
      restart_policy: {condition: on-failure, delay: 1s}
      update_config: {parallelism: 1, delay: 1s, order: stop-first, failure_action: rollback, monitor: 30s}
      rollback_config: {parallelism: 1, monitor: 2s}
      placement: {constraints: [node.role == manager]}
networks:
  front: {driver: overlay}
volumes:
  data: {}
configs:
  conf: {file: ./app.conf}
secrets:
  token: {file: ./token}
`

// loadRelease converts swarmCompose with the stack package, as render does.
func loadRelease(t *testing.T, owner stack.Owner, image string, port uint32) stack.Release {
	t.Helper()
	dir := t.TempDir()
	text := strings.NewReplacer("IMAGE", image, "PORT", fmt.Sprint(port)).Replace(swarmCompose)
	files := map[string][]byte{}
	for name, data := range map[string]string{"app.conf": "listen 8080\n", "token": "s3cret\n"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		files[path] = []byte(data)
	}
	dict, err := loader.ParseYAML([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loader.Load(composetypes.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []composetypes.ConfigFile{{Filename: "compose.yaml", Config: dict}},
		Environment: map[string]string{},
	})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := stack.Convert(cfg, stack.Options{Owner: owner, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// liveDrift reads the namespace the way a snapshot holds it and runs Drift.
func liveDrift(ctx context.Context, t *testing.T, cli *client.Client, rel stack.Release, owner stack.Owner) []Finding {
	t.Helper()
	services, err := cli.ServiceList(ctx, swarm.ServiceListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]swarm.Service{}
	for _, s := range services {
		live[s.Spec.Name] = s
	}
	nets, err := cli.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts := DriftOptions{Owner: owner, NetworkNames: map[string]string{}}
	for _, n := range nets {
		opts.NetworkNames[n.ID] = n.Name
	}
	return Drift(rel, live, opts)
}

func fieldsOf(findings []Finding) []string {
	var out []string
	for _, f := range findings {
		out = append(out, string(f.Kind)+" "+f.Field)
	}
	return out
}

// TestDriftOnSwarmSeesOutOfBandChanges applies a converted compose release
// to the real swarm, checks it shows no drift, then changes it through the
// Engine API the way `docker service update` would and checks each change
// is seen with the right field, re-applying in between.
func TestDriftOnSwarmSeesOutOfBandChanges(t *testing.T) {
	cli := harness.RequireSwarm(t)
	ctx := t.Context()
	ns := harness.Name(t, "dr")
	harness.CleanupStack(t, cli, ns)
	owner := stack.Owner{Controller: harness.Name(t, "ctl"), Application: "shop", Release: ns}
	image := harness.TestImage(t, cli, harness.ImageOptions{})
	rel := loadRelease(t, owner, image, harness.FreePort(t))
	deploy := func() {
		t.Helper()
		if _, err := apply.Apply(ctx, cli, rel, apply.Options{Owner: owner, ResolveImage: apply.ResolveNever}); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	deploy()
	if got := liveDrift(ctx, t, cli, rel, owner); len(got) != 0 {
		t.Fatalf("drift right after apply = %+v, want none", got)
	}

	name := ns + "_web"
	otherImage := harness.TestImage(t, cli, harness.ImageOptions{Version: "v2"})
	change := func(fn func(*swarm.ServiceSpec)) {
		t.Helper()
		svc, _, err := cli.ServiceInspectWithRaw(ctx, name, swarm.ServiceInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fn(&svc.Spec)
		if _, err := cli.ServiceUpdate(ctx, svc.ID, svc.Version, svc.Spec, swarm.ServiceUpdateOptions{}); err != nil {
			t.Fatalf("update service: %v", err)
		}
	}
	for _, tc := range []struct {
		name   string
		change func()
		want   []string
	}{
		{"docker service update --replicas", func() {
			change(func(s *swarm.ServiceSpec) { n := uint64(2); s.Mode.Replicated.Replicas = &n })
		}, []string{"modified replicas"}},
		{"docker service update --image", func() {
			change(func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Image = otherImage })
		}, []string{"modified image"}},
		{"docker service update --env-add", func() {
			change(func(s *swarm.ServiceSpec) {
				s.TaskTemplate.ContainerSpec.Env = append(s.TaskTemplate.ContainerSpec.Env, "EXTRA=1")
			})
		}, []string{"modified env"}},
		{"docker service update --publish-rm", func() {
			change(func(s *swarm.ServiceSpec) { s.EndpointSpec.Ports = nil })
		}, []string{"modified ports"}},
		{"docker service update --secret-rm", func() {
			change(func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Secrets = nil })
		}, []string{"modified secrets"}},
		{"docker service rm", func() {
			if err := cli.ServiceRemove(ctx, name); err != nil {
				t.Fatal(err)
			}
		}, []string{"missing "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.change()
			got := liveDrift(ctx, t, cli, rel, owner)
			if diff := cmp.Diff(tc.want, fieldsOf(got)); diff != "" {
				t.Errorf("drift after %s mismatch (-want +got):\n%s\nfindings: %+v", tc.name, diff, got)
			}
			deploy()
			if got := liveDrift(ctx, t, cli, rel, owner); len(got) != 0 {
				t.Errorf("drift after re-applying = %+v, want none", got)
			}
		})
	}
}

// TestDriftOnSwarmReportsRollbackAndHealthDegraded deploys a healthy
// release, then one whose image fails its health check with
// failure_action rollback, and checks that Swarm's rollback is rolled-back
// drift (never modified) and the service's health is degraded with the
// daemon's reason.
func TestDriftOnSwarmReportsRollbackAndHealthDegraded(t *testing.T) {
	cli := harness.RequireSwarm(t)
	ctx := t.Context()
	ns := harness.Name(t, "rb")
	harness.CleanupStack(t, cli, ns)
	owner := stack.Owner{Controller: harness.Name(t, "ctl"), Application: "shop", Release: ns}
	port := harness.FreePort(t)
	good := loadRelease(t, owner, harness.TestImage(t, cli, harness.ImageOptions{}), port)
	bad := loadRelease(t, owner, harness.TestImage(t, cli, harness.ImageOptions{Unhealthy: true}), port)
	for _, rel := range []stack.Release{good, bad} {
		if _, err := apply.Apply(ctx, cli, rel, apply.Options{Owner: owner, ResolveImage: apply.ResolveNever}); err != nil {
			t.Fatalf("apply: %v", err)
		}
		if rel.Services[ns+"_web"].TaskTemplate.ContainerSpec.Image == good.Services[ns+"_web"].TaskTemplate.ContainerSpec.Image {
			svc, _, err := cli.ServiceInspectWithRaw(ctx, ns+"_web", swarm.ServiceInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			harness.WaitRunning(t, cli, svc.ID, 1, 2*time.Minute)
		}
	}
	var svc swarm.Service
	harness.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		var err error
		svc, _, err = cli.ServiceInspectWithRaw(ctx, ns+"_web", swarm.ServiceInspectOptions{})
		if err != nil {
			return false, err.Error()
		}
		if svc.UpdateStatus == nil {
			return false, "no update status"
		}
		return svc.UpdateStatus.State == swarm.UpdateStateRollbackCompleted, string(svc.UpdateStatus.State) + ": " + svc.UpdateStatus.Message
	})

	got := liveDrift(ctx, t, cli, bad, owner)
	if diff := cmp.Diff([]string{"rolled-back image"}, fieldsOf(got)); diff != "" {
		t.Errorf("drift after swarm's rollback mismatch (-want +got):\n%s\nfindings: %+v", diff, got)
	}
	for _, f := range got {
		if f.Reason == "" {
			t.Errorf("finding %+v carries no reason", f)
		}
	}
	if got := liveDrift(ctx, t, cli, good, owner); len(got) != 0 {
		t.Errorf("drift against the spec swarm rolled back to = %+v, want none", got)
	}

	tasks, err := cli.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", svc.ID))})
	if err != nil {
		t.Fatal(err)
	}
	h := health.Service(health.ServiceInput{Live: &svc, Tasks: tasks, Now: time.Now()})
	if h.State != health.Degraded || !strings.Contains(h.Message, "rolled back") {
		t.Errorf("health after rollback = %s %q, want degraded, rolled back with the daemon's reason", h.State, h.Message)
	}
	t.Logf("health after rollback: %s: %s", h.State, h.Message)
}
