// Package api is Skep's HTTP API under /api/v1: the one door through which
// people, the CLI, the UI and scripts see and steer the controller.
//
// Every route is declared once in the route table (routes.go), documented in
// openapi.yaml (embedded, see OpenAPI) and served by a Server whose guard
// authenticates the caller through an Authorizer and hands the resulting
// Subject to the handler as a parameter. No authorisation decision ever reads
// the request context: the context only carries the subject's display name
// (notify.WithActor) so that events name who asked.
//
// The package knows the controller only through the Reconciler interface it
// declares; it never imports the reconciler, never talks to Docker or git,
// and never lets a token, a webhook secret or a credential reach a log, an
// error or a response. Inbound webhooks are only hints: a push names a
// repository and a ref, and the reconciler re-reads git itself.
//
// Errors are JSON objects {"code", "message"} with the stable codes of
// ErrorCode; unknown routes answer 404 and wrong methods 405 with Allow.
// Options.UI, when set, serves the web UI at / and /ui/ beside the route
// table: public, since the page holds no data, and with the UI's own
// Content-Security-Policy; every other path keeps the API's headers.
package api
