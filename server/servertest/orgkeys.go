package servertest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// ByKeyPDL is People Data Labs' company enrichment, in its published shape, for any
// website, to the keys it takes; any other key gets its 401. It records the key of
// every request.
type ByKeyPDL struct {
	*httptest.Server
	mu   sync.Mutex
	good map[string]bool
	sent []string // "website key"
}

func NewByKeyPDL(t *testing.T, good ...string) *ByKeyPDL {
	f := &ByKeyPDL{good: map[string]bool{}}
	for _, k := range good {
		f.good[k] = true
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, site := r.Header.Get("X-Api-Key"), r.URL.Query().Get("website")
		f.mu.Lock()
		f.sent = append(f.sent, site+" "+key)
		ok := f.good[key]
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]any{"status": 401, "error": map[string]any{"type": "authentication_error", "message": "Invalid API key"}})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"status": 200, "likelihood": 8, "name": site, "display_name": "Company " + site,
			"website": site, "employee_count": 120})
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *ByKeyPDL) SetGood(key string, ok bool) {
	f.mu.Lock()
	f.good[key] = ok
	f.mu.Unlock()
}

func (f *ByKeyPDL) Requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sent...)
}
