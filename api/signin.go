package api

import (
	"errors"
	"net/http"
	"slices"

	"github.com/skep-cd/skep/wire"
)

// LoginPath starts a browser's sign-in at the OpenID provider.
const LoginPath = "/api/v1/auth/oidc/login"

// SignIn is sign-in at an OpenID provider with the server-side session it
// opens; package identity implements it. The server routes the sign-in's
// requests to it, and the session's cookie is read by an Authorizer (the
// same implementation, in the server's Chain). Its methods are called
// concurrently and answer every request, however malformed, without
// panicking.
type SignIn interface {
	// Method describes the sign-in for GET /api/v1/auth (LoginPath is the
	// server's to fill in); it does no I/O.
	Method() wire.OIDCSignIn
	// Start answers GET LoginPath: it redirects the browser to the
	// provider, or answers an error.
	Start(w http.ResponseWriter, r *http.Request)
	// Finish answers GET /api/v1/auth/oidc/callback, where the provider
	// sends the browser back: it opens the session and redirects to the
	// UI, or redirects to the UI with the reason it did not.
	Finish(w http.ResponseWriter, r *http.Request)
	// SignOut ends the session r's cookie names and clears the cookie on
	// w. It returns the URL that ends the session at the provider too, or
	// "" when the provider offers none. A cookie naming a session without
	// its CSRF token is refused with an error wrapping ErrForbidden.
	SignOut(w http.ResponseWriter, r *http.Request) (endSession string, err error)
}

// authMethods answers GET /api/v1/auth: how to sign in. It is public: the
// sign-in page needs it before anyone has signed in.
func (s *Server) authMethods(w http.ResponseWriter, _ *http.Request, _ Subject) {
	out := wire.AuthMethods{Token: true}
	if s.signIn != nil {
		m := s.signIn.Method()
		m.LoginPath, m.Scopes = LoginPath, slices.Clone(m.Scopes)
		if m.Scopes == nil {
			m.Scopes = []string{}
		}
		out.OIDC = &m
	}
	writeJSON(w, http.StatusOK, out)
}

// errNoSignIn answers the sign-in routes of a server without one.
func errNoSignIn(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, wire.CodeNotFound, "sign-in at an OpenID provider is not configured (--oidc-file)")
}

// signInStart hands GET LoginPath to the sign-in.
func (s *Server) signInStart(w http.ResponseWriter, r *http.Request, _ Subject) {
	if s.signIn == nil {
		errNoSignIn(w)
		return
	}
	s.signIn.Start(w, r)
}

// signInFinish hands the provider's redirect back to the sign-in.
func (s *Server) signInFinish(w http.ResponseWriter, r *http.Request, _ Subject) {
	if s.signIn == nil {
		errNoSignIn(w)
		return
	}
	s.signIn.Finish(w, r)
}

// signOut ends the caller's session. It is public, as the sign-in routes
// are: the session itself is the credential, checked by the sign-in with
// its CSRF token, and one whose role was taken away may still sign out.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request, _ Subject) {
	if s.signIn == nil {
		errNoSignIn(w)
		return
	}
	end, err := s.signIn.SignOut(w, r)
	switch {
	case errors.Is(err, ErrForbidden):
		writeError(w, http.StatusForbidden, wire.CodeForbidden, err.Error())
	case err != nil:
		s.fail(w, r, err)
	default:
		writeJSON(w, http.StatusOK, wire.SignedOut{EndSessionURL: end})
	}
}
