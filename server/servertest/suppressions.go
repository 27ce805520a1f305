package servertest

import (
	"net/http"
)

// Suppress adds a suppression through the API and returns its id.
func (e *Env) Suppress(body map[string]any, headers ...string) string {
	e.T.Helper()
	r := e.Do("POST", "/v1/suppressions", body, headers...)
	if r.Status != http.StatusCreated {
		e.T.Fatalf("suppress %v: %d %s", body, r.Status, r.Raw)
	}
	return r.Str("data.id")
}

// SuppressionsTotal is how many entries the key's organization lists.
func (e *Env) SuppressionsTotal(headers ...string) float64 {
	e.T.Helper()
	r := e.Do("GET", "/v1/suppressions", nil, headers...)
	if r.Status != http.StatusOK {
		e.T.Fatalf("list suppressions: %d %s", r.Status, r.Raw)
	}
	n, _ := r.Get("total").(float64)
	return n
}
