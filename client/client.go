// Package client is the typed client of Skep's HTTP API, used by the CLI
// and by anyone scripting Skep from Go.
//
// The server and token come from the environment (SKEP_SERVER,
// SKEP_TOKEN_FILE, SKEP_TOKEN) or a config file (~/.config/skep/config.yaml),
// never from flags or arguments, so a token cannot land in a shell history
// or a process list; the CLI adds the ID token `skep login` keeps. Errors
// say what went wrong in the caller's terms: a 401 names the token
// variables, an unreachable server names SKEP_SERVER, a TLS failure names
// the CA setting.
//
// The client never logs, never retries a write, and never prints a token:
// Token values redact themselves.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/wire"
)

// Environment variables the client reads.
const (
	// EnvServer is the controller's base URL; it wins over the config file.
	EnvServer = "SKEP_SERVER"
	// EnvToken holds a token itself; EnvTokenFile wins when both are set,
	// since a file keeps the token out of the process environment.
	EnvToken = "SKEP_TOKEN"
	// EnvTokenFile names a file holding the token (surrounding space is
	// trimmed).
	EnvTokenFile = "SKEP_TOKEN_FILE"
	// EnvCAFile names a PEM bundle to trust for the server's certificate.
	EnvCAFile = "SKEP_CA_FILE"
	// EnvConfig names the config file instead of the default path.
	EnvConfig = "SKEP_CONFIG"
)

// DefaultServer is used when neither the environment nor the config file
// names one.
const DefaultServer = "http://127.0.0.1:8080"

// maxResponse bounds what is read of one response body.
// A misdirected SKEP_SERVER (a file server, say) must not make the CLI
// read a body without end into memory.
const maxResponse = 64 << 20

// Options build a Client. Server is required.
type Options struct {
	// Server is the controller's base URL, e.g. https://skep.example.org.
	Server string
	// Token is sent as a bearer token; the zero Token sends none.
	Token wire.Token
	// CAFile is a PEM bundle trusted for the server's certificate, beside
	// the system roots.
	CAFile string
	// HTTPClient overrides the transport (tests); its timeout should be
	// zero for event streams.
	HTTPClient *http.Client
	// Header is sent with every request, besides the token (a replica of
	// the controller names itself with it when it follows the leader's
	// events); nil sends none. It is copied.
	Header http.Header
}

// Client calls one controller. It is safe for concurrent use.
// Its fields are set by New and never change.
type Client struct {
	base   *url.URL
	token  wire.Token
	http   *http.Client
	header http.Header
}

// New returns a client for opts.Server.
// It makes no request: a wrong server shows at the first call.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(opts.Server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q: want an http:// or https:// URL (set %s)", opts.Server, EnvServer)
	}
	// http://user:pass@host would send basic auth the API ignores, and put
	// a secret where URLs get logged.
	if u.User != nil {
		return nil, fmt.Errorf("server URL must not carry credentials; use %s or %s", EnvTokenFile, EnvToken)
	}
	hc := opts.HTTPClient
	if hc == nil {
		// A clone keeps the default's proxy, dial and idle settings without
		// sharing the process-wide transport's TLS config. No client timeout:
		// an event stream stays open as long as it is followed.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if opts.CAFile != "" {
			pem, err := os.ReadFile(opts.CAFile)
			if err != nil {
				return nil, fmt.Errorf("CA file: %w", err)
			}
			pool, err := x509.SystemCertPool()
			if err != nil {
				// No system pool (some minimal images have none): trust the given CA
				// alone.
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("CA file %s holds no PEM certificate", opts.CAFile)
			}
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
		}
		hc = &http.Client{Transport: tr}
	}
	return &Client{base: u, token: opts.Token, http: hc, header: opts.Header.Clone()}, nil
}

// Config is the client config file, ~/.config/skep/config.yaml:
//
//	server: https://skep.example.org
//	tokenFile: ~/.config/skep/token
//	caFile: /etc/ssl/skep-ca.pem
type Config struct {
	// Server is the controller's base URL.
	Server string `yaml:"server"`
	// TokenFile names a file holding the token; ~/ is the home directory.
	// The file format has no field for the token itself, on purpose.
	TokenFile string `yaml:"tokenFile"`
	// CAFile names a PEM bundle trusted for the server; ~/ as above.
	CAFile string `yaml:"caFile"`
}

// ConfigPath returns the config file FromEnvironment reads: EnvConfig, or
// config.yaml under $XDG_CONFIG_HOME/skep or ~/.config/skep.
// It returns "" when none of those variables is set. getenv is
// os.Getenv outside tests.
func ConfigPath(getenv func(string) string) string {
	if p := getenv(EnvConfig); p != "" {
		return p
	}
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "skep", "config.yaml")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "skep", "config.yaml")
	}
	return ""
}

// FromEnvironment builds a client from the environment and the config
// file: the environment wins field by field, and a missing config file is
// not an error (one named by EnvConfig is).
// A token file takes precedence over a token variable, and both over the
// config's tokenFile. With no token at all the client is still built,
// and a call's 401 error names the variables to set.
func FromEnvironment(getenv func(string) string) (*Client, error) {
	opts, err := OptionsFromEnvironment(getenv)
	if err != nil {
		return nil, err
	}
	return New(opts)
}

// OptionsFromEnvironment is what FromEnvironment reads, before the client
// is built: a caller with a token of its own (the CLI's sign-in) puts it
// in Token when the environment named none.
func OptionsFromEnvironment(getenv func(string) string) (Options, error) {
	var cfg Config
	path := ConfigPath(getenv)
	if path != "" {
		data, err := os.ReadFile(path)
		switch {
		case err == nil:
			dec := yaml.NewDecoder(bytes.NewReader(data))
			dec.KnownFields(true)
			// io.EOF is an empty file, which is a valid config of defaults.
			if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
				return Options{}, fmt.Errorf("client config %s: %w", path, err)
			}
		// No config at the default path is the usual case.
		case errors.Is(err, os.ErrNotExist) && getenv(EnvConfig) == "":
		default:
			return Options{}, fmt.Errorf("client config: %w", err)
		}
	}
	opts := Options{Server: first(getenv(EnvServer), cfg.Server, DefaultServer), CAFile: first(getenv(EnvCAFile), expandHome(cfg.CAFile, getenv))}
	switch file := first(getenv(EnvTokenFile)); {
	case file != "":
		t, err := readToken(file, EnvTokenFile)
		if err != nil {
			return Options{}, err
		}
		opts.Token = t
	case getenv(EnvToken) != "":
		opts.Token = wire.NewToken(strings.TrimSpace(getenv(EnvToken)))
	case cfg.TokenFile != "":
		t, err := readToken(expandHome(cfg.TokenFile, getenv), path+": tokenFile")
		if err != nil {
			return Options{}, err
		}
		opts.Token = t
	}
	return opts, nil
}

// readToken reads a token file; from names the setting that named the
// file, so the error says which one to fix.
func readToken(file, from string) (wire.Token, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return wire.Token{}, fmt.Errorf("%s: %w", from, err)
	}
	t := strings.TrimSpace(string(data))
	// An empty token would send "Bearer " and get a puzzling 401.
	if t == "" {
		return wire.Token{}, fmt.Errorf("%s: %s is empty", from, file)
	}
	return wire.NewToken(t), nil
}

// expandHome expands a leading ~/ as a shell would; the config file is
// read by no shell.
func expandHome(p string, getenv func(string) string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok && getenv("HOME") != "" {
		return filepath.Join(getenv("HOME"), rest)
	}
	return p
}

// first returns the first non-empty value, or "".
func first(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// Server returns the base URL the client calls.
func (c *Client) Server() string { return c.base.String() }

// Sentinels an *Error matches with errors.Is, by status.
var (
	// ErrUnauthorized: the token is missing, wrong or revoked (401).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: the token is valid but its role or apps do not allow
	// the call (403).
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound: no such application or route (404).
	ErrNotFound = errors.New("not found")
)

// Error is a non-2xx answer of the API.
// Use errors.As to read it, errors.Is with the sentinels above to branch.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Code is the API's machine-readable code; empty when the body was not
	// the API's JSON (a proxy's error page, say).
	Code wire.ErrorCode
	// Message is the API's message, or the body's text, or the status text.
	Message string
	// Method and Path name the call that failed.
	Method string
	Path   string
}

// Error names the remedy for 401, since that is the one a user can fix
// from the shell.
func (e *Error) Error() string {
	switch e.Status {
	case http.StatusUnauthorized:
		return fmt.Sprintf("unauthorized: %s (set %s or %s to a valid token, or run skep login)", e.Message, EnvTokenFile, EnvToken)
	case http.StatusForbidden:
		return "forbidden: " + e.Message
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, e.Code, e.Message)
}

// Is matches ErrUnauthorized, ErrForbidden and ErrNotFound by status.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	}
	return false
}

// request builds a request to path (with query) carrying the token.
func (c *Client) request(ctx context.Context, method, path string, query url.Values, body any) (*http.Request, error) {
	// A copy: the base URL is shared by concurrent calls.
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawQuery = query.Encode()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range c.header {
		req.Header[k] = v
	}
	if !c.token.Empty() {
		// The only place a token is revealed: into the header, never a string
		// that could be logged.
		req.Header.Set("Authorization", "Bearer "+c.token.Reveal())
	}
	return req, nil
}

// transportError explains a failure to talk to the server at all.
func (c *Client) transportError(err error) error {
	var cert *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var op *net.OpError
	switch {
	case errors.As(err, &cert), errors.As(err, &unknown), errors.As(err, &hostname):
		return fmt.Errorf("TLS: cannot verify %s: %w (trust its CA with %s or caFile in the config)", c.base.Host, err, EnvCAFile)
	// net/http has no typed error for this case, only the message.
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("TLS: %s answers plain HTTP; use http:// in %s", c.base.Host, EnvServer)
	// Other handshake failures come in several types; their messages all
	// start with "tls:".
	case strings.Contains(err.Error(), "tls:"):
		return fmt.Errorf("TLS handshake with %s: %w", c.base.Host, err)
	case errors.As(err, &op), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("cannot reach skep at %s: %w (is the controller running? check %s)", c.base, err, EnvServer)
	}
	return fmt.Errorf("request to %s: %w", c.base, err)
}

// Call sends a request and returns the response body of a 2xx answer
// unmodified; any other answer is an *Error.
// Call is the one door to the API: the typed methods and the CLI's -o
// output use it. It is safe for concurrent use.
func (c *Client) Call(ctx context.Context, method, path string, query url.Values, body any) ([]byte, error) {
	req, err := c.request(ctx, method, path, query, body)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			// A cancelled call (Ctrl-C) is not a failure to reach the server.
			return nil, ctx.Err()
		}
		return nil, c.transportError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, decodeError(resp, data, method, path)
	}
	return data, nil
}

// decodeError builds the *Error of a non-2xx answer from the API's JSON
// error body, or from whatever text came instead.
func decodeError(resp *http.Response, data []byte, method, path string) error {
	e := &Error{Status: resp.StatusCode, Method: method, Path: path}
	var body wire.Error
	if json.Unmarshal(data, &body) == nil && body.Code != "" {
		e.Code, e.Message = body.Code, body.Message
	} else {
		e.Message = strings.TrimSpace(string(data))
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
	}
	return e
}

// get GETs path and decodes the answer into out.
func (c *Client) get(ctx context.Context, path string, query url.Values, out any) error {
	data, err := c.Call(ctx, http.MethodGet, path, query, nil)
	if err != nil {
		return err
	}
	return decode(data, path, out)
}

// post POSTs body as JSON to path and decodes the answer into out.
func (c *Client) post(ctx context.Context, path string, body, out any) error {
	data, err := c.Call(ctx, http.MethodPost, path, nil, body)
	if err != nil {
		return err
	}
	return decode(data, path, out)
}

// decode unmarshals an answer; the error names the path it came from.
func decode(data []byte, path string, out any) error {
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer of %s: %w", path, err)
	}
	return nil
}

// AppPath returns the API path of application name, with suffix.
func AppPath(name, suffix string) string {
	// Escaped, so a name can never reach another route.
	return "/api/v1/applications/" + url.PathEscape(name) + suffix
}

// ListApplications lists the applications the token may see.
func (c *Client) ListApplications(ctx context.Context) (wire.ApplicationList, error) {
	var out wire.ApplicationList
	return out, c.get(ctx, "/api/v1/applications", nil, &out)
}

// Application returns one application with its releases and tasks.
func (c *Client) Application(ctx context.Context, name string) (wire.ApplicationDetail, error) {
	var out wire.ApplicationDetail
	return out, c.get(ctx, AppPath(name, ""), nil, &out)
}

// Diff plans an application at revision ("" = what it tracks).
func (c *Client) Diff(ctx context.Context, name, revision string) (wire.Diff, error) {
	var out wire.Diff
	q := url.Values{}
	if revision != "" {
		q.Set("revision", revision)
	}
	return out, c.get(ctx, AppPath(name, "/diff"), q, &out)
}

// Plan plans an application at revision (a branch, tag, commit or pull
// request ref) as merging it would deploy it, against what the swarm runs.
func (c *Client) Plan(ctx context.Context, name, revision string) (wire.Proposal, error) {
	var out wire.Proposal
	return out, c.post(ctx, AppPath(name, "/plan"), wire.PlanRequest{Revision: revision}, &out)
}

// PullRequests lists the open pull requests that change an application,
// each with its plan.
func (c *Client) PullRequests(ctx context.Context, name string) (wire.PullRequestList, error) {
	var out wire.PullRequestList
	return out, c.get(ctx, AppPath(name, "/pulls"), nil, &out)
}

// History returns an application's revisions and sync history.
func (c *Client) History(ctx context.Context, name string) (wire.History, error) {
	var out wire.History
	return out, c.get(ctx, AppPath(name, "/history"), nil, &out)
}

// Sync requests a sync (or plans one, with opts.DryRun).
func (c *Client) Sync(ctx context.Context, name string, opts wire.SyncOptions) (wire.SyncResponse, error) {
	var out wire.SyncResponse
	return out, c.post(ctx, AppPath(name, "/sync"), opts, &out)
}

// Rollback requests a rollback to a recorded revision.
func (c *Client) Rollback(ctx context.Context, name string, opts wire.RollbackOptions) (wire.SyncResponse, error) {
	var out wire.SyncResponse
	return out, c.post(ctx, AppPath(name, "/rollback"), opts, &out)
}

// Refresh asks the controller to re-read git for an application now.
func (c *Client) Refresh(ctx context.Context, name string) error {
	var out wire.RefreshResponse
	return c.post(ctx, AppPath(name, "/refresh"), nil, &out)
}

// Unhold releases a rollback's hold.
func (c *Client) Unhold(ctx context.Context, name string) error {
	var out wire.RefreshResponse
	return c.post(ctx, AppPath(name, "/unhold"), nil, &out)
}

// Promote asks the application's running canary to be promoted now: the
// stable service takes its spec. A *StatusError with 409 means none runs.
func (c *Client) Promote(ctx context.Context, name string) (wire.SyncResponse, error) {
	var out wire.SyncResponse
	return out, c.post(ctx, AppPath(name, "/promote"), nil, &out)
}

// Abort asks the application's running canary to be aborted: it goes, and
// its commit is held. A *StatusError with 409 means none runs.
func (c *Client) Abort(ctx context.Context, name string) (wire.SyncResponse, error) {
	var out wire.SyncResponse
	return out, c.post(ctx, AppPath(name, "/abort"), nil, &out)
}

// Whoami returns who the controller takes the caller for.
func (c *Client) Whoami(ctx context.Context) (wire.Whoami, error) {
	var out wire.Whoami
	return out, c.get(ctx, "/api/v1/whoami", nil, &out)
}

// AuthMethods returns how one signs in to the controller; it needs no
// token.
func (c *Client) AuthMethods(ctx context.Context) (wire.AuthMethods, error) {
	var out wire.AuthMethods
	return out, c.get(ctx, "/api/v1/auth", nil, &out)
}

// Status returns the controller's status.
func (c *Client) Status(ctx context.Context) (wire.ControllerStatus, error) {
	var out wire.ControllerStatus
	return out, c.get(ctx, "/api/v1/status", nil, &out)
}

// Version returns the server's build and capabilities.
func (c *Client) Version(ctx context.Context) (wire.VersionInfo, error) {
	var out wire.VersionInfo
	return out, c.get(ctx, "/api/v1/version", nil, &out)
}

// EventQuery filters events; the zero value selects all.
// Limit 0 means the server's default. Values copies the slices.
type EventQuery struct {
	// Applications keeps events of these applications only; nil means all.
	Applications []string
	// Types keeps events of these types only (wire event types such as
	// "sync-succeeded"); nil means all.
	Types []string
	// Swarms keeps events of these destinations only ("" is the local
	// swarm); nil means all.
	Swarms []string
	// Limit caps a listing (not a stream); 0 means the server's default.
	Limit int
}

// Values returns q as URL query parameters.
func (q EventQuery) Values() url.Values {
	v := url.Values{}
	for _, a := range q.Applications {
		v.Add("app", a)
	}
	for _, t := range q.Types {
		v.Add("type", t)
	}
	for _, w := range q.Swarms {
		v.Add("swarm", w)
	}
	if q.Limit > 0 {
		v.Set("limit", fmt.Sprint(q.Limit))
	}
	return v
}

// Events lists the newest kept events.
func (c *Client) Events(ctx context.Context, q EventQuery) (wire.EventList, error) {
	var out wire.EventList
	return out, c.get(ctx, "/api/v1/events", q.Values(), &out)
}

// StreamEvent is one frame of the event stream: its id, type and the raw
// JSON data line (the event's wire shape, unmodified).
type StreamEvent struct {
	// ID resumes a stream after this event (Last-Event-ID); it may be "".
	ID string
	// Type is the SSE event name, the event's wire type.
	Type string
	// Data is the event's JSON; fn may keep it, as it is never reused.
	Data []byte
}

// Stream follows the event stream from after lastID ("" = live only),
// calling fn for each event in order, until ctx ends (nil), the server
// closes the stream (io.EOF), fn returns an error (that error), or the
// connection fails. It does not reconnect; see Follow.
func (c *Client) Stream(ctx context.Context, q EventQuery, lastID string, fn func(StreamEvent) error) error {
	req, err := c.request(ctx, http.MethodGet, "/api/v1/events", q.Values(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return c.transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// A body cut short still leaves the status, which is what the error
		// reports; a read error adds nothing to it.
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return decodeError(resp, data, http.MethodGet, "/api/v1/events")
	}
	// Cancelling ctx breaks the read with an error that is not a failure.
	err = readSSE(resp.Body, fn)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Follow is Stream that reconnects after a dropped connection, resuming
// from the last id it delivered, until ctx ends or fn fails. An error the
// server answers (401, 403, 400) ends it at once.
func (c *Client) Follow(ctx context.Context, q EventQuery, lastID string, fn func(StreamEvent) error) error {
	for {
		err := c.Stream(ctx, q, lastID, func(e StreamEvent) error {
			if err := fn(e); err != nil {
				return &callbackError{err}
			}
			if e.ID != "" {
				lastID = e.ID
			}
			return nil
		})
		var apiErr *Error
		var cbErr *callbackError
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &cbErr):
			return cbErr.err
		case errors.As(err, &apiErr):
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		// A fixed pause: one follower reconnecting once a second is no load,
		// and it spares a restarting controller a tight loop.
		case <-time.After(time.Second):
		}
	}
}

// callbackError marks fn's error inside Stream's, so Follow can tell
// "stop, the caller said so" from "the connection dropped, reconnect".
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }
func (e *callbackError) Unwrap() error { return e.err }
