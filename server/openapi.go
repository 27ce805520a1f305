package server

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3.1 document of the API. It is written by hand beside the
// routes, and the HTTP tests check every response they receive against it, so a change
// to the API that is not made to the document too fails them.
//
//go:embed openapi.json
var openAPI []byte

// handleOpenAPI serves the document. It needs no key: it describes the API, not any
// organization's data, and a client must be able to read it before it has a key.
func handleOpenAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(openAPI)
	})
}
