package api

import _ "embed"

// OpenAPI is the API's contract, openapi.yaml, embedded. Tests hold the
// server to it route for route and response for response.
//
//go:embed openapi.yaml
var OpenAPI []byte
