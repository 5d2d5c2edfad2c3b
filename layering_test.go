// The layering test keeps each reconcile step in its lane: it reads every
// package's imports and fails when a step imports what it must not.
package skep_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/skep-cd/skep/"

// forbidden maps a package to import paths (module-relative for our own
// packages, full for others) it must never import, outside its tests.
// "" stands for every package of the module.
var forbidden = map[string][]string{
	"render":  {"swarm", "apply", "gitsource", "reconcile", "plan", "prune", "notify", "api", "github.com/docker/docker/client"},
	"stack":   {"swarm", "apply", "gitsource", "reconcile", "render", "plan", "github.com/docker/docker/client"},
	"plan":    {"swarm", "apply", "gitsource", "reconcile", "render", "github.com/docker/docker/client"},
	"health":  {"swarm", "apply", "gitsource", "reconcile", "render", "github.com/docker/docker/client"},
	"apply":   {"render", "gitsource", "reconcile", "appset", "notify", "github.com/docker/docker/client"},
	"prune":   {"render", "gitsource", "reconcile", "apply", "github.com/docker/docker/client"},
	"appset":  {"swarm", "apply", "reconcile", "render", "github.com/docker/docker/client"},
	"notify":  {"reconcile", "swarm", "apply", "render", "api"},
	"store":   {"reconcile", "swarm", "apply", "render", "api"},
	"client":  {"reconcile", "swarm", "apply", "render", "gitsource", "store"},
	"version": {"cli", "reconcile"},
	"api":     {"reconcile", "swarm", "apply", "render", "gitsource", "prune", "github.com/docker/docker/client"},
	"swarm":   {"reconcile", "apply", "render", "plan", "prune", "appset", "gitsource"},
	"demo":    {"reconcile", "apply", "render", "plan", "api", "github.com/docker/docker/client"},
	// configfile and secret sit below every package that reads a
	// configuration file, so they import no package of the project.
	"configfile": {""},
	"secret":     {""},
}

// onlyFrom lists imports that just the named packages may use.
var onlyFrom = map[string][]string{
	"github.com/docker/docker/client": {"swarm", "harness"},
	"os/exec":                         {"harness", "cli", "githttp", "demo"},
}

func TestPackagesImportOnlyWhatTheirLayerAllows(t *testing.T) {
	imports := readImports(t)
	if len(imports) < 3 {
		t.Fatalf("found only %d packages; is the test running at the module root?", len(imports))
	}
	for pkg, deps := range imports {
		top := strings.SplitN(pkg, "/", 2)[0]
		for _, bad := range forbidden[top] {
			full := bad
			if !strings.Contains(bad, ".") {
				full = module + bad
			}
			for _, dep := range deps {
				if dep == full || strings.HasPrefix(dep, full+"/") || (bad == "" && strings.HasPrefix(dep, module)) {
					t.Errorf("package %s imports %s, which its layer forbids", pkg, dep)
				}
			}
		}
		for dep, allowed := range onlyFrom {
			if containsDep(deps, dep) && !contains(allowed, top) {
				t.Errorf("package %s imports %s; only %v may", pkg, dep, allowed)
			}
		}
	}
}

func TestMainPackageHoldsOnlyMain(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("cmd", "skep", "main.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.Decls); n != 2 { // the import block and func main
		t.Errorf("cmd/skep/main.go has %d declarations, want only imports and main", n)
	}
}

// readImports returns, per package directory, the imports of its non-test files.
func readImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			out[dir] = append(out[dir], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsDep(deps []string, dep string) bool {
	for _, d := range deps {
		if d == dep || strings.HasPrefix(d, dep+"/") {
			return true
		}
	}
	return false
}
