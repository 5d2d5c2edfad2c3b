// Package identity turns OpenID Connect identities into api.Subjects:
// people who sign in at the company's OpenID provider (the web UI by the
// authorization code flow with PKCE, the CLI by `skep login`), and CI jobs
// that present the ID token their platform mints (GitHub Actions, GitLab
// CI, any issuer the OIDC file trusts).
//
// A person's groups claim, and a job's claims (repository, ref, workflow,
// environment…), are mapped by the file's rules onto Skep's roles and
// application scopes, the first matching rule winning; an identity no rule
// maps gets no access. Every subject is named oidc:<issuer>#<subject> with
// the email or the job's claims, so every event names who acted.
//
// A browser's session is kept server-side in the store; the browser holds
// only an opaque cookie, and every request but GET and HEAD made with it
// must carry the session's CSRF token. The session refreshes at the
// provider before its ID token expires and maps the groups again, so a
// person removed from a group loses the role at that refresh.
//
// The package must never log, store in the clear or answer a token: ID
// and refresh tokens are sealed (AES-GCM) in the store, a refused token
// is logged by its claims and the reason, and secrets come from files or
// the environment. It never trusts a token before its signature, issuer,
// audience and expiry are checked (and, for a sign-in, its nonce), and
// never takes a CI token twice for a request that changes something.
// Discovery is lazy: no provider is asked anything before it is needed.
// All types are safe for concurrent use.
package identity
