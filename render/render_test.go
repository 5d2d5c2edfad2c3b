package render

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/golden"
)

// fixtureDir holds the compose fixtures shared with the stack and parity tests.
const fixtureDir = "../testdata/compose"

// fixtureImage is what the fixtures' ${IMAGE} becomes in offline tests.
const fixtureImage = "skep-testapp:fixture"

// FixtureInput is the Input for one shared fixture: its `files` list when
// present, and IMAGE set.
func fixtureInput(t testing.TB, name string) Input {
	t.Helper()
	in := Input{Root: filepath.Join(fixtureDir, name), Variables: map[string]string{"IMAGE": fixtureImage}}
	data, err := os.ReadFile(filepath.Join(in.Root, "files"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		t.Fatal(err)
	default:
		in.Files = strings.Fields(string(data))
	}
	return in
}

func fixtures(t testing.TB) []string {
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

// goldenDocument is the shape of render's golden files.
type goldenDocument struct {
	Config   any               `yaml:"config"`
	Files    map[string]string `yaml:"files,omitempty"`
	Warnings []string          `yaml:"warnings,omitempty"`
}

func marshalDocument(t *testing.T, doc *Document) []byte {
	t.Helper()
	g := goldenDocument{Config: doc.Config, Warnings: doc.Warnings, Files: map[string]string{}}
	for name, data := range doc.Files {
		g.Files[name] = string(data)
	}
	out, err := yaml.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestComposeMatchesGoldenForEveryFixture(t *testing.T) {
	for _, name := range fixtures(t) {
		t.Run(name, func(t *testing.T) {
			doc, err := Compose(t.Context(), fixtureInput(t, name))
			if err != nil {
				t.Fatalf("Compose(%s) = %v", name, err)
			}
			golden.Check(t, filepath.Join("testdata", name+".golden.yaml"), marshalDocument(t, doc))
		})
	}
}
