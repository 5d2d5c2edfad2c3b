package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/skep-cd/skep/secret"
	"github.com/skep-cd/skep/wire"
)

// Environment variables naming the single admin token: a file holding it
// (a Docker secret under /run/secrets) or the value itself. Tokens never
// come from flags, which any user on the host can read in the process list
// and anyone with Docker access in the service spec.
const (
	EnvAdminTokenFile = "SKEP_ADMIN_TOKEN_FILE"
	EnvAdminToken     = "SKEP_ADMIN_TOKEN"
)

// AdminName is the subject name of the token from EnvAdminToken(File).
const AdminName = "admin"

// Role is what a subject may do. The zero value is invalid and allows
// nothing.
type Role string

// The roles, each including the one before.
const (
	RoleViewer   Role = "viewer"   // read everything in scope
	RoleDeployer Role = "deployer" // viewer + sync, refresh, rollback, unhold, promote, abort
	RoleAdmin    Role = "admin"    // everything, controller details and metrics
)

// rank orders the roles so that each includes those ranked below it; an
// unknown role ranks 0, below every need, and so is allowed nothing.
func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleDeployer:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Valid reports whether r is one of the named roles.
func (r Role) Valid() bool { return r.rank() > 0 }

// Subject is an authenticated caller: who it is, its role and the
// applications it may see. The guard resolves it and hands it to handlers
// as a parameter; it never travels in a context. The zero Subject, which
// public routes receive, has no role and is allowed and shown nothing.
type Subject struct {
	// Name labels events and logs (notify.WithActor); it grants nothing.
	Name string
	// Role is what the subject may do; an invalid role may do nothing.
	Role Role
	// Apps are path.Match globs of application names; empty means all.
	Apps []string
	// Session is set for a subject signed in with a session cookie: what
	// the browser needs to act in that session. The zero value is a
	// bearer credential's.
	Session Session
}

// Session is the sign-in session behind a Subject, as whoami shows it.
type Session struct {
	// CSRFToken must come back in the CSRFHeader of every request but
	// GET and HEAD made with the session's cookie.
	CSRFToken string
	// Expires is when the session ends, whatever the provider says.
	Expires time.Time
}

// CSRFHeader carries a session's CSRF token (see Session). A page of
// another site can make a browser send the cookie, but cannot read the
// token (whoami's answer is not readable across origins) nor set this
// header on a request it sends.
const CSRFHeader = "X-Skep-CSRF"

// Allows reports whether s's role includes need.
func (s Subject) Allows(need Role) bool {
	return need.Valid() && s.Role.rank() >= need.rank()
}

// Sees reports whether s may see application app. A malformed glob
// matches nothing rather than everything (NewTokens and ParseTokens reject
// them, but an Authorizer of another kind might not).
func (s Subject) Sees(app string) bool {
	if !s.Role.Valid() {
		return false
	}
	if len(s.Apps) == 0 {
		return true
	}
	for _, g := range s.Apps {
		if ok, err := path.Match(g, app); err == nil && ok {
			return true
		}
	}
	return false
}

// Scoped reports whether s is limited to some applications.
func (s Subject) Scoped() bool { return len(s.Apps) > 0 }

// ErrUnauthenticated is what an Authorizer returns when a request carries
// no credential or one it does not know (401).
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrForbidden is what an Authorizer returns for a genuine credential
// that may not be used as it was (403): a session cookie on a
// state-changing request without its CSRF token, an identity that no
// rule grants a role. The wrapping error's message is shown to the
// client, so it must hold no secret.
var ErrForbidden = errors.New("forbidden")

// Authorizer resolves the subject a request's credential names. Tokens
// checks the tokens file's bearer tokens; package identity adds sign-in
// sessions and OpenID Connect ID tokens. Authenticate must be safe for
// concurrent use, must not read the request body, and returns an error
// wrapping ErrUnauthenticated for a missing or unknown credential,
// ErrForbidden for one that may not be used so, and ErrUnavailable when
// the credential cannot be checked now (503). authtest.Run is its
// conformance suite.
type Authorizer interface {
	Authenticate(ctx context.Context, r *http.Request) (Subject, error)
}

// Chain is an Authorizer that asks its authorizers in order: the first
// that authenticates the request decides. An answer other than
// ErrUnauthenticated (forbidden, unavailable, a failure) also ends the
// chain, since that authorizer knew the credential. When every
// authorizer answers ErrUnauthenticated, so does the chain. A Chain is
// safe for concurrent use when its authorizers are.
type Chain []Authorizer

// Authenticate implements Authorizer.
func (c Chain) Authenticate(ctx context.Context, r *http.Request) (Subject, error) {
	var errs []error
	for _, a := range c {
		subj, err := a.Authenticate(ctx, r)
		if err == nil || !errors.Is(err, ErrUnauthenticated) {
			return subj, err
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return Subject{}, fmt.Errorf("%w: no authorizer", ErrUnauthenticated)
	}
	return Subject{}, errors.Join(errs...)
}

// TokenSpec is one accepted token: its subject and the SHA-256 digest of
// its value (the value itself is not kept, so no dump of the process's
// configuration can reveal it).
type TokenSpec struct {
	// Name is the subject's name; unique among the tokens.
	Name string
	// Role is what the token may do; it must be Valid.
	Role Role
	// Apps are path.Match globs of the applications the token may see;
	// empty means all.
	Apps []string
	// Digest is wire.Token.Digest of the token's value.
	Digest [sha256.Size]byte
}

// LogValue names the subject and never the digest.
func (s TokenSpec) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", s.Name), slog.String("role", string(s.Role)), slog.Any("apps", s.Apps))
}

// Tokens authenticates bearer tokens against a fixed list. It is
// immutable after NewTokens and safe for concurrent use.
type Tokens struct {
	specs []TokenSpec
}

// NewTokens checks specs (names unique and non-empty, roles valid, globs
// well-formed, no digest twice) and returns the authorizer. Every problem
// is reported at once, joined. specs is copied: the caller may reuse it.
func NewTokens(specs ...TokenSpec) (*Tokens, error) {
	var errs []error
	names := map[string]bool{}
	digests := map[[sha256.Size]byte]string{}
	for _, s := range specs {
		switch {
		case s.Name == "":
			errs = append(errs, errors.New("a token has no name"))
		case names[s.Name]:
			errs = append(errs, fmt.Errorf("token %q: name given twice", s.Name))
		}
		names[s.Name] = true
		if !s.Role.Valid() {
			errs = append(errs, fmt.Errorf("token %q: role %q: want viewer, deployer or admin", s.Name, s.Role))
		}
		for _, g := range s.Apps {
			if _, err := path.Match(g, ""); err != nil {
				errs = append(errs, fmt.Errorf("token %q: apps glob %q: %w", s.Name, g, err))
			}
		}
		// One value under two names would authenticate as whichever is
		// found last: the subject, and its role, would be an accident.
		if other, ok := digests[s.Digest]; ok {
			errs = append(errs, fmt.Errorf("tokens %q and %q have the same value", other, s.Name))
		}
		digests[s.Digest] = s.Name
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Tokens{specs: slices.Clone(specs)}, nil
}

// Len returns the number of tokens.
func (t *Tokens) Len() int { return len(t.specs) }

// Names returns the subjects' names in the order given to NewTokens, for
// the start-up log. The slice is the caller's.
func (t *Tokens) Names() []string {
	out := make([]string, len(t.specs))
	for i, s := range t.specs {
		out[i] = s.Name
	}
	return out
}

// Authenticate implements Authorizer with "Authorization: Bearer <token>".
// The presented token's digest is compared with every known digest in
// constant time, so the time taken says nothing about which one is close.
func (t *Tokens) Authenticate(_ context.Context, r *http.Request) (Subject, error) {
	presented, ok := Bearer(r)
	if !ok {
		return Subject{}, fmt.Errorf("%w: no bearer token", ErrUnauthenticated)
	}
	// Compare digests, not values: ConstantTimeCompare returns at once on
	// a length mismatch, which would time the length of each token. The
	// loop never breaks early, so the match's position is not timed either.
	sum := presented.Digest()
	found := -1
	for i := range t.specs {
		if subtle.ConstantTimeCompare(sum[:], t.specs[i].Digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Subject{}, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	}
	s := t.specs[found]
	// Apps is cloned: the subject is the caller's to change (authtest).
	return Subject{Name: s.Name, Role: s.Role, Apps: slices.Clone(s.Apps)}, nil
}

// Bearer returns the token of an "Authorization: Bearer <token>" header,
// for every Authorizer that reads one. The scheme is matched
// case-insensitively, as RFC 7235 says; an empty token is no token.
func Bearer(r *http.Request) (wire.Token, bool) {
	h := r.Header.Get("Authorization")
	scheme, value, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return wire.Token{}, false
	}
	value = strings.TrimSpace(value)
	return wire.NewToken(value), value != ""
}

// AdminTokenFromEnv returns the admin token named by EnvAdminTokenFile or
// EnvAdminToken (the file wins when both are set), or ok false when
// neither is set. The spec is AdminName with RoleAdmin and no scope.
// getenv is os.Getenv outside tests. An error names the variable, never
// the value.
func AdminTokenFromEnv(getenv func(string) string) (spec TokenSpec, ok bool, err error) {
	value, ok, err := tokenFromEnv(getenv, EnvAdminTokenFile, EnvAdminToken)
	if !ok || err != nil {
		return TokenSpec{}, false, err
	}
	return TokenSpec{Name: AdminName, Role: RoleAdmin, Digest: value.Digest()}, true, nil
}

// Environment variables naming the token the replicas of a replicated
// controller (--leader-election) share: a file holding it, or the value.
const (
	EnvPeerTokenFile = "SKEP_PEER_TOKEN_FILE"
	EnvPeerToken     = "SKEP_PEER_TOKEN"
)

// PeerTokenFromEnv returns the replicas' shared token named by
// EnvPeerTokenFile or EnvPeerToken (the file wins), or ok false when
// neither is set. Errors name the variable, never the value.
func PeerTokenFromEnv(getenv func(string) string) (wire.Token, bool, error) {
	return tokenFromEnv(getenv, EnvPeerTokenFile, EnvPeerToken)
}

// tokenFromEnv reads the token the variable fileVar names a file of, else
// the one valueVar holds; ok is false when neither is set.
func tokenFromEnv(getenv func(string) string, fileVar, valueVar string) (wire.Token, bool, error) {
	src, from := secret.Source{File: getenv(fileVar)}, fileVar
	if src.File == "" {
		src, from = secret.Source{Env: valueVar}, valueVar
		if getenv(valueVar) == "" {
			return wire.Token{}, false, nil
		}
	}
	value, err := src.Read(getenv)
	if err != nil {
		return wire.Token{}, false, fmt.Errorf("%s: %w", from, err)
	}
	return wire.NewToken(value), true, nil
}

// tokensExample is the shape of a tokens file, shown in problems about a
// file of another shape.
const tokensExample = "tokens:\n  - name: ci\n    role: deployer\n    tokenFile: /run/secrets/ci"

// tokensFile is the file form of a tokens file.
type tokensFile struct {
	Tokens []tokenEntry `yaml:"tokens"`
}

// tokenEntry is one entry of a tokens file as written; ParseTokens checks
// it and turns it into a TokenSpec.
type tokenEntry struct {
	Name      string   `yaml:"name"`
	Role      string   `yaml:"role"`
	Apps      []string `yaml:"apps"`
	TokenFile string   `yaml:"tokenFile"`
	TokenEnv  string   `yaml:"tokenEnv"`
	SHA256    string   `yaml:"sha256"`
}

// LoadTokensFile reads a tokens file (see ParseTokens). The file may be at
// most 1 MiB.
func LoadTokensFile(name string, getenv func(string) string) ([]TokenSpec, error) {
	data, err := ReadConfigFile(name)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	return ParseTokens(name, data, getenv)
}

// ParseTokens decodes a tokens file strictly: a mapping whose tokens key
// holds the list of tokens.
//
//	tokens:
//	  - name: ci            # unique; labels events
//	    role: deployer      # viewer | deployer | admin
//	    apps: ["web-*"]     # optional globs; default all
//	    tokenFile: ci.token # or tokenEnv: VAR, or sha256: <hex of the token's SHA-256>
//
// A relative tokenFile is read from name's directory. Every problem is
// returned at once as configfile.Problems with file, line and field path.
// See TestParseTokensShowsTheAcceptedShape.
func ParseTokens(name string, data []byte, getenv func(string) string) ([]TokenSpec, error) {
	var file tokensFile
	d := decodeList(name, data, &file, "tokens", tokensExample)
	// Every entry is checked even after a problem, so that one run shows
	// every mistake; specs is only returned when there were none.
	var specs []TokenSpec
	seen := map[string]bool{}
	for i, e := range file.Tokens {
		field := fmt.Sprintf("tokens[%d]", i)
		s := TokenSpec{Name: e.Name, Role: Role(e.Role), Apps: e.Apps}
		if s.Name == "" {
			d.Add(field+".name", "missing")
		} else if seen[s.Name] {
			d.Add(field+".name", "%q is given twice", s.Name)
		}
		seen[s.Name] = true
		if !s.Role.Valid() {
			d.Add(field+".role", "want viewer, deployer or admin, got %q", s.Role)
		}
		for j, g := range s.Apps {
			if g == "" {
				d.Add(fmt.Sprintf("%s.apps[%d]", field, j), "want a non-empty string")
			} else if _, err := path.Match(g, ""); err != nil {
				d.Add(fmt.Sprintf("%s.apps[%d]", field, j), "bad glob %q: %v", g, err)
			}
		}
		value, fromSecret := ReadSecret(d, field, "tokenFile", e.TokenFile, "tokenEnv", e.TokenEnv, getenv)
		switch {
		case fromSecret && e.SHA256 != "":
			d.Add(field+".sha256", "give tokenFile, tokenEnv or sha256, only one")
		case fromSecret:
			s.Digest = wire.NewToken(value).Digest()
		case e.SHA256 != "":
			// A digest lets an operator keep the token itself off the
			// controller's host; sha256sum prints lower-case hex, but
			// upper case is accepted too.
			b, err := hex.DecodeString(strings.ToLower(e.SHA256))
			if err != nil || len(b) != sha256.Size {
				d.Add(field+".sha256", "want 64 hex digits (the SHA-256 of the token)")
			}
			copy(s.Digest[:], b)
		default:
			d.Add(field, "no token: give tokenFile, tokenEnv or sha256")
		}
		specs = append(specs, s)
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return specs, nil
}
