package appset

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/skep-cd/skep/configfile"
)

const twoSwarms = `apiVersion: skep/v1
applications:
  - name: web
    source: {repo: /srv/git/web}
  - name: api
    source: {repo: /srv/git/api}
    destination:
      swarm: staging
  - name: db
    source: {repo: /srv/git/db}
    destination: {swarm: prod}
`

func TestCheckSwarmsNamesTheLineOfEveryUnknownSwarm(t *testing.T) {
	set, err := Parse("apps.yaml", []byte(twoSwarms))
	if err != nil {
		t.Fatal(err)
	}
	known := func(name string) bool { return name == "staging" }
	err = set.CheckSwarms(known, `"", staging`)
	var problems configfile.Problems
	if !errors.As(err, &problems) {
		t.Fatalf("CheckSwarms = %v, want configfile.Problems", err)
	}
	want := `apps.yaml:11:26: applications[2].destination.swarm: unknown swarm "prod"; known: "", staging`
	if len(problems) != 1 || problems[0].String() != want {
		t.Fatalf("problems = %q, want one: %s", problems, want)
	}
	if err := set.CheckSwarms(func(string) bool { return true }, ""); err != nil {
		t.Errorf("every swarm known: %v", err)
	}
}

// staticSource serves one app-set file.
type staticSource string

func (s staticSource) Load(context.Context) (*Set, string, error) {
	set, err := Parse("apps.yaml", []byte(s))
	return set, "r1", err
}

func TestCheckedWatcherKeepsOutASetItsCheckRefuses(t *testing.T) {
	w := NewCheckedWatcher(staticSource(twoSwarms), func(s *Set) error {
		return s.CheckSwarms(func(n string) bool { return n == "staging" }, `"", staging`)
	})
	_, err := w.Reload(context.Background())
	if err == nil || !strings.Contains(err.Error(), `unknown swarm "prod"`) {
		t.Fatalf("Reload = %v, want the unknown swarm", err)
	}
	if snap := w.Current(); snap.Set != nil || snap.Err == nil {
		t.Errorf("snapshot = %+v, want no set and the error", snap)
	}
}
