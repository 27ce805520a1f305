package webhook

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"enrichd/netguard"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// panicOnce is a network whose first request panics inside the client; later ones
// go through.
type panicOnce struct{ calls atomic.Int64 }

func (p *panicOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	if p.calls.Add(1) == 1 {
		panic("a transport bug")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A panic while a delivery is attempted fails that attempt, logged once with its
// stack, and the sender goes on: the next delivery is sent.
func TestAPanicInADeliveryAttemptFailsOnlyThatAttempt(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db := storetest.Open(t, filepath.Join(t.TempDir(), "enrichd.db"), storetest.NewClock(time.Now().UTC()))
	var got atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	defer rcv.Close()
	org, err := db.CreateOrg(ctx, "acme")
	is.NoErr(err)
	loop, err := db.CreateLoop(ctx, store.NewLoop{OrgID: org.ID, Name: "L", ObjectType: "company", WebhookURL: rcv.URL, Enabled: true})
	is.NoErr(err)

	var logs lockedBuffer
	var panics atomic.Int64
	s := NewSender(db, SenderConfig{Policy: netguard.Policy{AllowPrivate: true}, Concurrency: 1, Poll: 5 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Panicked: func() { panics.Add(1) }})
	s.client.Transport = &panicOnce{}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		s.Run(runCtx)
	}()
	defer func() { stop(); <-stopped }()

	first, err := db.CreateTestDelivery(ctx, org.ID, loop.ID)
	is.NoErr(err)
	wait := func(ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatal("timed out")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	delivery := func(id string) *store.Delivery {
		list, _, err := db.ListDeliveries(ctx, org.ID, loop.ID, 0, 10)
		is.NoErr(err)
		for _, d := range list {
			if d.ID == id {
				return d
			}
		}
		t.Fatalf("delivery %s not listed", id)
		return nil
	}
	wait(func() bool { return delivery(first.ID).Attempts == 1 })
	d := delivery(first.ID)
	is.Equal(d.Status, "pending") // failed once, retried on schedule
	is.True(d.LastError != nil && strings.Contains(*d.LastError, "internal error"))

	second, err := db.CreateTestDelivery(ctx, org.ID, loop.ID)
	is.NoErr(err)
	s.Wake()
	wait(func() bool { return delivery(second.ID).Status == "succeeded" })
	is.Equal(got.Load(), int64(1))
	is.Equal(strings.Count(logs.String(), "recovered from a panic in a webhook delivery attempt"), 1)
	is.Equal(panics.Load(), int64(1)) // and counted, as /metrics shows it
	is.True(strings.Contains(logs.String(), "a transport bug"))
}

type batchingDestination struct{}

func (batchingDestination) Deliver(context.Context, *store.Dispatch) Outcome { return Outcome{} }
func (batchingDestination) DeliverBatch(_ context.Context, ds []*store.Dispatch) []Outcome {
	return make([]Outcome, len(ds))
}

type singleDestination struct{}

func (singleDestination) Deliver(context.Context, *store.Dispatch) Outcome { return Outcome{} }

// The claimed task.succeeded deliveries of one Loop whose destination takes batches
// go together; every other delivery (a webhook's, another event, another Loop's, a
// disabled destination's, a destination without batches) goes alone.
func TestSenderBatchesALoopsResultsOnlyForABatchDestination(t *testing.T) {
	is := is.New(t)
	s := &Sender{destinations: map[string]Destination{"crm": batchingDestination{}, "other": singleDestination{}}}
	d := func(id, loop, kind, event string) *store.Dispatch {
		return &store.Dispatch{ID: id, LoopID: loop, Kind: kind, Event: event}
	}
	disabled := d("7", "A", "crm", store.EventTaskSucceeded)
	disabled.DisabledReason = "refused"
	groups := s.batches([]*store.Dispatch{
		d("1", "A", "crm", store.EventTaskSucceeded), d("2", "B", "crm", store.EventTaskSucceeded), d("3", "A", "crm", store.EventTaskSucceeded),
		d("4", "A", "crm", store.EventTest), d("5", "A", "", store.EventTaskSucceeded), d("6", "C", "other", store.EventTaskSucceeded),
		disabled, d("8", "C", "other", store.EventTaskSucceeded), d("9", "A", "crm", store.EventTaskSucceeded),
	})
	var ids [][]string
	for _, g := range groups {
		var each []string
		for _, d := range g {
			each = append(each, d.ID)
		}
		ids = append(ids, each)
	}
	is.Equal(ids, [][]string{{"1", "3", "9"}, {"2"}, {"4"}, {"5"}, {"6"}, {"7"}, {"8"}})
}
