package stack

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/cli/cli/compose/loader"
	composetypes "github.com/docker/cli/cli/compose/types"
	"github.com/docker/cli/pkg/kvfile"

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
