package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
	"golang.org/x/oauth2"

	"github.com/skep-cd/skep/client"
	"github.com/skep-cd/skep/wire"
)

// loginFileName is where `skep login` keeps its sign-in, beside the
// client config file; it holds tokens, so it is the user's alone (0600).
const loginFileName = "login.yaml"

// savedLogin is the login file: the ID token the CLI sends and what it
// takes to renew it. Its fields are secrets: it is never printed.
type savedLogin struct {
	// Server is the controller the sign-in is for; another server's
	// commands do not use it.
	Server string `yaml:"server"`
	// Issuer, ClientID and TokenURL renew the ID token.
	Issuer   string `yaml:"issuer"`
	ClientID string `yaml:"clientID"`
	TokenURL string `yaml:"tokenURL"`
	// IDToken is sent as the bearer token until Expiry.
	IDToken      string    `yaml:"idToken"`
	RefreshToken string    `yaml:"refreshToken,omitempty"`
	Expiry       time.Time `yaml:"expiry"`
}

// renewBefore is how long before its expiry the CLI renews the ID token,
// so that one does not expire between a command's calls.
const renewBefore = time.Minute

// loginPath returns the login file's path, or "" when no config directory
// is known (no HOME).
func loginPath(getenv func(string) string) string {
	cfg := client.ConfigPath(getenv)
	if cfg == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(cfg), loginFileName)
}

// readLogin reads the login file; ok is false when there is none. A file
// others may read is refused, as ssh refuses such a key.
func readLogin(path string) (l savedLogin, ok bool, err error) {
	if path == "" {
		return savedLogin{}, false, nil
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return savedLogin{}, false, nil
	case err != nil:
		return savedLogin{}, false, fmt.Errorf("sign-in: %w", err)
	case fi.Mode().Perm()&0o077 != 0:
		return savedLogin{}, false, fmt.Errorf("sign-in: %s may be read by others (mode %04o); run chmod 600 %s, or skep login again", path, fi.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return savedLogin{}, false, fmt.Errorf("sign-in: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&l); err != nil {
		return savedLogin{}, false, fmt.Errorf("sign-in: %s: %w (run skep login again)", path, err)
	}
	return l, true, nil
}

// writeLogin replaces the login file, mode 0600 in a 0700 directory, in
// one rename: a reader sees the old file or the new, never half of one.
func writeLogin(path string, l savedLogin) error {
	if path == "" {
		return errors.New("sign-in: no config directory to keep it in (set HOME or XDG_CONFIG_HOME)")
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sign-in: %w", err)
	}
	data, err := yaml.Marshal(l)
	if err != nil {
		return fmt.Errorf("sign-in: %w", err)
	}
	f, err := os.CreateTemp(dir, ".login-*.yaml") // created 0600
	if err != nil {
		return fmt.Errorf("sign-in: %w", err)
	}
	defer os.Remove(f.Name()) // gone after the rename; the leftover of a failure otherwise
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("sign-in: write %s: %w", f.Name(), err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("sign-in: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sign-in: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("sign-in: %w", err)
	}
	return nil
}

// sameServer reports whether two controller URLs name the same one.
func sameServer(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

// loginToken returns the ID token `skep login` kept for server, renewed
// at the provider first when it expires within renewBefore (the renewal
// is written back). ok is false when there is no sign-in for server.
func loginToken(ctx context.Context, getenv func(string) string, server string) (tok wire.Token, ok bool, err error) {
	path := loginPath(getenv)
	l, ok, err := readLogin(path)
	if err != nil || !ok || !sameServer(l.Server, server) {
		return wire.Token{}, false, err
	}
	if time.Now().Before(l.Expiry.Add(-renewBefore)) {
		return wire.NewToken(l.IDToken), true, nil
	}
	if l.RefreshToken == "" {
		return wire.Token{}, false, fmt.Errorf("the sign-in to %s expired; run skep login again", server)
	}
	cfg := &oauth2.Config{ClientID: l.ClientID, Endpoint: oauth2.Endpoint{TokenURL: l.TokenURL, AuthStyle: oauth2.AuthStyleInParams}}
	hc := &http.Client{Timeout: 30 * time.Second}
	fresh, err := cfg.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, hc), &oauth2.Token{RefreshToken: l.RefreshToken}).Token()
	var refused *oauth2.RetrieveError
	switch {
	case errors.As(err, &refused):
		return wire.Token{}, false, fmt.Errorf("the provider refused to renew the sign-in to %s (%s); run skep login again", server, refused.ErrorCode)
	case err != nil:
		return wire.Token{}, false, fmt.Errorf("renew the sign-in to %s at %s: %w", server, l.Issuer, err)
	}
	raw, _ := fresh.Extra("id_token").(string)
	expiry, err := idTokenExpiry(raw)
	if err != nil {
		return wire.Token{}, false, fmt.Errorf("renew the sign-in to %s: %w; run skep login again", server, err)
	}
	l.IDToken, l.Expiry = raw, expiry
	if fresh.RefreshToken != "" {
		l.RefreshToken = fresh.RefreshToken
	}
	if err := writeLogin(path, l); err != nil {
		return wire.Token{}, false, err
	}
	return wire.NewToken(raw), true, nil
}

// idTokenExpiry reads an ID token's exp without checking the token: the
// controller checks it; the CLI only needs to know when to renew it.
func idTokenExpiry(raw string) (time.Time, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return time.Time{}, errors.New("the provider answered no ID token")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, errors.New("the provider's ID token does not decode")
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == 0 {
		return time.Time{}, errors.New("the provider's ID token has no expiry")
	}
	return time.Unix(claims.Exp, 0), nil
}

// loginFlags are the options of `skep login`.
type loginFlags struct {
	device    bool
	noBrowser bool
	timeout   time.Duration
}

// newLoginCommand builds `skep login`.
func newLoginCommand() *cobra.Command {
	var f loginFlags
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Sign in at the controller's OpenID provider; later commands send the ID token",
		Long: "login signs in at the OpenID provider the controller names (GET /api/v1/auth) as its CLI client:\n" +
			"in a browser, which the provider sends back to a port on 127.0.0.1 (authorization code with PKCE),\n" +
			"or with --device on a machine without one (the device authorization grant: open the address it\n" +
			"prints anywhere and enter the code). The ID token and the refresh token that renews it are kept in\n" +
			loginFileName + " beside the client config (~/.config/skep), mode 0600; a token from " + client.EnvTokenFile + "\n" +
			"or " + client.EnvToken + " wins over it. skep logout forgets it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLogin(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	cmd.Flags().BoolVar(&f.device, "device", false, "sign in with a code on another device (the device authorization grant), for a machine without a browser")
	cmd.Flags().BoolVar(&f.noBrowser, "no-browser", false, "print the sign-in address but do not open a browser")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long to wait for the sign-in at the provider")
	return cmd
}

// newLogoutCommand builds `skep logout`.
func newLogoutCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the sign-in of skep login",
		Long: "logout removes " + loginFileName + ", so commands no longer send its ID token. The provider's own session\n" +
			"and the refresh token stay valid there until they expire or the provider revokes them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := loginPath(os.Getenv)
			err := os.Remove(path)
			switch {
			case path == "" || errors.Is(err, fs.ErrNotExist):
				fmt.Fprintln(cmd.OutOrStdout(), "Not signed in.")
			case err != nil:
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("sign out: %w", err)}
			default:
				fmt.Fprintln(cmd.OutOrStdout(), "Signed out.")
			}
			return nil
		},
	}
}

// runLogin signs in and keeps the tokens.
func runLogin(ctx context.Context, stdout, stderr io.Writer, f loginFlags) error {
	opts, err := client.OptionsFromEnvironment(os.Getenv)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	envToken := opts.Token
	opts.Token = wire.Token{}
	anon, err := client.New(opts)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	methods, err := anon.AuthMethods(ctx)
	if err != nil {
		return apiFailure(err)
	}
	m := methods.OIDC
	if m == nil || m.CLIClientID == "" {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("the controller at %s offers no sign-in for the CLI (its --oidc-file has no signIn.cliClientID); use a token (%s)",
			opts.Server, client.EnvTokenFile)}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	hc := &http.Client{Timeout: 30 * time.Second}
	pctx := oidc.ClientContext(context.WithValue(ctx, oauth2.HTTPClient, hc), hc)
	provider, err := oidc.NewProvider(pctx, m.Issuer)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("sign-in: the OpenID provider %s: %w", m.Issuer, err)}
	}
	cfg := &oauth2.Config{ClientID: m.CLIClientID, Endpoint: provider.Endpoint(), Scopes: m.Scopes}
	// The CLI is a public client: PKCE, or the device code, proves it.
	cfg.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	var tok *oauth2.Token
	var nonce string
	if f.device {
		tok, err = deviceLogin(pctx, cfg, stderr)
	} else {
		tok, nonce, err = browserLogin(pctx, cfg, stderr, f.noBrowser)
	}
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("sign-in: %w", err)}
	}
	raw, _ := tok.Extra("id_token").(string)
	id, err := provider.Verifier(&oidc.Config{ClientID: cfg.ClientID}).Verify(pctx, raw)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("sign-in: the provider's ID token: %w", err)}
	}
	if nonce != "" && subtle.ConstantTimeCompare([]byte(id.Nonce), []byte(nonce)) != 1 {
		return &ExitError{Code: ExitFailure, Err: errors.New("sign-in: the ID token is not this sign-in's (its nonce differs)")}
	}
	opts.Token = wire.NewToken(raw)
	signed, err := client.New(opts)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	me, err := signed.Whoami(ctx)
	if err != nil {
		return apiFailure(fmt.Errorf("signed in at the provider, but the controller refuses the sign-in: %w", err))
	}
	path := loginPath(os.Getenv)
	if err := writeLogin(path, savedLogin{Server: opts.Server, Issuer: m.Issuer, ClientID: cfg.ClientID, TokenURL: cfg.Endpoint.TokenURL,
		IDToken: raw, RefreshToken: tok.RefreshToken, Expiry: id.Expiry}); err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	scope := "every application"
	if len(me.Apps) > 0 {
		scope = strings.Join(me.Apps, ", ")
	}
	fmt.Fprintf(stdout, "Signed in to %s as %s: %s of %s.\n", opts.Server, me.Name, me.Role, scope)
	if !envToken.Empty() {
		fmt.Fprintf(stderr, "Note: the token from %s or %s is set, and commands send it rather than this sign-in.\n", client.EnvTokenFile, client.EnvToken)
	}
	return nil
}

// browserLogin runs the authorization code flow with PKCE through a
// browser that the provider sends back to a one-shot server on a free
// port of 127.0.0.1 (RFC 8252). It returns the tokens and the nonce the
// ID token must carry.
func browserLogin(ctx context.Context, cfg *oauth2.Config, stderr io.Writer, noBrowser bool) (*oauth2.Token, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("listen for the provider's redirect: %w", err)
	}
	cfg.RedirectURL = "http://" + ln.Addr().String() + "/callback"
	state, nonce, verifier := rand.Text(), rand.Text(), oauth2.GenerateVerifier()
	type answer struct {
		code string
		err  error
	}
	answers := make(chan answer, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var a answer
		switch {
		case q.Get("error") != "":
			a.err = fmt.Errorf("the provider answered %s: %s", q.Get("error"), q.Get("error_description"))
		case subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1:
			// Not this sign-in's redirect: another page's, or a forged one.
			http.Error(w, "this is not the sign-in skep login started", http.StatusBadRequest)
			return
		default:
			a.code = q.Get("code")
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if a.err != nil {
			fmt.Fprintln(w, "Sign-in failed; see the terminal.")
		} else {
			fmt.Fprintln(w, "Signed in to skep. You may close this tab.")
		}
		select {
		case answers <- a:
		default: // a second redirect; the first decides
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = srv.Serve(ln) }() // ErrServerClosed once shut down below
	defer func() {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		wg.Wait()
	}()
	authURL := cfg.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))
	fmt.Fprintf(stderr, "Open this address in a browser to sign in:\n\n  %s\n\n", authURL)
	if !noBrowser {
		if err := openBrowser(ctx, authURL); err != nil {
			fmt.Fprintf(stderr, "(no browser opened: %v)\n", err)
		}
	}
	var a answer
	select {
	case a = <-answers:
	case <-ctx.Done():
		return nil, "", fmt.Errorf("no answer from the browser: %w", ctx.Err())
	}
	if a.err != nil {
		return nil, "", a.err
	}
	tok, err := cfg.Exchange(ctx, a.code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, "", fmt.Errorf("exchange the code: %w", err)
	}
	return tok, nonce, nil
}

// deviceLogin runs the device authorization grant (RFC 8628): the user
// opens the provider's address on any device and enters the code.
func deviceLogin(ctx context.Context, cfg *oauth2.Config, stderr io.Writer) (*oauth2.Token, error) {
	da, err := cfg.DeviceAuth(ctx)
	if err != nil {
		return nil, fmt.Errorf("device authorization at the provider: %w", err)
	}
	fmt.Fprintf(stderr, "To sign in, open %s on any device and enter the code %s\n", da.VerificationURI, da.UserCode)
	if da.VerificationURIComplete != "" {
		fmt.Fprintf(stderr, "(or open %s)\n", da.VerificationURIComplete)
	}
	tok, err := cfg.DeviceAccessToken(ctx, da)
	if err != nil {
		return nil, fmt.Errorf("waiting for the device's sign-in: %w", err)
	}
	return tok, nil
}

// openBrowser asks the desktop to open url; it returns when the opener
// has, which is at once for xdg-open and open.
func openBrowser(ctx context.Context, url string) error {
	opener := "xdg-open"
	switch runtime.GOOS {
	case "darwin":
		opener = "open"
	case "windows":
		return errors.New("open the address yourself")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, opener, url).Run()
}
