// Package api is Skep's HTTP API under /api/v1: the one door through which
// people, the CLI, the UI and scripts see and steer the controller.
//
// Every route is declared once in the route table (Server.table, in
// handlers.go), documented in openapi.yaml (embedded as OpenAPI) and served
// by a Server whose guard authenticates the caller through an Authorizer
// (Tokens, or a Chain of it with package identity's sign-in sessions and
// ID tokens) and hands the resulting Subject to the handler as a
// parameter. Sign-in at an OpenID provider is a SignIn the server routes
// to; the API itself never speaks to the provider. No
// authorisation decision ever reads the request context: the context only
// carries the subject's display name (notify.WithActor) so that events name
// who asked. Bodies in and out are the JSON model of package wire.
//
// Handlers know the controller only through the Reconciler interface;
// Controller (NewController) adapts a *reconcile.Controller to it, and no
// other file reads the reconcile loop. The package never talks to Docker or
// git itself, and never lets a token, a webhook secret or a credential
// reach a log, an error or a response: tokens are kept as SHA-256 digests,
// and the tokens and webhooks files are decoded by package configfile with
// values hidden and their secrets read through package secret. Inbound
// webhooks are only hints: a push names a repository and a ref, and the
// reconciler re-reads git itself.
//
// Errors are JSON objects {"code", "message"} with the stable codes of
// wire.ErrorCode; unknown routes answer 404 and wrong methods 405 with Allow.
// Options.UI, when set, serves the web UI at / and /ui/ beside the route
// table: public, since the page holds no data, and with the UI's own
// Content-Security-Policy; every other path keeps the API's headers.
package api
