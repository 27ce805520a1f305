package servertest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"enrichd/netguard"
	"enrichd/server"
)

// Receiver is a webhook receiver: it records every request and answers with the
// status codes it was given, in order, then 200.
type Receiver struct {
	Srv     *httptest.Server
	mu      sync.Mutex
	got     []Received
	answers []int
	gate    chan struct{} // when set, every request waits for it to close
}

type Received struct {
	Header http.Header
	Body   []byte
}

func NewReceiver(t *testing.T, answers ...int) *Receiver {
	rc := &Receiver{answers: answers}
	rc.Srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		checkOpenAPIWebhook(t, r, body)
		rc.mu.Lock()
		gate := rc.gate
		rc.mu.Unlock()
		if gate != nil {
			<-gate
		}
		rc.mu.Lock()
		rc.got = append(rc.got, Received{Header: r.Header.Clone(), Body: body})
		status := http.StatusOK
		if len(rc.answers) > 0 {
			status, rc.answers = rc.answers[0], rc.answers[1:]
		}
		rc.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(func() {
		rc.Release()
		rc.Srv.Close()
	})
	return rc
}

func (rc *Receiver) Hold() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.gate = make(chan struct{})
}

func (rc *Receiver) Release() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.gate != nil {
		close(rc.gate)
		rc.gate = nil
	}
}

func (rc *Receiver) Count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

// Wait returns the first n requests once they have arrived.
func (rc *Receiver) Wait(t *testing.T, n int) []Received {
	t.Helper()
	deadline := time.Now().Add(SettleWithin)
	for rc.Count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the receiver got %d requests, not %d", rc.Count(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Received(nil), rc.got[:n]...)
}

func AllowPrivateWebhooks(cfg *server.Config) {
	cfg.WebhookPolicy = netguard.Policy{AllowPrivate: true}
}

// CreateLoop creates a Loop and returns its id and secret.
func (e *Env) CreateLoop(name, url, objectType string) (id, secret string) {
	e.T.Helper()
	r := e.Do("POST", "/v1/loops", map[string]any{"name": name, "webhook_url": url, "object_type": objectType})
	if r.Status != http.StatusCreated {
		e.T.Fatalf("create loop: %d %s", r.Status, r.Raw)
	}
	return r.Str("data.id"), r.Str("data.destination.secret")
}

// WaitDelivery polls a Loop's deliveries until the newest matches ok.
func (e *Env) WaitDelivery(loopID string, ok func(d map[string]any) bool) map[string]any {
	e.T.Helper()
	deadline := time.Now().Add(SettleWithin)
	for {
		r := e.Do("GET", "/v1/loops/"+loopID+"/deliveries", nil)
		if r.Status != 200 {
			e.T.Fatalf("list deliveries: %d %s", r.Status, r.Raw)
		}
		if list, _ := r.Get("data").([]any); len(list) > 0 {
			if d := list[0].(map[string]any); ok(d) {
				return d
			}
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("the delivery did not get there: %s", r.Raw)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func Attempts(n int) func(map[string]any) bool {
	return func(d map[string]any) bool { return d["attempts"] == float64(n) }
}
