package identity_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/api/authtest"
	"github.com/skep-cd/skep/identity"
	"github.com/skep-cd/skep/identity/identitytest"
	"github.com/skep-cd/skep/wire"
)

func TestSignInWalksTheCodeFlowAndOpensAServerSideSession(t *testing.T) {
	w := newWorld(t, worldOptions{})
	authURL, flow := w.startSignIn(t, "#/app/web")
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, want := range map[string]string{"client_id": "skep", "response_type": "code", "code_challenge_method": "S256",
		"redirect_uri": w.url + "/api/v1/auth/oidc/callback"} {
		if q.Get(k) != want {
			t.Errorf("the authorization request's %s = %q, want %q", k, q.Get(k), want)
		}
	}
	for _, k := range []string{"state", "nonce", "code_challenge"} {
		if len(q.Get(k)) < 20 {
			t.Errorf("the authorization request's %s %q is missing or short", k, q.Get(k))
		}
	}
	callback, err := w.provider.LogIn(t.Context(), identitytest.NoRedirects(), authURL, "alice", "pw")
	if err != nil {
		t.Fatal(err)
	}
	landing, cookie := w.finishSignIn(t, callback.String(), flow)
	if landing != "/#/app/web" || cookie == "" {
		t.Fatalf("landed on %q with cookie %t, want /#/app/web with a session", landing, cookie != "")
	}
	sess := &session{cookie: cookie}
	status, me := w.whoami(t, sess, "")
	want := "oidc:" + w.provider.URL + "#u-alice (alice@example.test)"
	if status != 200 || me.Name != want || me.Role != "admin" || len(me.Apps) != 0 || me.Session == nil {
		t.Fatalf("whoami = %d %+v, want %s as admin with a session", status, me, want)
	}
	sess.csrf = me.Session.CSRFToken
	// The actor reaches what the controller records.
	if status, body := w.call(t, "POST", "/api/v1/applications/web/sync", sess, "", true); status != 202 {
		t.Fatalf("sync in the session answered %d: %s", status, body)
	}
	if calls := w.rec.Calls(); !slices.Contains(calls, "sync web "+want) {
		t.Errorf("the sync was not made as %s: %q", want, calls)
	}
	if !w.logged("signed in", map[string]string{"actor": want}) {
		t.Errorf("the sign-in was not logged with its actor:\n%s", w.log)
	}
}

func TestSignInRefusesWhatDoesNotCheckOut(t *testing.T) {
	w := newWorld(t, worldOptions{})
	// login signs username in at the provider from a started sign-in,
	// after change has altered the authorization request.
	login := func(t *testing.T, username string, change func(q url.Values)) (string, *http.Cookie) {
		authURL, flow := w.startSignIn(t, "")
		u, _ := url.Parse(authURL)
		q := u.Query()
		if change != nil {
			change(q)
		}
		u.RawQuery = q.Encode()
		callback, err := w.provider.LogIn(t.Context(), identitytest.NoRedirects(), u.String(), username, "pw")
		if err != nil {
			t.Fatal(err)
		}
		return callback.String(), flow
	}
	for _, tc := range []struct {
		name, reason, kind string
		run                func(t *testing.T) (landing, cookie string)
	}{
		{"a nonce that is not the sign-in's (a token made for another sign-in)", "nonce", "failed", func(t *testing.T) (string, string) {
			callback, flow := login(t, "alice", func(q url.Values) { q.Set("nonce", "a-nonce-of-another-sign-in") })
			return w.finishSignIn(t, callback, flow)
		}},
		{"a state that is not the sign-in's", "state", "failed", func(t *testing.T) (string, string) {
			callback, flow := login(t, "alice", nil)
			u, _ := url.Parse(callback)
			q := u.Query()
			q.Set("state", "forged")
			u.RawQuery = q.Encode()
			return w.finishSignIn(t, u.String(), flow)
		}},
		{"a callback without the sign-in's flow cookie (another browser's code)", "no sign-in in progress", "expired", func(t *testing.T) (string, string) {
			callback, _ := login(t, "alice", nil)
			return w.finishSignIn(t, callback, nil)
		}},
		{"a flow cookie past its ten minutes", "no sign-in in progress", "expired", func(t *testing.T) (string, string) {
			callback, flow := login(t, "alice", nil)
			w.advance(11 * time.Minute)
			defer w.advance(-11 * time.Minute)
			return w.finishSignIn(t, callback, flow)
		}},
		{"a PKCE verifier that is not the challenge's", "not exchanged", "failed", func(t *testing.T) (string, string) {
			callback, flow := login(t, "alice", func(q url.Values) { q.Set("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM") })
			return w.finishSignIn(t, callback, flow)
		}},
		{"the provider's refusal", "provider answered an error", "provider", func(t *testing.T) (string, string) {
			_, flow := w.startSignIn(t, "")
			return w.finishSignIn(t, w.url+"/api/v1/auth/oidc/callback?error=access_denied&state=x", flow)
		}},
		{"a person no rule maps to a role", "no rule", "denied", func(t *testing.T) (string, string) {
			callback, flow := login(t, "dave", nil)
			return w.finishSignIn(t, callback, flow)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			landing, cookie := tc.run(t)
			if landing != "/?signin="+tc.kind || cookie != "" {
				t.Errorf("landed on %q with a session cookie %t, want /?signin=%s and none", landing, cookie != "", tc.kind)
			}
			if !w.logged("sign-in refused", map[string]string{"reason": tc.reason, "kind": tc.kind}) {
				t.Errorf("no log line says the sign-in was refused for %q:\n%s", tc.reason, w.log)
			}
		})
	}
}

func TestGroupsMapToTheRolesAndScopesOfTheRules(t *testing.T) {
	w := newWorld(t, worldOptions{})
	for _, tc := range []struct {
		user, role string
		apps       []string
		syncs      map[string]int // application → status of a sync
	}{
		{"alice", "admin", nil, map[string]int{"web": 202, "db": 202}},
		{"bob", "deployer", []string{"web*"}, map[string]int{"web": 202, "db": 403}},
		{"carol", "viewer", nil, map[string]int{"web": 403, "db": 403}},
	} {
		t.Run(tc.user+" signs in as "+tc.role, func(t *testing.T) {
			for _, how := range []string{"session", "cli token"} {
				var sess *session
				var bearer string
				if how == "session" {
					sess = w.session(t, tc.user)
				} else {
					bearer = w.cliToken(t, w.provider, "skep-cli", tc.user)
				}
				status, me := w.whoami(t, sess, bearer)
				if status != 200 || me.Role != tc.role || strings.Join(me.Apps, ",") != strings.Join(tc.apps, ",") {
					t.Errorf("%s: whoami = %d %+v, want %s on %q", how, status, me, tc.role, tc.apps)
				}
				for app, want := range tc.syncs {
					if status, body := w.call(t, "POST", "/api/v1/applications/"+app+"/sync", sess, bearer, true); status != want {
						t.Errorf("%s: sync %s answered %d, want %d: %s", how, app, status, want, body)
					}
				}
			}
		})
	}
	t.Run("a person no rule maps has no access with a CLI token either", func(t *testing.T) {
		if status, body := w.call(t, "GET", "/api/v1/applications", nil, w.cliToken(t, w.provider, "skep-cli", "dave"), false); status != 403 {
			t.Errorf("dave's CLI token answered %d, want 403: %s", status, body)
		}
	})
}

func TestTheClaimOfTheGroupsIsTheFilesChoice(t *testing.T) {
	for _, tc := range []struct {
		claim, user, want string
	}{
		{"groups", "alice", "admin"},
		{"groups", "erin", ""},
		{"roles", "erin", "admin"},
		{"roles", "alice", ""},
	} {
		t.Run(tc.user+" by "+tc.claim, func(t *testing.T) {
			w := newWorld(t, worldOptions{Claim: tc.claim})
			landing, cookie := w.signIn(t, tc.user)
			if tc.want == "" {
				if cookie != "" || landing != "/?signin=denied" {
					t.Errorf("%s got a session (landed on %s); the claim %s holds none of her groups", tc.user, landing, tc.claim)
				}
				return
			}
			if status, me := w.whoami(t, &session{cookie: cookie}, ""); status != 200 || me.Role != tc.want {
				t.Errorf("%s by %s = %d %+v, want %s", tc.user, tc.claim, status, me, tc.want)
			}
		})
	}
}

func TestARemovedGroupTakesEffectAtTheNextRefresh(t *testing.T) {
	w := newWorld(t, worldOptions{})
	sess := w.session(t, "bob")
	// The ID token lasts an hour and the session refreshes a minute
	// before it ends: past 59 minutes a request refreshes first.
	due := 59*time.Minute + 10*time.Second

	w.provider.SetGroups("bob", "staff", "viewers")
	if _, me := w.whoami(t, sess, ""); me.Role != "deployer" {
		t.Fatalf("before the refresh bob is %q, want still deployer: the ID token has not been renewed", me.Role)
	}
	w.advance(due)
	status, me := w.whoami(t, sess, "")
	if status != 200 || me.Role != "viewer" || len(me.Apps) != 0 {
		t.Fatalf("after the refresh bob is %d %+v, want viewer", status, me)
	}
	if status, _ := w.call(t, "POST", "/api/v1/applications/web/sync", sess, "", true); status != 403 {
		t.Errorf("a viewer's sync answered %d, want 403", status)
	}
	if !w.logged("session role changed at refresh", map[string]string{"actor": "u-bob", "role": "viewer", "was": "deployer"}) {
		t.Errorf("the change of role was not logged:\n%s", w.log)
	}

	w.provider.SetGroups("bob", "staff")
	w.advance(due)
	if status, _ := w.whoami(t, sess, ""); status != 401 {
		t.Errorf("with no mapped group left, bob's session answered %d, want 401", status)
	}
	if !w.logged("session ended", map[string]string{"actor": "u-bob", "reason": "no rule maps the person"}) {
		t.Errorf("the end of the session was not logged:\n%s", w.log)
	}
	// The session is gone, not only refused: the next request is 401 at once.
	w.provider.SetGroups("bob", "web-team")
	if status, _ := w.whoami(t, sess, ""); status != 401 {
		t.Errorf("an ended session came back: %d", status)
	}
}

func TestASessionEndsAtItsLifetimeHoweverOftenItRefreshed(t *testing.T) {
	w := newWorld(t, worldOptions{})
	sess := w.session(t, "alice")
	// Twelve refreshes take it to 11h50m; 11 minutes more are past 12h.
	for i := range 12 {
		w.advance(59*time.Minute + 10*time.Second)
		if status, _ := w.whoami(t, sess, ""); status != 200 {
			t.Fatalf("the session ended early, at refresh %d: %d", i+1, status)
		}
	}
	w.advance(11 * time.Minute)
	if status, _ := w.whoami(t, sess, ""); status != 401 {
		t.Errorf("a session past its 12 hours answered %d, want 401", status)
	}
}

func TestACookieRequestWithoutTheCSRFTokenIsRefused(t *testing.T) {
	w := newWorld(t, worldOptions{})
	sess := w.session(t, "alice")
	for _, tc := range []struct {
		name, method, path string
		csrf               string
		want               int
	}{
		{"a sync without the token", "POST", "/api/v1/applications/web/sync", "", 403},
		{"a sync with another session's token", "POST", "/api/v1/applications/web/sync", "not-the-token", 403},
		{"a rollback without the token", "POST", "/api/v1/applications/web/rollback", "", 403},
		{"a sign-out without the token", "POST", "/api/v1/auth/signout", "", 403},
		{"a read needs no token", "GET", "/api/v1/applications/web", "", 200},
		{"a sync with the token", "POST", "/api/v1/applications/web/sync", sess.csrf, 202},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(w.rec.Calls())
			header := http.Header{}
			if tc.csrf != "" {
				header.Set(api.CSRFHeader, tc.csrf)
			}
			resp := w.do(t, tc.method, tc.path, []*http.Cookie{{Name: identity.SessionCookie, Value: sess.cookie}}, header)
			if resp.StatusCode != tc.want {
				t.Fatalf("answered %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want == 403 {
				var e wire.Error
				_ = json.NewDecoder(resp.Body).Decode(&e)
				if !strings.Contains(e.Message, api.CSRFHeader) {
					t.Errorf("the refusal does not name %s: %q", api.CSRFHeader, e.Message)
				}
				if len(w.rec.Calls()) != before {
					t.Error("a refused request reached the controller")
				}
			}
		})
	}
	// The session outlives the refused sign-out.
	if status, _ := w.whoami(t, sess, ""); status != 200 {
		t.Errorf("a sign-out without the CSRF token ended the session: %d", status)
	}
}

func TestSignOutEndsTheSessionHereAndAtTheProvider(t *testing.T) {
	w := newWorld(t, worldOptions{})
	sess := w.session(t, "bob")
	status, body := w.call(t, "POST", "/api/v1/auth/signout", sess, "", true)
	var out wire.SignedOut
	if status != 200 || json.Unmarshal(body, &out) != nil || !strings.HasPrefix(out.EndSessionURL, w.provider.URL+"/end_session?") {
		t.Fatalf("sign-out = %d %s, want 200 with the provider's end_session URL", status, body)
	}
	end, _ := url.Parse(out.EndSessionURL)
	if end.Query().Get("id_token_hint") == "" || end.Query().Get("post_logout_redirect_uri") != w.url+"/" {
		t.Errorf("the end-session URL lacks the hint or the way back: %s", end.Query())
	}
	w.keep(end.Query().Get("id_token_hint"))
	if status, _ := w.whoami(t, sess, ""); status != 401 {
		t.Errorf("the signed-out session still answers %d", status)
	}
	// The browser goes on to the provider, which ends its session and sends it back.
	resp, err := identitytest.NoRedirects().Get(out.EndSessionURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != w.url+"/" {
		t.Errorf("the provider's end_session answered %d to %q, want a redirect to the UI", resp.StatusCode, loc)
	}
	if ended := w.provider.EndedSessions(); !slices.Contains(ended, "u-bob skep") {
		t.Errorf("the provider ended %q, want bob's session of skep", ended)
	}
	if !w.logged("signed out", map[string]string{"actor": "u-bob"}) {
		t.Errorf("the sign-out was not logged:\n%s", w.log)
	}
}

func TestSessionsSurviveARestartWithTheirKeyAndEndAtTheirRefreshWithout(t *testing.T) {
	for _, tc := range []struct {
		name               string
		key, restartKey    string
		wantAfterRefresh   int
		wantBeforeRefresh  int
		wantLoggedEndCause string
	}{
		{"the same session key keeps them", "0123456789abcdef0123456789abcdef-key", "0123456789abcdef0123456789abcdef-key", 200, 200, ""},
		{"a new key ends them at their refresh", "0123456789abcdef0123456789abcdef-key", "", 401, 200, "cannot be unsealed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := newWorld(t, worldOptions{SessionKey: tc.key})
			sess := first.session(t, "alice")
			again := newWorld(t, worldOptions{SessionKey: tc.restartKey, Store: first.store, Provider: first.provider})
			if status, _ := again.whoami(t, sess, ""); status != tc.wantBeforeRefresh {
				t.Errorf("after the restart the session answers %d, want %d", status, tc.wantBeforeRefresh)
			}
			again.advance(59*time.Minute + 10*time.Second)
			if status, _ := again.whoami(t, sess, ""); status != tc.wantAfterRefresh {
				t.Errorf("at its refresh the session answers %d, want %d", status, tc.wantAfterRefresh)
			}
			if tc.wantLoggedEndCause != "" && !again.logged("session ended", map[string]string{"reason": tc.wantLoggedEndCause}) {
				t.Errorf("the end was not logged with its cause:\n%s", again.log)
			}
		})
	}
}

func TestSealedTokensAreNotInTheStoreInTheClear(t *testing.T) {
	w := newWorld(t, worldOptions{})
	sess := w.session(t, "alice")
	stored, err := w.store.Session(t.Context(), sha256.Sum256([]byte(sess.cookie)))
	if err != nil {
		t.Fatal(err)
	}
	// A JWT starts with the base64 of `{"`.
	if bytes.Contains(stored.Sealed, []byte("eyJ")) || len(stored.Sealed) < 100 {
		t.Errorf("the stored tokens look unsealed: %q", stored.Sealed)
	}
	if stored.CSRF != sess.csrf || stored.Role != "admin" || !slices.Equal(stored.Groups, []string{"ops"}) {
		t.Errorf("stored session = %+v", stored)
	}
}

func TestTheSessionCookieKeepsTheAuthorizerContract(t *testing.T) {
	w := newWorld(t, worldOptions{})
	alice, bob := w.session(t, "alice"), w.session(t, "bob")
	present := func(s *session) func(*http.Request) {
		return func(r *http.Request) {
			r.AddCookie(&http.Cookie{Name: identity.SessionCookie, Value: s.cookie})
			r.Header.Set(api.CSRFHeader, s.csrf)
		}
	}
	authtest.Run(t, authtest.Harness{
		Authorizer: w.id.SignIn,
		Known: []authtest.Known{
			{Subject: api.Subject{Name: "oidc:" + w.provider.URL + "#u-alice (alice@example.test)", Role: api.RoleAdmin}, Present: present(alice)},
			{Subject: api.Subject{Name: "oidc:" + w.provider.URL + "#u-bob (bob@example.test)", Role: api.RoleDeployer, Apps: []string{"web*"}}, Present: present(bob)},
		},
		Unknown: present(&session{cookie: "an-unknown-cookie", csrf: "x"}),
	})
}
