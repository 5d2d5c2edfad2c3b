package skep_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The sync pass keeps its shape: the loop's type grows only by what the API
// asks of it, no function of the loop or the pass runs past a screen, and
// neither reads the wall clock outside the wiring that injects it.
// docs/architecture.md says why each bound is what it is.
const (
	controllerBudget = 70 // methods of reconcile.Controller
	functionBudget   = 60 // lines of any function of reconcile and syncpass
	runBudget        = 50 // lines of syncpass.Run
)

// decls parses the non-test files of dir.
func decls(t *testing.T, dir string) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s; is the test running at the module root?", dir)
	}
	return fset, files
}

// receiver names the type a method is declared on, "" for a function.
func receiver(fd *ast.FuncDecl) string {
	if fd.Recv == nil {
		return ""
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}

func TestControllerGrowsOnlyByAPI(t *testing.T) {
	_, files := decls(t, "reconcile")
	n := 0
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && receiver(fd) == "Controller" {
				n++
			}
		}
	}
	if n > controllerBudget {
		t.Errorf("reconcile.Controller has %d methods, more than its budget of %d: new sync behaviour is a gate rule, a write step or a phase of syncpass, not a Controller method", n, controllerBudget)
	}
	if n < 20 {
		t.Errorf("reconcile.Controller has %d methods; the count is broken", n)
	}
}

func TestLoopAndPassFunctionsFitOnAScreen(t *testing.T) {
	for _, dir := range []string{"reconcile", "syncpass"} {
		fset, files := decls(t, dir)
		for _, f := range files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				limit := functionBudget
				if dir == "syncpass" && fd.Name.Name == "Run" && fd.Recv == nil {
					limit = runBudget
				}
				if lines > limit {
					t.Errorf("%s: %s.%s is %d lines, more than %d", fset.Position(fd.Pos()), dir, fd.Name.Name, lines, limit)
				}
			}
		}
	}
}

// TestLoopAndPassReadNoClockButTheInjectedOnes: the calendar (Options.Now,
// Input.Now) and the wall clock (Env.Wall) are injected; only New wires
// time.Now in.
func TestLoopAndPassReadNoClockButTheInjectedOnes(t *testing.T) {
	for _, dir := range []string{"reconcile", "syncpass"} {
		fset, files := decls(t, dir)
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				if fd, ok := n.(*ast.FuncDecl); ok && dir == "reconcile" && fd.Name.Name == "New" && fd.Recv == nil {
					return false // the wiring
				}
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, isIdent := sel.X.(*ast.Ident); isIdent && id.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Until") {
					t.Errorf("%s: time.%s outside the wiring; use the injected clock", fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
		}
	}
}
