package api

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 document of the public API: every
// route but the node-to-node ones under /internal/ and the dashboard's
// files under /ui/. TestOpenAPI drives
// every route of a real node against it and fails when the router has a
// route it does not list, so edit it with the routes.
//
//go:embed openapi.json
var openAPIDocument []byte

// serveOpenAPI answers GET /v1/openapi.json. It needs no token, like
// /healthz: the document describes the routes and holds no data, and a
// client needs it before it has a token.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
