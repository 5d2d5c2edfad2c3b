// Package ui is Skep's web UI: a few hand-written files (HTML, JavaScript
// modules, CSS) embedded in the binary and served by the controller at /
// and /ui/ on the API's port, so a plain go build ships it and nothing is
// fetched from anywhere else.
//
// The page holds no data and no secret. Everything it shows it reads in
// the browser through the public HTTP API under /api/v1 with the token the
// operator typed, kept in the tab's sessionStorage, or with the session of
// a sign-in at the identity provider: an HttpOnly cookie the page never
// reads, and the CSRF token whoami gives it, kept in memory and sent on
// every request that changes something. Live updates come from the API's
// event stream. The package must never call the controller
// itself, embed or inline a secret, import another package of Skep, or
// serve anything with inline script or style: every response carries a
// strict Content-Security-Policy that forbids them (see
// TestAssetsHaveNoInlineScriptOrStyle).
//
// What each screen shows is described in docs/ui.md.
package ui
