package webhook

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"enrichd/netguard"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"120", 120 * time.Second},
		{" 5 ", 5 * time.Second},
		{"0", 0},
		{"-3", 0},
		{"1.5", 0},
		{"soon", 0},
		{"99999999999999999999", 7 * 24 * time.Hour}, // valid delay-seconds, however long
		{"-99999999999999999999", 0},
		{"9999999999", 7 * 24 * time.Hour}, // bounded before any arithmetic
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	} {
		if got := ParseRetryAfter(c.header, now); got != c.want {
			t.Errorf("Retry-After %q: %v, want %v", c.header, got, c.want)
		}
	}
}

// A delivery claimed as its Loop's destination was being disabled is not sent: the
// attempt fails on our side with the reason, and no request leaves.
func TestADeliveryOfADisabledDestinationIsNotSent(t *testing.T) {
	is := is.New(t)
	db := storetest.Open(t, filepath.Join(t.TempDir(), "enrichd.db"), storetest.NewClock(time.Now().UTC()))
	s := NewSender(db, SenderConfig{Policy: netguard.Policy{AllowPrivate: true}})
	s.client.Transport = roundTripFunc(func(*http.Request) (*http.Response, error) {
		t.Fatal("a request was sent")
		return nil, nil
	})
	a := s.attempt(context.Background(), &store.Dispatch{ID: "d", LoopID: "l", URL: "https://hooks.example/", Secret: "whsec_x",
		Attempt: 1, DisabledReason: store.ReasonGone})
	is.True(a.Attempt != nil)
	is.Equal(a.Attempt.Err, store.NotSentError(store.ReasonGone))
	is.Equal(a.Attempt.StatusCode, 0)
	is.True(a.Attempt.NotSent)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
