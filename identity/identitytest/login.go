package identitytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// forms are the provider's two pages: no script, no style, one form each.
var forms = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in at the test provider</title></head>
<body><h1>Test provider</h1>{{if .Problem}}<p id="problem">{{.Problem}}</p>{{end}}
<form method="post" action="{{.Action}}">
<input type="hidden" name="id" value="{{.ID}}">
<label>User <input id="username" name="username" autocomplete="username"></label>
<label>Password <input id="password" name="password" type="password"></label>
<button id="submit" type="submit">Sign in</button>
</form></body></html>
{{define "device"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in a device</title></head>
<body>{{if .Problem}}<p id="problem">{{.Problem}}</p>{{end}}
<form method="post" action="{{.Action}}">
<label>Code <input id="user_code" name="user_code" value="{{.ID}}"></label>
<label>User <input id="username" name="username"></label>
<label>Password <input id="password" name="password" type="password"></label>
<button id="submit" type="submit">Allow</button>
</form></body></html>{{end}}`))

// page is what a form shows.
type page struct{ Action, ID, Problem string }

func (p *Provider) loginForm(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = forms.Execute(w, page{Action: LoginPath, ID: r.URL.Query().Get("id")})
}

// login checks the credentials, marks the request signed in and sends
// the browser on to op's callback, which issues the code.
func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	id := r.PostFormValue("id")
	s := p.store
	s.mu.Lock()
	u := s.userByName(r.PostFormValue("username"))
	a, ok := s.requests[id]
	signedIn := ok && u != nil && u.Password == r.PostFormValue("password")
	if signedIn {
		a.subject, a.authTime, a.done = u.Subject, time.Now(), true
	}
	s.mu.Unlock()
	if !signedIn {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_ = forms.Execute(w, page{Action: LoginPath, ID: id, Problem: "wrong user or password"})
		return
	}
	http.Redirect(w, r, op.AuthCallbackURL(p.op)(p.withIssuer(r.Context()), id), http.StatusFound)
}

func (p *Provider) deviceForm(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = forms.ExecuteTemplate(w, "device", page{Action: DevicePath, ID: r.URL.Query().Get("user_code")})
}

// device signs a device authorization in.
func (p *Provider) device(w http.ResponseWriter, r *http.Request) {
	s := p.store
	s.mu.Lock()
	u := s.userByName(r.PostFormValue("username"))
	ok := u != nil && u.Password == r.PostFormValue("password")
	s.mu.Unlock()
	if ok && s.completeDevice(r.PostFormValue("user_code"), u.Subject) == nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "the device is signed in")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	_ = forms.ExecuteTemplate(w, "device", page{Action: DevicePath, ID: r.PostFormValue("user_code"), Problem: "wrong code, user or password"})
}

// Mint signs claims with the provider's current key, as a CI platform
// mints a job's ID token. iss defaults to the provider, iat and nbf to
// now, exp to five minutes on and jti to a random id; claims override
// each, and a claim given as nil is left out.
func (p *Provider) Mint(claims map[string]any) (string, error) {
	p.store.mu.Lock()
	k, ahead := p.store.keys[len(p.store.keys)-1], p.store.ahead
	p.store.mu.Unlock()
	return mint(k, p.URL, time.Now().Add(ahead), claims)
}

// mint signs claims with k at now.
func mint(k signingKey, issuer string, now time.Time, claims map[string]any) (string, error) {
	all := map[string]any{"iss": issuer, "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "jti": randomID()}
	maps.Copy(all, claims)
	maps.DeleteFunc(all, func(_ string, v any) bool { return v == nil })
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k.private},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", k.id))
	if err != nil {
		return "", fmt.Errorf("mint: %w", err)
	}
	payload, err := json.Marshal(all)
	if err != nil {
		return "", fmt.Errorf("mint: %w", err)
	}
	sig, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("mint: %w", err)
	}
	return sig.CompactSerialize()
}

// LogIn plays a browser that signs in as username: it opens authURL, an
// authorization request at the provider, follows the provider's
// redirects, fills in the login form when it is shown, and returns the
// first URL off the provider it is sent to (the relying party's redirect
// URI with the code, or with an error), without requesting it. hc must
// not follow redirects itself (see NoRedirects).
func (p *Provider) LogIn(ctx context.Context, hc *http.Client, authURL, username, password string) (*url.URL, error) {
	issuer, err := url.Parse(p.URL)
	if err != nil {
		return nil, err
	}
	next, err := url.Parse(authURL)
	if err != nil {
		return nil, err
	}
	form := url.Values(nil)
	for range 20 {
		method, body := http.MethodGet, io.Reader(nil)
		if form != nil {
			method, body = http.MethodPost, strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(ctx, method, next.String(), body)
		if err != nil {
			return nil, err
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		form = nil
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK && next.Host == issuer.Host && next.Path == LoginPath:
			form = url.Values{"id": {next.Query().Get("id")}, "username": {username}, "password": {password}}
			continue
		case resp.StatusCode/100 != 3:
			return nil, fmt.Errorf("%s %s answered %d: %s", method, next.Redacted(), resp.StatusCode, data)
		}
		loc, err := next.Parse(resp.Header.Get("Location"))
		if err != nil {
			return nil, err
		}
		if loc.Host != issuer.Host {
			return loc, nil
		}
		next = loc
	}
	return nil, errors.New("more than 20 redirects")
}

// NoRedirects is an HTTP client for LogIn: it returns each redirect
// instead of following it.
func NoRedirects() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// ApproveDevice plays the user of the device grant: it posts userCode and
// the credentials to the verification URI the provider gave the device.
func (p *Provider) ApproveDevice(ctx context.Context, verificationURI, userCode, username, password string) error {
	form := url.Values{"user_code": {userCode}, "username": {username}, "password": {password}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, verificationURI, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return fmt.Errorf("device approval answered %d: %s", resp.StatusCode, data)
	}
	return nil
}
