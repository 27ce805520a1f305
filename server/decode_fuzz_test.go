package server

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"enrichd/enrich"
)

// fuzzRequest has the shape of the API's request bodies: optional strings and a
// boolean, as the enrichment, Loop run and Loop bodies have.
type fuzzRequest struct {
	Domain     *string `json:"domain,omitempty"`
	NetworkURL *string `json:"networkUrl,omitempty"`
	Email      *string `json:"email,omitempty"`
	FullName   *string `json:"fullName,omitempty"`
	Title      *string `json:"title,omitempty"`
	Location   *string `json:"location,omitempty"`
	LoopID     *string `json:"loop_id,omitempty"`
	Enabled    *bool   `json:"enabled,omitempty"`
}

func (r fuzzRequest) strings() []*string {
	return []*string{r.Domain, r.NetworkURL, r.Email, r.FullName, r.Title, r.Location, r.LoopID}
}

// FuzzDecode holds the request decoder to its contract for any body and Content-Type:
// it never panics; it either refuses with a 400 whose message is short and valid UTF-8,
// or returns only what was sent: valid UTF-8 with no U+FFFD the body did not carry; and
// its time and allocations grow at most linearly with the body. The bounds are loose
// enough for a loaded 2-core machine: a linear decoder stays far below them, a
// quadratic one on a 64 KiB body far above.
func FuzzDecode(f *testing.F) {
	for _, seed := range []struct{ ct, body string }{
		{"application/json", `{"domain":"acme.com"}`},
		{"application/json; charset=utf-8", `{"email":"jane@acme.com","fullName":"Jane Doe","title":"CTO","location":"Berlin"}`},
		{"application/json; charset=iso-8859-1", `{"domain":"acme.com"}`},
		{"application/json; charset=", `{"domain":"acme.com"}`},
		{"text/plain", `{"domain":"acme.com"}`},
		{"application/json", "{\"fullName\":\"Jan\xe9\"}"},
		{"application/json", "{\"fullName\":\"\xed\xa0\x80\"}"},
		{"application/json", `{"fullName":"\ud83d\ude00 \ud83d x"}`},
		{"application/json", `{"fullName":"\ufffd \\ud800 \u00e9"}`},
		{"application/json", `{"domain":"a.com","domain":"b.com"}`},
		{"application/json", `{"DOMAIN":"a.com"}`},
		{"application/json", `{"` + strings.Repeat("x", 1000) + `":1}`},
		{"application/json", `{"enabled":true,"loop_id":null}`},
		{"application/json", `{"domain":42}`},
		{"application/json", `{"domain":{"a":[1,2,{"b":null}]}}`},
		{"application/json", `[` + strings.Repeat(`[`, 5000) + strings.Repeat(`]`, 5000) + `]`},
		{"application/json", `{"domain":"` + strings.Repeat(`\u0041`, 8000) + `"}`},
		{"application/json", `{"domain":"acme.com"} {"domain":"x"}`},
		{"application/json", `{"domain":`},
		{"application/json", ``},
		{"application/json", strings.Repeat(" ", 70<<10)},
		{"application/json", `{"title":"` + strings.Repeat("a", 65<<10) + `"}`},
	} {
		f.Add(seed.ct, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		r := httptest.NewRequest("POST", "/v1/people/enrich", bytes.NewReader(body))
		r.Header.Set("Content-Type", contentType)

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		v, err := decode[fuzzRequest](r)
		took := time.Since(start)
		runtime.ReadMemStats(&after)

		n := min(len(body), maxBody+1) // the decoder reads no further
		if limit := 2*time.Second + time.Duration(n)*50*time.Microsecond; took > limit {
			t.Errorf("decoding %d bytes took %v, more than %v", n, took, limit)
		}
		// ReadMemStats counts every goroutine's allocations, so the bounds leave room
		// for whatever else the test binary does meanwhile.
		if bytesAllocated, limit := after.TotalAlloc-before.TotalAlloc, uint64(64*n+4<<20); bytesAllocated > limit {
			t.Errorf("decoding %d bytes allocated %d bytes, more than %d", n, bytesAllocated, limit)
		}
		if allocs, limit := after.Mallocs-before.Mallocs, uint64(8*n+20_000); allocs > limit {
			t.Errorf("decoding %d bytes made %d allocations, more than %d", n, allocs, limit)
		}

		if err != nil {
			var e *enrich.Error
			if !errors.As(err, &e) || e.Kind != enrich.KindInvalid {
				t.Fatalf("a refusal must be invalid input (400), got %#v", err)
			}
			if len(e.Message) > 512 || !utf8.ValidString(e.Message) {
				t.Fatalf("the message must be short and valid UTF-8, got %d bytes: %q", len(e.Message), e.Message)
			}
			return
		}
		if !utf8.Valid(body) {
			t.Fatalf("a body that is not valid UTF-8 was accepted: %q", body)
		}
		// Each U+FFFD decoded was sent, as itself or escaped; none replaces what was not
		// a character.
		sent := bytes.Count(body, []byte("\uFFFD")) + bytes.Count(bytes.ToLower(body), []byte(`\ufffd`))
		got := 0
		for _, s := range v.strings() {
			if s == nil {
				continue
			}
			if !utf8.ValidString(*s) {
				t.Fatalf("decoded a string that is not valid UTF-8: %q", *s)
			}
			got += strings.Count(*s, "\uFFFD")
		}
		if got > sent {
			t.Fatalf("decoding made up %d U+FFFD (the body had %d): %q", got, sent, body)
		}
	})
}
