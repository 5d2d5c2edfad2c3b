// The layering tests keep each package in its lane: every package's
// project imports are listed, what is not listed fails, and a few outside
// modules are reserved to the one package that adapts them.
package skep_test

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/skep-cd/skep/"

// allowed names, for every package of the module (by directory), the
// project packages it may import outside its tests. It denies by default: a
// package missing here fails the test until its place in the layers is
// decided (and written down in docs/architecture.md). The layers, from the
// top: entry (cmd/skep, cli) → face (api, ui) and loop (reconcile) → pass
// (syncpass: one sync of one release, which never imports the loop) → steps
// (artifact, render, chart, stack, plan, health, placement, apply, hook,
// prune, preview, canary)
// and records (notify, store) → adapters (swarm, gitsource, chartrepo)
// and leaves (wire, outcome, configfile, secret, sops, version, window,
// egress, memtrim, tickgrid). The loop never
// imports the face.
var allowed = map[string][]string{
	"cmd/skep":          {"cli"},
	"cli":               {"api", "appset", "artifact", "chart", "chartrepo", "client", "configfile", "demo", "egress", "gitsource", "identity", "lease", "memtrim", "notify", "plan", "reconcile", "render", "replica", "review", "sops", "stack", "store", "swarm", "ui", "version", "wire"},
	"client":            {"wire"},
	"api":               {"appset", "artifact", "configfile", "notify", "plan", "reconcile", "secret", "stack", "store", "version", "wire"},
	"api/authtest":      {"api"},
	"reconcile":         {"apply", "appset", "artifact", "chart", "gitsource", "health", "hook", "notify", "outcome", "plan", "prune", "sops", "stack", "swarm", "syncpass", "tickgrid", "window"},
	"syncpass":          {"apply", "appset", "artifact", "canary", "chart", "chartrepo", "gitsource", "health", "hook", "notify", "outcome", "placement", "plan", "preview", "prune", "render", "sops", "stack", "swarm", "version", "window"},
	"render":            {"canary", "sops"},
	"chart":             {"configfile", "render", "version"},
	"chartrepo":         {"secret"},
	"stack":             {"canary", "sops"},
	"plan":              {"stack"},
	"health":            {},
	"placement":         {},
	"apply":             {"outcome", "stack"},
	"prune":             {"stack"},
	"hook":              {"stack"},
	"artifact":          {"configfile"},
	"preview":           {"stack"},
	"canary":            {},
	"ui":                {},
	"notify":            {"configfile", "secret", "wire"},
	"notify/notifytest": {"notify"},
	"store":             {"notify"},
	"appset":            {"configfile", "tickgrid", "window"},
	"swarm":             {"configfile", "tickgrid"},
	"lease":             {},
	"gitsource":         {"configfile", "egress", "secret"},
	"wire":              {},
	"outcome":           {},
	"configfile":        {},
	"secret":            {},
	"sops":              {},
	"version":           {},
	"egress":            {},
	"memtrim":           {"tickgrid"},
	"tickgrid":          {},
	"window":            {},
	"golden":            {},
	"demo":              {"githttp", "stack"},
	"githttp":           {},
	"harness":           {"githttp"},
	"harness/testapp":   {},
	"bench":             {"client", "harness", "wire"},

	// Sign-in and CI identities: the face, above the API whose seams
	// they fill (only cli imports identity); and the test helpers of both.
	"identity": {"api", "configfile", "store", "wire"},
	// Pull requests' plans: the face too, filling api.Reviews from the
	// loop's Propose (only cli imports review).
	"review":                {"api", "appset", "gitsource", "notify", "plan", "reconcile", "wire"},
	"identity/identitytest": {},
	"api/apitest":           {"api", "notify", "wire"},

	// A replica of a replicated controller: the face beside the API it
	// fronts (only cli imports it); it follows the leader through the
	// client, and the lease (an adapter) through its Elector.
	"replica": {"api", "client", "lease", "notify", "wire"},
}

// onlyFrom lists outside imports that just the named packages may use: one
// Engine adapter, one SQLite user, one metrics server, and processes
// started only where a real program must run.
var onlyFrom = map[string][]string{
	"github.com/docker/docker/client":          {"swarm", "harness", "bench"},
	"modernc.org/sqlite":                       {"store"},
	"github.com/prometheus/client_golang":      {"api"},
	"os/exec":                                  {"harness", "cli", "githttp", "demo", "bench"},
	"github.com/go-git/go-git/v5":              {"gitsource", "harness"},
	"github.com/docker/cli/cli/compose/loader": {"render"},
	// Docker's ssh transport starts the ssh client: only where destinations
	// are dialled.
	"github.com/docker/cli/cli/connhelper": {"swarm"},
	// The test provider: a real OpenID provider, for tests only.
	"github.com/zitadel/oidc/v3": {"identity"},
}

func TestPackagesImportOnlyWhatTheirLayerAllows(t *testing.T) {
	imports := readImports(t)
	if len(imports) < 20 {
		t.Fatalf("found only %d packages; is the test running at the module root?", len(imports))
	}
	for pkg, deps := range imports {
		may, known := allowed[pkg]
		if !known {
			t.Errorf("package %s has no entry in allowed: decide its layer (layering_test.go, docs/architecture.md)", pkg)
			continue
		}
		for _, dep := range deps {
			own, ok := strings.CutPrefix(dep, module)
			if ok && !slices.Contains(may, own) {
				t.Errorf("package %s imports %s, which its layer does not allow (allowed: %v)", pkg, own, may)
			}
		}
		top := strings.SplitN(pkg, "/", 2)[0]
		for dep, only := range onlyFrom {
			if containsDep(deps, dep) && !slices.Contains(only, top) {
				t.Errorf("package %s imports %s; only %v may", pkg, dep, only)
			}
		}
	}
	for pkg := range allowed {
		if _, ok := imports[pkg]; !ok {
			t.Errorf("allowed names %s, which is not a package of the module any more", pkg)
		}
	}
}

// The CLI's client must link no server: not the reconcile loop, not
// SQLite, not Prometheus. go list sees what the compiler links, which the
// direct imports above cannot.
func TestClientLinksNoServer(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "./client").Output()
	if err != nil {
		t.Fatalf("go list -deps ./client: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"wire") {
		t.Fatalf("go list -deps ./client lists no %swire; is the test reading the right module? got %d packages", module, len(deps))
	}
	for _, dep := range deps {
		for _, server := range []string{"modernc.org/sqlite", "github.com/prometheus/", module + "reconcile", module + "api", module + "store", "github.com/docker/docker/client"} {
			if strings.HasPrefix(dep, server) {
				t.Errorf("client links %s", dep)
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

func containsDep(deps []string, dep string) bool {
	for _, d := range deps {
		if d == dep || strings.HasPrefix(d, dep+"/") {
			return true
		}
	}
	return false
}
