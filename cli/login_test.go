package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/api/apitest"
	"github.com/skep-cd/skep/identity"
	"github.com/skep-cd/skep/identity/identitytest"
	"github.com/skep-cd/skep/wire"
)

// loginWorld is a controller's API with an OIDC sign-in whose CLI client
// is skep-cli, at a test provider, and a CLI environment of its own.
type loginWorld struct {
	server   string
	provider *identitytest.Provider
	config   string // the directory of the client config and login.yaml
}

func startLoginWorld(t *testing.T) *loginWorld {
	t.Helper()
	p := identitytest.Start(t, identitytest.Options{Users: []identitytest.User{
		{Subject: "u-bob", Username: "bob", Password: "pw", Email: "bob@example.test", Groups: []string{"web-team"}},
	}})
	p.AddClient(identitytest.Client{ID: "skep-cli", Native: true, Device: true, RedirectURIs: []string{"http://127.0.0.1/callback"}})
	cfg := identity.Config{SignIn: &identity.SignInConfig{Issuer: p.URL, ClientID: "skep", CLIClientID: "skep-cli",
		RedirectURL: "http://127.0.0.1/api/v1/auth/oidc/callback", Label: "Test SSO", Scopes: identity.DefaultScopes(), Claim: "groups",
		SessionLifetime: time.Hour, RefreshBefore: time.Minute, Roles: []identity.GroupRule{
			{Group: "web-team", Role: api.RoleDeployer, Apps: []string{"web*"}},
			{Group: "viewers", Role: api.RoleViewer},
		}}}
	id, err := identity.New(identity.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Options{Reconciler: &apitest.Reconciler{}, Authorizer: api.Chain(id.Authorizers()), SignIn: id.SignIn})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	for _, k := range []string{"SKEP_CONFIG", "SKEP_TOKEN", "SKEP_TOKEN_FILE", "SKEP_CA_FILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("SKEP_SERVER", ts.URL)
	return &loginWorld{server: ts.URL, provider: p, config: filepath.Join(home, ".config", "skep")}
}

// run runs skep with args; answer reads what it prints on stderr as it
// prints it, and plays the person at the provider.
func (w *loginWorld) run(t *testing.T, args []string, answer func(stderr *bufio.Reader)) (code int, stdout string) {
	t.Helper()
	pr, pw := io.Pipe()
	var out strings.Builder
	done := make(chan int, 1)
	go func() {
		defer pw.Close()
		done <- Main(t.Context(), args, &out, pw)
	}()
	r := bufio.NewReader(pr)
	if answer != nil {
		answer(r)
	}
	go func() { _, _ = io.Copy(io.Discard, r) }() // the rest of stderr
	select {
	case code = <-done:
	case <-time.After(time.Minute):
		t.Fatal("skep did not return")
	}
	return code, out.String()
}

// readUntil reads lines until one matches re and returns its groups.
func readUntil(t *testing.T, r *bufio.Reader, re *regexp.Regexp) []string {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if m := re.FindStringSubmatch(line); m != nil {
			return m
		}
		if err != nil {
			t.Fatalf("skep ended its output before %s: %v", re, err)
		}
	}
}

// signInAtTheProvider plays the browser: it opens the address skep
// printed, signs bob in, and follows the provider's redirect to skep's
// port on 127.0.0.1.
func (w *loginWorld) signInAtTheProvider(t *testing.T) func(*bufio.Reader) {
	return func(r *bufio.Reader) {
		authURL := readUntil(t, r, regexp.MustCompile(`^\s+(http\S+)`))[1]
		callback, err := w.provider.LogIn(t.Context(), identitytest.NoRedirects(), authURL, "bob", "pw")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(callback.String(), "http://127.0.0.1:") {
			t.Fatalf("the provider sent the browser to %s, not to skep's port", callback.Redacted())
		}
		resp, err := http.Get(callback.String())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("skep's port answered the redirect %d", resp.StatusCode)
		}
	}
}

func TestLoginThroughTheBrowserKeepsTheTokenInTheUsersConfigAndCommandsUseIt(t *testing.T) {
	w := startLoginWorld(t)
	code, out := w.run(t, []string{"login", "--no-browser"}, w.signInAtTheProvider(t))
	want := "Signed in to " + w.server + " as oidc:" + w.provider.URL + "#u-bob (bob@example.test): deployer of web*."
	if code != ExitOK || strings.TrimSpace(out) != want {
		t.Fatalf("skep login = exit %d, %q; want %q", code, out, want)
	}
	path := filepath.Join(w.config, loginFileName)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %04o, want 0600", path, fi.Mode().Perm())
	}
	l, ok, err := readLogin(path)
	if err != nil || !ok || l.IDToken == "" || l.RefreshToken == "" || l.Server != w.server || l.ClientID != "skep-cli" {
		t.Fatalf("login file = %+v, %t, %v", l, ok, err)
	}

	// A command sends the ID token.
	code, out = w.run(t, []string{"app", "list", "-o", "json"}, nil)
	if code != ExitOK || !strings.Contains(out, `"web"`) {
		t.Fatalf("skep app list after login = exit %d: %s", code, out)
	}

	// Due for renewal, it is renewed at the provider and written back;
	// the groups are read again then.
	w.provider.SetGroups("bob", "viewers")
	l.Expiry = time.Now().Add(30 * time.Second)
	if err := writeLogin(path, l); err != nil {
		t.Fatal(err)
	}
	me := whoamiWith(t, w)
	renewed, _, _ := readLogin(path)
	if renewed.IDToken == l.IDToken || !renewed.Expiry.After(time.Now().Add(time.Minute)) {
		t.Errorf("the ID token was not renewed: expiry %s", renewed.Expiry)
	}
	if me.Role != "viewer" {
		t.Errorf("after the renewal the controller takes bob for %q, want viewer", me.Role)
	}

	// A file others may read is refused, not used.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _ = w.run(t, []string{"status"}, nil)
	if code != ExitFailure {
		t.Errorf("skep status with a login file of mode 0644 = exit %d, want a failure", code)
	}

	code, out = w.run(t, []string{"logout"}, nil)
	if _, err := os.Stat(path); code != ExitOK || !os.IsNotExist(err) {
		t.Errorf("skep logout = exit %d %q and the file is still there (%v)", code, out, err)
	}
}

// whoamiWith runs skep's client as a command would, and asks whoami.
func whoamiWith(t *testing.T, w *loginWorld) wire.Whoami {
	t.Helper()
	c, err := newClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	me, err := c.Whoami(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return me
}

func TestLoginWithADeviceCode(t *testing.T) {
	w := startLoginWorld(t)
	code, out := w.run(t, []string{"login", "--device"}, func(r *bufio.Reader) {
		m := readUntil(t, r, regexp.MustCompile(`open (\S+) on any device and enter the code (\S+)`))
		if err := w.provider.ApproveDevice(context.WithoutCancel(t.Context()), m[1], m[2], "bob", "pw"); err != nil {
			t.Error(err)
		}
	})
	if code != ExitOK || !strings.Contains(out, "deployer of web*") {
		t.Fatalf("skep login --device = exit %d, %q", code, out)
	}
	if me := whoamiWith(t, w); me.Role != "deployer" {
		t.Errorf("after a device login the controller takes bob for %+v", me)
	}
}

func TestLoginExplainsAControllerWithoutCLISignIn(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(wire.AuthMethods{Token: true})
	}))
	t.Cleanup(srv.Close)
	t.Setenv("SKEP_SERVER", srv.URL)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("SKEP_CONFIG", "")
	var out, errOut strings.Builder
	code := Main(t.Context(), []string{"login"}, &out, &errOut)
	if code != ExitFailure || !strings.Contains(errOut.String(), "offers no sign-in for the CLI") {
		t.Errorf("skep login = exit %d, %q; want a failure explaining there is no CLI sign-in", code, errOut.String())
	}
}
