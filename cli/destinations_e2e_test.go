package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/wire"
)

// twoSwarms is a test with the main swarm and the second one, a git
// server, and the files a controller deploying to both needs.
type twoSwarms struct {
	main    *client.Client
	second  *harness.Swarm2
	git     *harness.GitServer
	ns      string
	v1, v2  string
	dir     string
	apps    string // the app-set file
	dests   string // the destinations file
	cliEnv  *cliEnv
	local   *harness.Repo
	remote  *harness.Repo
	ctlID   string
	compose string
}

func newTwoSwarms(t *testing.T) *twoSwarms {
	t.Helper()
	if skepBinary == "" {
		t.Skip("no skep binary in -short mode")
	}
	main := harness.RequireSwarm(t)
	second := harness.RequireSwarm2(t)
	e := &twoSwarms{main: main, second: second, git: harness.StartGitServer(t, harness.GitServerOptions{}),
		ns: harness.Name(t, "dst"), dir: t.TempDir(), cliEnv: &cliEnv{}}
	// The test image is built from the same content in both engines, so
	// one reference names it on either swarm.
	e.v1 = harness.TestImage(t, main, harness.ImageOptions{Version: "v1"})
	e.v2 = harness.TestImage(t, main, harness.ImageOptions{Version: "v2"})
	for _, v := range []string{"v1", "v2"} {
		harness.TestImage(t, second.Client, harness.ImageOptions{Version: v})
	}
	for _, rel := range []string{"here", "there", "ssh"} {
		harness.CleanupStack(t, main, e.ns+"-"+rel)
		harness.CleanupStack(t, second.Client, e.ns+"-"+rel)
	}
	e.compose = "services:\n  web:\n    image: ${IMAGE}\n    deploy: {endpoint_mode: dnsrr, replicas: 1}\n"
	e.local = e.git.CreateRepo(t, "local")
	e.local.Commit(t, "main", map[string]string{"compose.yaml": e.compose, ".env": "IMAGE=" + e.v1 + "\n"})
	e.remote = e.git.CreateRepo(t, "remote")
	e.remote.Commit(t, "main", map[string]string{"compose.yaml": e.compose, ".env": "IMAGE=" + e.v1 + "\n"})
	e.apps = filepath.Join(e.dir, "apps.yaml")
	e.dests = filepath.Join(e.dir, "destinations.yaml")
	return e
}

// writeApps writes the app set: "here" on the local swarm, "there" on the
// second swarm over TLS, and, when withSSH, "there-ssh" on the second swarm
// over ssh, a second destination name with its own ownership.
func (e *twoSwarms) writeApps(t *testing.T, withSSH bool) { e.writeAppsTo(t, withSSH, "two") }

// writeAppsTo is writeApps with "there" deployed to thereSwarm; its
// syncPolicy.prune is on, so a move removes the release it leaves.
func (e *twoSwarms) writeAppsTo(t *testing.T, withSSH bool, thereSwarm string) {
	t.Helper()
	set := "apiVersion: skep/v1\napplications:\n" +
		appEntry("here", e.ns+"-here", e.local.URL, "", "") +
		appEntry("there", e.ns+"-there", e.remote.URL, thereSwarm, "    driftDetection: live\n")
	if withSSH {
		set += appEntry("there-ssh", e.ns+"-ssh", e.remote.URL, "two-ssh", "")
	}
	writeTestFile(t, e.apps, set)
}

// writeDests writes the destinations file: "two" tries a manager that
// never answers before the TLS one, "two-ssh" goes through sshd.
func (e *twoSwarms) writeDests(t *testing.T) {
	t.Helper()
	s := e.second
	tls := fmt.Sprintf("{ca: %s, cert: %s, key: %s}", s.TLSCA, s.TLSCert, s.TLSKey)
	writeTestFile(t, e.dests, fmt.Sprintf(`apiVersion: skep/v1
kind: Destinations
destinations:
  - name: two
    managers:
      - host: tcp://127.0.0.1:1
        tls: %s
      - host: %s
        tls: %s
  - name: two-ssh
    managers:
      - host: %s
        ssh: {key: %s, knownHosts: %s}
`, tls, s.TCP, tls, s.SSH, s.SSHKey, s.KnownHosts))
}

// appEntry is one automated application of an app set, on swarmName,
// with extra lines appended.
func appEntry(name, release, repo, swarmName, extra string) string {
	return fmt.Sprintf(`  - name: %s
    release: %s
    source: {repo: %s, revision: main}
    destination: {swarm: %q}
    syncPolicy: {automated: true, interval: 10s, resolveImage: never, prune: true}
%s`, name, release, repo, swarmName, extra)
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// serviceOf returns the live service web of release on cli, or nil.
func serviceOf(ctx context.Context, cli *client.Client, release string) (*swarm.Service, error) {
	return harness.ServiceNamed(ctx, cli, release+"_web")
}

// waitImage waits until release's service on cli runs image.
func waitImage(t *testing.T, cli *client.Client, release, image string) *swarm.Service {
	t.Helper()
	var got *swarm.Service
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := serviceOf(ctx, cli, release)
		if err != nil || s == nil {
			return false, fmt.Sprintf("service %s_web: %v (absent)", release, err)
		}
		got = s
		return s.Spec.TaskTemplate.ContainerSpec.Image == image, "image " + s.Spec.TaskTemplate.ContainerSpec.Image
	})
	return got
}

// appsByName reads `skep app list -o json`.
func (e *twoSwarms) appsByName(t *testing.T, args ...string) map[string]wire.Application {
	t.Helper()
	var list wire.ApplicationList
	out := e.cliEnv.ok(t, append([]string{"app", "list", "-o", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("app list -o json: %v\n%s", err, out)
	}
	m := map[string]wire.Application{}
	for _, a := range list.Applications {
		m[a.Name] = a
	}
	return m
}

// eventsOf lists the kept events of type typ.
func (e *twoSwarms) eventsOf(t *testing.T, typ string) []wire.EventItem {
	t.Helper()
	var list wire.EventList
	out := e.cliEnv.ok(t, "events", "--type", typ, "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("events -o json: %v\n%s", err, out)
	}
	return list.Events
}

func TestOneControllerKeepsTwoSwarms(t *testing.T) {
	e := newTwoSwarms(t)
	e.writeApps(t, true)
	e.writeDests(t)
	e.ctlID = harness.Name(t, "ctl")
	launch(t, e.cliEnv, e.dir, e.apps, "--destinations", e.dests, "--prune", "--appset-interval", "2s", "--controller-id", e.ctlID)
	second := e.second.Client

	t.Run("each application runs on its own swarm, owned per destination", func(t *testing.T) {
		here := waitImage(t, e.main, e.ns+"-here", e.v1)
		there := waitImage(t, second, e.ns+"-there", e.v1)
		viaSSH := waitImage(t, second, e.ns+"-ssh", e.v1)
		for _, c := range []struct {
			svc  *swarm.Service
			want string
		}{{here, e.ctlID}, {there, e.ctlID + "@two"}, {viaSSH, e.ctlID + "@two-ssh"}} {
			if got := c.svc.Spec.Labels[stack.LabelController]; got != c.want {
				t.Errorf("%s: controller label %q, want %q", c.svc.Spec.Name, got, c.want)
			}
		}
		for _, c := range []struct {
			cli     *client.Client
			release string
		}{{e.main, e.ns + "-there"}, {e.main, e.ns + "-ssh"}, {second, e.ns + "-here"}} {
			if s, err := serviceOf(t.Context(), c.cli, c.release); err != nil || s != nil {
				t.Errorf("%s_web is on the wrong swarm (%v)", c.release, err)
			}
		}
	})

	t.Run("swarm list and app list name the swarms", func(t *testing.T) {
		var list wire.SwarmList
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			out := e.cliEnv.ok(t, "swarm", "list", "-o", "json")
			if err := json.Unmarshal([]byte(out), &list); err != nil {
				return false, err.Error()
			}
			for _, s := range list.Swarms {
				if !s.Reachable || s.EngineVersion == "" || s.APIVersion == "" || s.Nodes != 1 || s.Applications != 1 {
					return false, out
				}
			}
			return len(list.Swarms) == 3, out
		})
		if names := []string{list.Swarms[0].Name, list.Swarms[1].Name, list.Swarms[2].Name}; strings.Join(names, ",") != ",two,two-ssh" {
			t.Errorf("swarms %q, want the local one first, then by name", names)
		}
		table := e.cliEnv.ok(t, "app", "list")
		if !strings.Contains(table, "SWARM") || !strings.Contains(table, "two-ssh") {
			t.Errorf("app list has no SWARM column:\n%s", table)
		}
		only := e.appsByName(t, "--swarm", "two")
		if _, ok := only["there"]; len(only) != 1 || !ok {
			t.Errorf("app list --swarm two = %v, want only there", only)
		}
		local := e.appsByName(t, "--swarm", "")
		if _, ok := local["here"]; len(local) != 1 || !ok {
			t.Errorf(`app list --swarm "" = %v, want only here`, local)
		}
	})

	t.Run("a commit reaches only its swarm", func(t *testing.T) {
		before, err := serviceOf(t.Context(), e.main, e.ns+"-here")
		if err != nil || before == nil {
			t.Fatal(err)
		}
		e.remote.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
		waitImage(t, second, e.ns+"-there", e.v2)
		waitImage(t, second, e.ns+"-ssh", e.v2)
		after, err := serviceOf(t.Context(), e.main, e.ns+"-here")
		if err != nil || after == nil || writeMark(*after) != writeMark(*before) {
			t.Errorf("the local swarm's service was written (%v → %v): %v", before, after, err)
		}
	})

	t.Run("an out-of-band change on the second swarm is corrected there", func(t *testing.T) {
		s, err := serviceOf(t.Context(), second, e.ns+"-there")
		if err != nil || s == nil {
			t.Fatal(err)
		}
		three := uint64(3)
		spec := s.Spec
		spec.Mode.Replicated.Replicas = &three
		if _, err := second.ServiceUpdate(t.Context(), s.ID, s.Version, spec, swarm.ServiceUpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
			s, err := serviceOf(ctx, second, e.ns+"-there")
			if err != nil || s == nil {
				return false, fmt.Sprint(err)
			}
			return *s.Spec.Mode.Replicated.Replicas == 1, fmt.Sprintf("replicas %d", *s.Spec.Mode.Replicated.Replicas)
		})
	})

	t.Run("a stopped swarm makes only its applications unknown and prunes nothing there", func(t *testing.T) {
		e.second.Stop(t)
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			apps := e.appsByName(t)
			there, viaSSH, here := apps["there"], apps["there-ssh"], apps["here"]
			return there.Health == "unknown" && viaSSH.Health == "unknown" && here.Health == "healthy" &&
					strings.Contains(there.HealthMessage, `swarm "two"`),
				fmt.Sprintf("here %s, there %s (%s), there-ssh %s", here.Health, there.Health, there.HealthMessage, viaSSH.Health)
		})
		down := map[string]int{}
		for _, ev := range e.eventsOf(t, "swarm-unreachable") {
			down[ev.Swarm]++
		}
		// One per transition: an Engine on its way down can answer once
		// more between failures, which is a second transition (seen once
		// under load), so each swarm is checked for at least one.
		if len(down) != 2 || down["two"] < 1 || down["two-ssh"] < 1 {
			t.Errorf("swarm-unreachable events by swarm %v, want two and two-ssh", down)
		}
		// The local swarm goes on: a commit there is deployed during the outage.
		e.local.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
		waitImage(t, e.main, e.ns+"-here", e.v2)
		// there-ssh leaves the app set while its swarm cannot be observed:
		// with --prune on, its release is removed only once the swarm answers.
		e.writeApps(t, false)
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			_, still := e.appsByName(t)["there-ssh"]
			return !still, "there-ssh still listed"
		})
		if failed := e.eventsOf(t, "prune-failed"); len(failed) > 0 {
			t.Errorf("prune attempted on an unobserved swarm: %+v", failed)
		}
	})

	t.Run("the swarm answering again converges", func(t *testing.T) {
		e.second.Start(t)
		// Health may read "restarting" for a while: the engine's stop failed
		// the tasks it ran, and Swarm replaced them. Converged is: known
		// again, synced, and every task running.
		harness.Eventually(t, 2*time.Minute, func(context.Context) (bool, string) {
			there := e.appsByName(t)["there"]
			return there.Health != "unknown" && there.Sync == "synced" && there.Services.Desired == 1 && there.Services.Running == 1,
				fmt.Sprintf("%s (%s) %s %d/%d", there.Health, there.HealthMessage, there.Sync, there.Services.Running, there.Services.Desired)
		})
		harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
			s, err := serviceOf(ctx, second, e.ns+"-ssh")
			return err == nil && s == nil, fmt.Sprintf("%s_web still there (%v)", e.ns+"-ssh", err)
		})
		if up := e.eventsOf(t, "swarm-reachable"); len(up) < 2 {
			t.Errorf("swarm-reachable events: %+v, want one each for two and two-ssh", up)
		}
		if s, err := serviceOf(t.Context(), second, e.ns+"-there"); err != nil || s == nil || s.Spec.TaskTemplate.ContainerSpec.Image != e.v2 {
			t.Errorf("there after the outage: %v %v", s, err)
		}
	})

	t.Run("a changed destination moves the release and says so", func(t *testing.T) {
		e.writeAppsTo(t, false, "")
		moved := waitImage(t, e.main, e.ns+"-there", e.v2)
		if got := moved.Spec.Labels[stack.LabelController]; got != e.ctlID {
			t.Errorf("moved service's controller label %q, want %q", got, e.ctlID)
		}
		harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
			s, err := serviceOf(ctx, second, e.ns+"-there")
			return err == nil && s == nil, fmt.Sprintf("%s_web still on the second swarm (%v)", e.ns+"-there", err)
		})
		var said bool
		for _, ev := range e.eventsOf(t, "sync-started") {
			if ev.Application == "there" && ev.Swarm == "" && strings.Contains(ev.Message, `moved from swarm "two" to the local swarm`) {
				said = true
			}
		}
		if !said {
			t.Errorf("no sync-started event says the release moved: %+v", e.eventsOf(t, "sync-started"))
		}
	})
}

func TestDestinationsThatCannotBeTrustedStopTheStart(t *testing.T) {
	e := newTwoSwarms(t)
	s := e.second
	// A CA that did not sign the engine's certificate, and a known_hosts
	// file holding another key for the sshd's address.
	pki := harness.NewPKI(t, filepath.Join(e.dir, "other"), "127.0.0.1")
	wrongHosts := filepath.Join(e.dir, "known_hosts")
	host := strings.TrimPrefix(s.SSH, "ssh://")
	host = host[strings.Index(host, "@")+1:]
	hostname, port, _ := strings.Cut(host, ":")
	writeTestFile(t, wrongHosts, fmt.Sprintf("[%s]:%s ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHn4nXPh0JiP7pA3wGm1FvZfcsJ8RZx3cyq0XqVHwLQF\n", hostname, port))
	for _, tc := range []struct {
		name, dest, want string
	}{
		{"wrong CA", fmt.Sprintf("- name: two\n    managers:\n      - host: %s\n        tls: {ca: %s, cert: %s, key: %s}\n", s.TCP, pki.CA, s.TLSCert, s.TLSKey),
			`swarm "two"`},
		{"unknown ssh host key", fmt.Sprintf("- name: two-ssh\n    managers:\n      - host: %s\n        ssh: {key: %s, knownHosts: %s}\n", s.SSH, s.SSHKey, wrongHosts),
			`swarm "two-ssh"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeTestFile(t, e.dests, "apiVersion: skep/v1\nkind: Destinations\ndestinations:\n  "+tc.dest)
			// An application on the local swarm: a start refused for one
			// destination starts nothing anywhere.
			writeTestFile(t, e.apps, "apiVersion: skep/v1\napplications:\n"+appEntry("here", e.ns+"-here", e.local.URL, "", ""))
			token := filepath.Join(t.TempDir(), "token")
			writeTestFile(t, token, "destinations-e2e-token\n")
			env := append(os.Environ(), "SKEP_ADMIN_TOKEN_FILE="+token)
			_, errOut, code := e.cliEnv.run(t, env, "controller", "--config", e.apps, "--destinations", e.dests,
				"--data", filepath.Join(t.TempDir(), "data"), "--listen", freeAddr(t))
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Errorf("controller exit %d, stderr:\n%s\nwant a failure naming %s", code, errOut, tc.want)
			}
			if s, err := serviceOf(t.Context(), e.main, e.ns+"-here"); err != nil || s != nil {
				t.Errorf("a refused start deployed %v (%v)", s, err)
			}
			_, checkErr, code := e.cliEnv.run(t, os.Environ(), "swarm", "check", e.dests)
			if code == 0 || !strings.Contains(checkErr, "1 of 1 destinations failed") {
				t.Errorf("swarm check exit %d: %s", code, checkErr)
			}
		})
	}

	t.Run("an unreachable address leaves its applications unknown and the others running", func(t *testing.T) {
		writeTestFile(t, e.dests, fmt.Sprintf(`apiVersion: skep/v1
kind: Destinations
destinations:
  - name: gone
    managers:
      - host: tcp://127.0.0.1:1
        tls: {ca: %s, cert: %s, key: %s}
`, s.TLSCA, s.TLSCert, s.TLSKey))
		writeTestFile(t, e.apps, "apiVersion: skep/v1\napplications:\n"+
			appEntry("here", e.ns+"-here", e.local.URL, "", "")+appEntry("away", e.ns+"-there", e.remote.URL, "gone", ""))
		launch(t, e.cliEnv, e.dir, e.apps, "--destinations", e.dests)
		waitImage(t, e.main, e.ns+"-here", e.v1)
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			away := e.appsByName(t)["away"]
			return away.Health == "unknown" && strings.Contains(away.HealthMessage+away.LastError, `swarm "gone"`),
				away.Health + ": " + away.HealthMessage + " / " + away.LastError
		})
		if s, err := serviceOf(t.Context(), e.main, e.ns+"-there"); err != nil || s != nil {
			t.Errorf("the unreachable swarm's release landed on the local swarm: %v %v", s, err)
		}
	})
}
