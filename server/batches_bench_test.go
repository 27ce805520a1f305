package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"enrichd/server/servertest"
)

// BenchmarkBatchUpload10k measures POST /v1/batches of a 10,000-row CSV file: every
// row read and checked, the batch and its rows written in one transaction. The rows'
// tasks are made after the answer (no workers run here).
func BenchmarkBatchUpload10k(b *testing.B) {
	e := servertest.NewEnv(b)
	if _, err := e.DB.GrantCredits(b.Context(), "acme", 1<<40, nil); err != nil {
		b.Fatal(err)
	}
	var file strings.Builder
	file.WriteString("domain,owner,notes\n")
	for i := range 10000 {
		fmt.Fprintf(&file, "company-%d.com,owner %d,some notes about row %d\n", i, i, i)
	}
	body := file.String()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, e.HTTP.URL+"/v1/batches", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e.Key)
		req.Header.Set("Content-Type", "text/csv")
		res, err := servertest.Client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			b.Fatalf("POST /v1/batches: %d", res.StatusCode)
		}
	}
}
