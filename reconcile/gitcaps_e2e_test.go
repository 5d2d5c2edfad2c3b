package reconcile_test

import (
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/reconcile"
)

// A repository holding a file over the git cache's cap (one the compose
// file never uses) stalls its application with an error naming the cap,
// and the controller goes on deploying the others.
func TestARepositoryOverTheGitCapsStallsAndTheOthersDeploy(t *testing.T) {
	e := newEnv(t)
	e.maxFileBytes = 1 << 20
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})

	big := e.git.CreateRepo(t, "big")
	blob := make([]byte, 4<<20)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	bigNS := e.ns + "-big"
	harness.CleanupStack(t, e.cli, bigNS)
	head := big.Commit(t, "main", map[string]string{
		"compose.yaml":   compose(harness.FreePort(t)),
		"settings.txt":   "one\n",
		".env":           "IMAGE=" + e.v1 + "\n",
		"assets/big.bin": string(blob),
	})
	bigApp := strings.NewReplacer("name: web\n", "name: big\n", "release: "+e.ns+"\n", "release: "+bigNS+"\n", "repo: "+e.repo.URL+"\n", "repo: "+big.URL+"\n").
		Replace(e.app("web", true))
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(bigApp, e.app("web", true)))})
	run(t, ctrl)

	st := waitStatus(t, ctrl, "big", 2*time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == head && s.LastError != "" })
	if st.LastErrorClass != "stalled" || !strings.Contains(st.LastError, "blob of 4.0 MiB, over the 1.0 MiB cap on one file") {
		t.Errorf("big: error = %q (%s), want a stalled error naming the cap", st.LastError, st.LastErrorClass)
	}
	e.waitImage(t, e.v1, 2*time.Minute)
	if s, err := harness.ServiceNamed(t.Context(), e.cli, bigNS+"_web"); err != nil || s != nil {
		t.Errorf("service of the refused repository = %v, %v; want none", s, err)
	}
}
