package demo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
)

func TestDemoAppSetIsValidAndLivelyDetected(t *testing.T) {
	set, err := appset.Parse("applications.yaml", []byte(appSet("http://127.0.0.1:1/demo-app.git")))
	if err != nil {
		t.Fatalf("the demo's app set is invalid: %v", err)
	}
	app, ok := set.Lookup("demo")
	if !ok || !app.SyncPolicy.Automated || app.DriftDetection != appset.DriftLive || app.Release != Release {
		t.Fatalf("demo application = %+v, want automated, live drift detection, release %s", app, Release)
	}
}

func TestDemoComposeRendersToOneHostModeService(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"compose.yaml": appCompose(18080), "welcome.txt": "hi\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doc, err := render.Compose(context.Background(), render.Input{Root: dir, Variables: map[string]string{"IMAGE": "skep-demo-app:v1"}})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := stack.Convert(doc.Config, stack.Options{Owner: stack.Owner{Controller: ControllerID, Application: "demo", Release: Release}, Files: doc.Files})
	if err != nil {
		t.Fatal(err)
	}
	svc, ok := rel.Services[Release+"_web"]
	if !ok {
		t.Fatalf("services = %v", rel.Services)
	}
	ports := svc.EndpointSpec.Ports
	if len(ports) != 1 || ports[0].PublishedPort != 18080 || ports[0].PublishMode != "host" {
		t.Errorf("ports = %+v, want 18080 published in host mode", ports)
	}
}

func TestBuildImageRefusesADynamicallyLinkedBinary(t *testing.T) {
	// /bin/sh is dynamically linked on every Debian system.
	err := requireStatic("/bin/sh")
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("requireStatic(/bin/sh) = %v, want a refusal naming CGO_ENABLED=0", err)
	}
	if err := requireStatic(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("requireStatic of a missing file succeeded")
	}
}

func TestDemoThatKeepsRunningEndsByPointingAtTheUIWithTheToken(t *testing.T) {
	var out strings.Builder
	d := &run{opts: Options{Listen: "127.0.0.1:8080"}, out: &out, token: "0123abcd"}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the user's Ctrl-C, already pressed: keepRunning returns at once
	d.keepRunning(ctx)
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	for _, want := range []string{"web UI", "http://127.0.0.1:8080/#/app/demo", "0123abcd"} {
		if !strings.Contains(last, want) {
			t.Errorf("the demo's last line %q does not contain %q; output:\n%s", last, want, out.String())
		}
	}
}

func TestUIAddressIsOneABrowserCanOpen(t *testing.T) {
	for _, tc := range []struct{ name, listen, want string }{
		{"a loopback address is kept", "127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"a port alone means this machine", ":9090", "http://127.0.0.1:9090"},
		{"every IPv4 interface means this machine", "0.0.0.0:8080", "http://127.0.0.1:8080"},
		{"every IPv6 interface means this machine", "[::]:8080", "http://127.0.0.1:8080"},
		{"a host name is kept", "skep.internal:8080", "http://skep.internal:8080"},
		{"an IPv6 address keeps its brackets", "[::1]:8080", "http://[::1]:8080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := baseURL(tc.listen); got != tc.want {
				t.Errorf("baseURL(%q) = %q, want %q", tc.listen, got, tc.want)
			}
		})
	}
}
