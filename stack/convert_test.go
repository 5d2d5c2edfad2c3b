package stack

import (
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/cli/cli/compose/loader"
	composetypes "github.com/docker/cli/cli/compose/types"
	"github.com/docker/cli/pkg/kvfile"
	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/golden"
)

// fixtureDir holds the compose fixtures shared with the render and parity
// tests.
const fixtureDir = "../testdata/compose"

// loadFixture loads a shared fixture with docker/cli's loader the way
// `docker stack deploy` would (IMAGE set, .env exported), and reads its
// config and secret files, keyed as Convert expects them. stack does not
// import render, so the test does the loading itself.
func loadFixture(t testing.TB, dir string) (*composetypes.Config, map[string][]byte) {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"IMAGE": "skep-testapp:fixture"}
	if lines, err := kvfile.Parse(filepath.Join(abs, ".env"), nil); err == nil {
		for _, l := range lines {
			k, v, _ := strings.Cut(l, "=")
			env[k] = v
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	names := []string{"compose.yaml"}
	if data, err := os.ReadFile(filepath.Join(abs, "files")); err == nil {
		names = strings.Fields(string(data))
	}
	details := composetypes.ConfigDetails{WorkingDir: abs, Environment: env}
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(abs, name))
		if err != nil {
			t.Fatal(err)
		}
		dict, err := loader.ParseYAML(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		details.ConfigFiles = append(details.ConfigFiles, composetypes.ConfigFile{Filename: name, Config: dict})
	}
	cfg, err := loader.Load(details)
	if err != nil {
		t.Fatalf("load %s: %v", dir, err)
	}
	files := map[string][]byte{}
	for _, c := range cfg.Configs {
		readObjectFile(t, files, composetypes.FileObjectConfig(c))
	}
	for _, s := range cfg.Secrets {
		readObjectFile(t, files, composetypes.FileObjectConfig(s))
	}
	return cfg, files
}

func readObjectFile(t testing.TB, files map[string][]byte, obj composetypes.FileObjectConfig) {
	t.Helper()
	if obj.External.External || obj.Driver != "" || obj.File == "" {
		return
	}
	data, err := os.ReadFile(obj.File)
	if err != nil {
		t.Fatal(err)
	}
	files[obj.File] = data
}

func fixtureNames(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) < 10 {
		t.Fatalf("found %d compose fixtures in %s, want at least 10", len(names), fixtureDir)
	}
	return names
}

func testOwner(release string) Owner {
	return Owner{Controller: "test", Application: release, Release: release}
}

func TestConvertMatchesGoldenForEveryFixture(t *testing.T) {
	for _, name := range fixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			cfg, files := loadFixture(t, filepath.Join(fixtureDir, name))
			rel, err := Convert(cfg, Options{Owner: testOwner(name), Files: files})
			if err != nil {
				t.Fatalf("Convert(%s) = %v", name, err)
			}
			got, err := json.MarshalIndent(rel, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", name+".golden.json"), append(got, '\n'))
		})
	}
}

func TestWavesLabelServicesAndOrderTheRelease(t *testing.T) {
	cfg := &composetypes.Config{Services: []composetypes.ServiceConfig{
		{Name: "db", Image: "db"}, {Name: "api", Image: "api"}, {Name: "web", Image: "web"},
	}}
	rel, err := Convert(cfg, Options{Owner: Owner{Controller: "c", Application: "a", Release: "shop"}, Waves: map[string]int{"api": 1, "web": 2}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"shop_db": "", "shop_api": "1", "shop_web": "2"} {
		if got := rel.Services[name].Labels[LabelWave]; got != want {
			t.Errorf("%s's %s label = %q, want %q", name, LabelWave, got, want)
		}
	}
	if d := cmp.Diff([]int{0, 1, 2}, rel.Waves()); d != "" {
		t.Errorf("Waves (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"shop_api", "shop_db"}, slices.Sorted(maps.Keys(rel.UpTo(1).Services))); d != "" {
		t.Errorf("UpTo(1) services (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]int{0}, (Release{}).Waves()); d != "" {
		t.Errorf("Waves of an empty release (-want +got):\n%s", d)
	}
}

func TestHooksBecomeOneShotJobsOutsideTheReleasesServices(t *testing.T) {
	cfg := &composetypes.Config{Services: []composetypes.ServiceConfig{
		{Name: "migrate", Image: "db", Ports: []composetypes.ServicePortConfig{{Target: 80, Published: 8080}}},
		{Name: "web", Image: "web"},
	}}
	owner := Owner{Controller: "c", Application: "a", Release: "shop"}
	rel, err := Convert(cfg, Options{Owner: owner, Hooks: map[string]Hook{"migrate": {Phase: PreSync, Timeout: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"shop_web"}, slices.Sorted(maps.Keys(rel.Services))); d != "" {
		t.Errorf("services (-want +got):\n%s", d)
	}
	if len(rel.Hooks) != 1 {
		t.Fatalf("hooks = %+v, want migrate alone", rel.Hooks)
	}
	h := rel.Hooks[0]
	if h.Service != "migrate" || h.Phase != PreSync || h.Timeout != time.Minute || h.Spec.Name != "shop_migrate" {
		t.Errorf("hook = %s %s %s %s, want migrate pre-sync 1m0s shop_migrate", h.Service, h.Phase, h.Timeout, h.Spec.Name)
	}
	job := h.Spec.Mode.ReplicatedJob
	if job == nil || *job.TotalCompletions != 1 || *job.MaxConcurrent != 1 || h.Spec.Mode.Replicated != nil {
		t.Errorf("mode = %+v, want a replicated job of one completion", h.Spec.Mode)
	}
	if rp := h.Spec.TaskTemplate.RestartPolicy; rp == nil || rp.Condition != swarm.RestartPolicyConditionNone {
		t.Errorf("restart policy = %+v, want condition none", rp)
	}
	if h.Spec.EndpointSpec != nil && len(h.Spec.EndpointSpec.Ports) != 0 {
		t.Errorf("ports = %+v, want none on a job", h.Spec.EndpointSpec.Ports)
	}
	if !owner.Owns(h.Spec.Labels) || h.Spec.Labels[LabelKind] != KindHook || h.Spec.Labels[LabelHook] != "migrate" {
		t.Errorf("labels = %v, want the owner's, %s=%s and %s=migrate", h.Spec.Labels, LabelKind, KindHook, LabelHook)
	}
}
