package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"enrichd/netguard"
	"enrichd/server"
	"enrichd/webhook"

	"github.com/matryer/is"
	stripewebhook "github.com/stripe/stripe-go/v85/webhook"
)

// receiver is a webhook receiver: it records every request and answers with the
// status codes it was given, in order, then 200.
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []received
	answers []int
	gate    chan struct{} // when set, every request waits for it to close
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, answers ...int) *receiver {
	rc := &receiver{answers: answers}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		checkOpenAPIWebhook(t, r, body)
		rc.mu.Lock()
		gate := rc.gate
		rc.mu.Unlock()
		if gate != nil {
			<-gate
		}
		rc.mu.Lock()
		rc.got = append(rc.got, received{header: r.Header.Clone(), body: body})
		status := http.StatusOK
		if len(rc.answers) > 0 {
			status, rc.answers = rc.answers[0], rc.answers[1:]
		}
		rc.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(func() {
		rc.release()
		rc.srv.Close()
	})
	return rc
}

func (rc *receiver) hold() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.gate = make(chan struct{})
}

func (rc *receiver) release() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.gate != nil {
		close(rc.gate)
		rc.gate = nil
	}
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

// wait returns the first n requests once they have arrived.
func (rc *receiver) wait(t *testing.T, n int) []received {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for rc.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the receiver got %d requests, not %d", rc.count(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got[:n]...)
}

func allowPrivateWebhooks(cfg *server.Config) {
	cfg.WebhookPolicy = netguard.Policy{AllowPrivate: true}
}

// createLoop creates a Loop and returns its id and secret.
func (e *env) createLoop(name, url, objectType string) (id, secret string) {
	e.t.Helper()
	r := e.do("POST", "/v1/loops", map[string]any{"name": name, "webhook_url": url, "object_type": objectType})
	if r.status != http.StatusCreated {
		e.t.Fatalf("create loop: %d %s", r.status, r.raw)
	}
	return r.str("data.id"), r.str("data.destination.secret")
}

// waitDelivery polls a Loop's deliveries until the newest matches ok.
func (e *env) waitDelivery(loopID string, ok func(d map[string]any) bool) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.do("GET", "/v1/loops/"+loopID+"/deliveries", nil)
		if r.status != 200 {
			e.t.Fatalf("list deliveries: %d %s", r.status, r.raw)
		}
		if list, _ := r.get("data").([]any); len(list) > 0 {
			if d := list[0].(map[string]any); ok(d) {
				return d
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the delivery did not get there: %s", r.raw)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func attempts(n int) func(map[string]any) bool {
	return func(d map[string]any) bool { return d["attempts"] == float64(n) }
}

func signedAt(t *testing.T, rcv received) int64 {
	t.Helper()
	ts, _, _ := strings.Cut(strings.TrimPrefix(rcv.header.Get(webhook.HeaderSignature), "t="), ",")
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		t.Fatalf("signature header %q: %v", rcv.header.Get(webhook.HeaderSignature), err)
	}
	return n
}

func TestLoopLifecycle(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)

	created := e.do("POST", "/v1/loops", map[string]any{"name": "CRM Sync (prod)", "webhook_url": rcv.srv.URL + "/hook"})
	is.Equal(created.status, http.StatusCreated)
	id := created.str("data.id")
	is.Equal(created.str("data.name"), "CRM Sync (prod)")
	is.Equal(created.str("data.slug"), "crm-sync-prod")
	is.Equal(created.str("data.object_type"), "company") // the default
	is.Equal(created.str("data.operation"), "enrich")
	is.Equal(created.get("data.enabled"), true)
	is.Equal(created.str("data.destination.kind"), "webhook")
	is.Equal(created.str("data.destination.url"), rcv.srv.URL+"/hook")
	is.Equal(created.get("data.destination.enabled"), true)
	secret := created.str("data.destination.secret")
	is.True(strings.HasPrefix(secret, "whsec_"))
	is.True(len(secret) >= len("whsec_")+43) // 32 random bytes
	is.True(created.str("data.created_at") != "" && created.str("data.updated_at") != "")

	// The secret is shown once.
	got := e.do("GET", "/v1/loops/"+id, nil)
	is.Equal(got.status, 200)
	is.Equal(got.str("data.id"), id)
	is.True(got.has("data.destination.url") && !got.has("data.destination.secret"))
	list := e.do("GET", "/v1/loops", nil)
	is.Equal(list.status, 200)
	is.Equal(len(list.get("data").([]any)), 1)
	is.True(!strings.Contains(string(list.raw), secret))

	// Slugs stay unique in the organization.
	second := e.do("POST", "/v1/loops", map[string]any{"name": "CRM sync, prod!", "webhook_url": rcv.srv.URL, "object_type": "person", "enabled": false})
	is.Equal(second.status, http.StatusCreated)
	is.Equal(second.str("data.slug"), "crm-sync-prod-2")
	is.Equal(second.str("data.object_type"), "person")
	is.Equal(second.get("data.enabled"), false)
	is.True(second.str("data.destination.secret") != secret)

	patched := e.do("PATCH", "/v1/loops/"+id, map[string]any{"name": "Warehouse", "enabled": false, "webhook_url": rcv.srv.URL + "/v2"})
	is.Equal(patched.status, 200)
	is.Equal(patched.str("data.name"), "Warehouse")
	is.Equal(patched.str("data.slug"), "warehouse")
	is.Equal(patched.get("data.enabled"), false)
	is.Equal(patched.str("data.destination.url"), rcv.srv.URL+"/v2")
	is.True(!patched.has("data.destination.secret"))
	is.Equal(e.do("GET", "/v1/loops/"+id, nil).get("data.enabled"), false)

	noType := e.do("PATCH", "/v1/loops/"+id, map[string]any{"object_type": "person"})
	is.Equal(noType.status, http.StatusBadRequest)
	is.True(strings.Contains(noType.str("error"), "object_type cannot change"))

	// Another organization sees none of it.
	otherKey, _ := e.newOrg("other", 10)
	as := []string{"Authorization", "Bearer " + otherKey}
	for _, req := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/loops/" + id, nil},
		{"PATCH", "/v1/loops/" + id, map[string]any{"enabled": true}},
		{"DELETE", "/v1/loops/" + id, nil},
		{"POST", "/v1/loops/" + id + "/run", map[string]any{"domain": "acme.com"}},
		{"POST", "/v1/loops/" + id + "/test", nil},
		{"GET", "/v1/loops/" + id + "/deliveries", nil},
	} {
		r := e.do(req.method, req.path, req.body, as...)
		is.Equal(r.status, http.StatusNotFound)
		is.Equal(r.str("code"), "not_found")
		is.Equal(r.str("error"), "loop not found")
	}
	is.Equal(len(e.do("GET", "/v1/loops", nil, as...).get("data").([]any)), 0)
	is.Equal(e.do("GET", "/v1/loops/"+id, nil).get("data.enabled"), false) // untouched

	deleted := e.do("DELETE", "/v1/loops/"+id, nil)
	is.Equal(deleted.status, http.StatusNoContent)
	is.Equal(len(deleted.raw), 0)
	is.Equal(e.do("GET", "/v1/loops/"+id, nil).status, http.StatusNotFound)
	is.Equal(e.do("DELETE", "/v1/loops/"+id, nil).status, http.StatusNotFound)
	is.Equal(e.do("GET", "/v1/loops/not-a-uuid", nil).status, http.StatusNotFound)
}

func TestLoopCreateAndPatchRefuseBadInput(t *testing.T) {
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	id, _ := e.createLoop("Existing", rcv.srv.URL, "company")
	long := strings.Repeat("n", 201)
	for _, c := range []struct {
		name, method, path string
		body               any
		want               string
	}{
		{"no name", "POST", "/v1/loops", map[string]any{"webhook_url": rcv.srv.URL}, "name is required"},
		{"blank name", "POST", "/v1/loops", map[string]any{"name": "  ", "webhook_url": rcv.srv.URL}, "name must be"},
		{"long name", "POST", "/v1/loops", map[string]any{"name": long, "webhook_url": rcv.srv.URL}, "name must be"},
		{"control character in name", "POST", "/v1/loops", map[string]any{"name": "crm\x00sync", "webhook_url": rcv.srv.URL}, "holds a control character"},
		{"control character in a new name", "PATCH", "/v1/loops/" + id, map[string]any{"name": "crm\nsync"}, "holds a control character"},
		{"no URL", "POST", "/v1/loops", map[string]any{"name": "x"}, "webhook_url is required"},
		{"not a URL", "POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": "hooks"}, "webhook_url"},
		{"ftp URL", "POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": "ftp://example.com/"}, "https"},
		{"bad object type", "POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": rcv.srv.URL, "object_type": "job"}, "object_type must be company or person"},
		{"enabled not a boolean", "POST", "/v1/loops", `{"name":"x","webhook_url":"` + rcv.srv.URL + `","enabled":"yes"}`, "enabled must be a boolean"},
		{"unknown field", "POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": rcv.srv.URL, "secret": "mine"}, `unknown field "secret"`},
		{"patch blank name", "PATCH", "/v1/loops/" + id, map[string]any{"name": ""}, "name must be"},
		{"patch bad URL", "PATCH", "/v1/loops/" + id, map[string]any{"webhook_url": "ftp://example.com/"}, "https"},
		{"patch unknown field", "PATCH", "/v1/loops/" + id, map[string]any{"slug": "mine"}, `unknown field "slug"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			r := e.do(c.method, c.path, c.body)
			is.Equal(r.status, http.StatusBadRequest)
			is.True(strings.Contains(r.str("error"), c.want))
		})
	}
	is := is.New(t)
	list := e.do("GET", "/v1/loops", nil)
	is.Equal(len(list.get("data").([]any)), 1) // nothing created
	got := e.do("GET", "/v1/loops/"+id, nil)
	is.Equal(got.str("data.name"), "Existing") // nothing changed
	is.Equal(got.str("data.destination.url"), rcv.srv.URL)
}

// resolver stands in for DNS.
type resolver map[string][]netip.Addr

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if addrs, ok := r[host]; ok {
		return addrs, nil
	}
	return nil, errors.New("no such host")
}

func TestWebhookURLMustBePublicHTTPS(t *testing.T) {
	targets := map[string]string{
		"loopback":    "127.0.0.1",
		"private":     "10.0.0.8",
		"private 192": "192.168.0.10",
		"link-local":  "169.254.169.254",
		"CGNAT":       "100.64.1.1",
		"IPv6 ULA":    "fd00::1",
		"IPv6 local":  "::1",
	}
	dns := resolver{"hooks.example.com": {netip.MustParseAddr("93.184.216.34")}}
	for name, addr := range targets {
		dns[strings.ReplaceAll(name, " ", "-")+".rebind.example"] = []netip.Addr{netip.MustParseAddr(addr)}
	}
	e := newEnv(t, func(cfg *server.Config) { cfg.WebhookPolicy = netguard.Policy{Resolver: dns} })
	id, _ := e.createLoop("Public", "https://hooks.example.com/in", "company")

	for name, addr := range targets {
		literal := addr
		if strings.Contains(addr, ":") {
			literal = "[" + addr + "]"
		}
		for _, url := range []string{"https://" + literal + "/hook", "https://" + strings.ReplaceAll(name, " ", "-") + ".rebind.example/hook"} {
			t.Run(name+" "+url, func(t *testing.T) {
				is := is.New(t)
				r := e.do("POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": url})
				is.Equal(r.status, http.StatusBadRequest)
				is.True(strings.Contains(r.str("error"), "not publicly reachable"))
				r = e.do("PATCH", "/v1/loops/"+id, map[string]any{"webhook_url": url})
				is.Equal(r.status, http.StatusBadRequest)
			})
		}
	}
	is := is.New(t)
	// Plain http and a private address are refused with the way to allow them for
	// local testing; a host that does not resolve has no such remedy.
	const allowHint = " (to allow plain http and private addresses for local testing only, " +
		"the server's operator starts it with `enrichd serve --allow-private-webhooks`)"
	plain := e.do("POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": "http://hooks.example.com/in"})
	is.Equal(plain.status, http.StatusBadRequest)
	is.Equal(plain.str("error"), "webhook_url: the URL must use https, not http"+allowHint)
	plain = e.do("PATCH", "/v1/loops/"+id, map[string]any{"webhook_url": "http://hooks.example.com/in"})
	is.Equal(plain.status, http.StatusBadRequest)
	is.Equal(plain.str("error"), "webhook_url: the URL must use https, not http"+allowHint)
	private := e.do("POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": "https://127.0.0.1/in"})
	is.Equal(private.status, http.StatusBadRequest)
	is.True(strings.HasSuffix(private.str("error"), allowHint))
	is.Equal(e.do("POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": "ftp://hooks.example.com/in"}).str("error"),
		`webhook_url: the URL must use https, not "ftp"`)
	unresolvable := e.do("POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": "https://nowhere.example/in"})
	is.Equal(unresolvable.status, http.StatusBadRequest)
	is.True(strings.Contains(unresolvable.str("error"), "does not resolve"))
	is.True(!strings.Contains(unresolvable.str("error"), "allow-private-webhooks"))
	is.Equal(len(e.do("GET", "/v1/loops", nil).get("data").([]any)), 1)
	is.Equal(e.do("GET", "/v1/loops/"+id, nil).str("data.destination.url"), "https://hooks.example.com/in")
}

func TestDeliveryIsRefusedAtConnectionToANonPublicAddress(t *testing.T) {
	is := is.New(t)
	// The URL was accepted once (as if DNS then pointed to a public address); at
	// delivery time it leads to loopback, and the dial is refused.
	var hits atomic.Int64
	tlsReceiver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer tlsReceiver.Close()
	e := newEnv(t, allowPrivateWebhooks)
	id, _ := e.createLoop("Rebound", tlsReceiver.URL, "company")
	e.stopWorkers()
	e.cfg.WebhookPolicy = netguard.Policy{}
	e.restart()
	e.startWorkers()

	is.Equal(e.do("POST", "/v1/loops/"+id+"/test", nil).status, http.StatusAccepted)
	d := e.waitDelivery(id, attempts(1))
	is.Equal(d["status"], "pending") // to be retried on schedule
	is.True(strings.Contains(d["last_error"].(string), "not publicly reachable"))
	is.Equal(d["last_status_code"], nil)
	is.Equal(hits.Load(), int64(0))
}

func TestAPlainHTTPWebhookIsNotSentByAServerThatRequiresHTTPS(t *testing.T) {
	is := is.New(t)
	// Accepted under the development setting, then served without it.
	rcv := newReceiver(t)
	e := newEnv(t, allowPrivateWebhooks)
	id, _ := e.createLoop("Plain", rcv.srv.URL, "company")
	e.stopWorkers()
	e.cfg.WebhookPolicy = netguard.Policy{}
	e.restart()
	e.startWorkers()

	is.Equal(e.do("POST", "/v1/loops/"+id+"/test", nil).status, http.StatusAccepted)
	d := e.waitDelivery(id, attempts(1))
	is.True(strings.Contains(d["last_error"].(string), "does not use https"))
	is.Equal(rcv.count(), 0)
}

func TestRenamingALoopKeepsItsSlugWhenTheNameFoldsToIt(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	id, _ := e.createLoop("CRM Hooks", rcv.srv.URL, "company")
	r := e.do("PATCH", "/v1/loops/"+id, map[string]any{"name": "crm hooks"})
	is.Equal(r.status, 200)
	is.Equal(r.str("data.slug"), "crm-hooks")
	// Sending object_type unchanged is not a change.
	is.Equal(e.do("PATCH", "/v1/loops/"+id, map[string]any{"object_type": "company"}).status, 200)
}

// TestDeliveriesGoOutOldestFirstAcrossLoops: when the sender is full, the slot that
// frees goes to the oldest due delivery, whichever Loop it is for, skipping only a
// Loop already at its share. The receivers hold every request until the test answers
// it, so exactly one slot frees at a time and every claim is checked against the
// oldest due delivery at that moment. (Comparing arrival order across receivers, as
// this test once did, measured how fast the scheduler ran one in-flight request
// against another, not which delivery the sender chose.)
func TestDeliveriesGoOutOldestFirstAcrossLoops(t *testing.T) {
	e := newEnv(t, allowPrivateWebhooks, func(cfg *server.Config) { cfg.DeliveryConcurrency, cfg.DeliveryPerLoop = 2, 1 })
	type delivery struct{ loop, id string }
	arrived := make(chan delivery, 64)
	stop := make(chan struct{})
	answer := map[string]chan struct{}{} // by Loop: with one per Loop in flight, a Loop names the request
	receiver := func(name string) string {
		release := make(chan struct{})
		answer[name] = release
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
			select {
			case arrived <- delivery{name, r.Header.Get(webhook.HeaderDeliveryID)}:
			case <-stop:
			}
			select {
			case <-release:
			case <-stop:
			}
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	a, _ := e.createLoop("A", receiver("A"), "company")
	b, _ := e.createLoop("B", receiver("B"), "company")
	c, _ := e.createLoop("C", receiver("C"), "company")
	t.Cleanup(func() { close(stop) }) // runs before the receivers close: nothing is left hanging

	var due []delivery // oldest first
	age := map[string]int{}
	queue := func(name, loopID string) {
		r := e.do("POST", "/v1/loops/"+loopID+"/test", nil)
		if r.status != http.StatusAccepted {
			t.Fatalf("test delivery to %s: %d %s", name, r.status, r.raw)
		}
		d := delivery{name, r.str("delivery.id")}
		age[d.id] = len(due)
		due = append(due, d)
		e.clock.Add(time.Millisecond) // each due at its own time, so "oldest" has one answer
	}
	for range 3 {
		queue("C", c)
	}
	for range 20 {
		queue("A", a)
		queue("B", b)
	}
	total := len(due)

	inFlight := map[string]delivery{} // by Loop
	// claim is what the sender must hand out when a slot frees: the oldest due
	// delivery to a Loop with nothing in flight (the share is one), if any.
	claim := func() (delivery, bool) {
		for i, d := range due {
			if _, busy := inFlight[d.loop]; !busy {
				due = append(due[:i:i], due[i+1:]...)
				inFlight[d.loop] = d
				return d, true
			}
		}
		return delivery{}, false
	}
	next := func() delivery {
		t.Helper()
		select {
		case d := <-arrived:
			return d
		case <-time.After(10 * time.Second):
			t.Fatalf("no delivery arrived; %d were still due", len(due))
			return delivery{}
		}
	}

	e.startWorkers()
	// Both slots fill at once; the two requests may arrive in either order.
	want1, _ := claim()
	want2, _ := claim()
	got1, got2 := next(), next()
	if !(got1 == want1 && got2 == want2 || got1 == want2 && got2 == want1) {
		t.Fatalf("first sent %s %s and %s %s, want %s %s and %s %s",
			got1.loop, got1.id, got2.loop, got2.id, want1.loop, want1.id, want2.loop, want2.id)
	}
	sent := 2
	// Answer the newer and the older in-flight request in turn, so that a slot frees
	// both while C's oldest are waiting on C's share and when C's own slot frees.
	for step := 0; len(inFlight) > 0; step++ {
		var done delivery
		for _, d := range inFlight {
			if done.id == "" || (step%2 == 0) == (age[d.id] > age[done.id]) {
				done = d
			}
		}
		answer[done.loop] <- struct{}{}
		delete(inFlight, done.loop)
		want, ok := claim()
		if !ok {
			continue // the Loop still in flight has all that is due: the slot stays free
		}
		if got := next(); got != want {
			t.Fatalf("after %s %s was answered, the sender sent %s %s (due #%d), want %s %s (due #%d, the oldest a free Loop has)",
				done.loop, done.id, got.loop, got.id, age[got.id], want.loop, want.id, age[want.id])
		}
		sent++
	}
	if sent != total || len(due) != 0 {
		t.Fatalf("%d of %d deliveries were sent; %d still due", sent, total, len(due))
	}
}

func TestTheNextAttemptIsScheduledFromTheFailure(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	arrived, release := make(chan struct{}, 2), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	defer close(release)
	id, _ := e.createLoop("Slow", srv.URL, "company")
	e.startWorkers()
	e.do("POST", "/v1/loops/"+id+"/test", nil)
	<-arrived
	e.clock.Add(9 * time.Second) // the receiver takes 9 s to answer 500
	failedAt := e.clock.Now()
	release <- struct{}{}
	d := e.waitDelivery(id, attempts(1))
	next, err := time.Parse(time.RFC3339Nano, d["next_attempt_at"].(string))
	is.NoErr(err)
	is.Equal(next.UnixMilli(), failedAt.Add(10*time.Second).UnixMilli())
}

func TestRunDeliversASignedEventOnce(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	e.net.addCompany(company("Acme", "acme.com"))
	rcv := newReceiver(t)
	loopID, secret := e.createLoop("Companies", rcv.srv.URL+"/hook", "company")
	e.startWorkers()

	r := e.do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "acme.com"})
	is.Equal(r.status, http.StatusAccepted)
	is.Equal(r.str("task.loop_id"), loopID)
	is.Equal(r.get("task.credits_charged"), 1.0) // the same as the direct call
	is.Equal(r.get("task.input"), map[string]any{"domain": "acme.com"})
	task := e.waitSettled(r.str("task.id"))
	is.Equal(task.str("task.status"), "succeeded")

	got := rcv.wait(t, 1)[0]
	is.Equal(got.header.Get("Content-Type"), "application/json")
	is.Equal(got.header.Get("User-Agent"), "Service-Webhook/1")
	is.Equal(got.header.Get("X-Service-Event"), "task.succeeded")
	deliveryID := got.header.Get("X-Service-Delivery-Id")
	is.True(deliveryID != "")
	sig := got.header.Get("X-Service-Signature")
	is.NoErr(webhook.Verify(got.body, sig, secret, 0))
	is.NoErr(stripewebhook.ValidatePayloadWithTolerance(got.body, sig, secret, 300*time.Second))
	is.True(webhook.Verify(got.body, sig, "whsec_wrong", 0) != nil)

	var body map[string]any
	is.NoErr(json.Unmarshal(got.body, &body))
	is.Equal(body["event"], "task.succeeded")
	is.Equal(body["error"], nil)
	is.True(body["data"] != nil)
	is.Equal(body["data"].(map[string]any)["name"], "Acme")
	sent := body["task"].(map[string]any)
	is.Equal(sent["id"], r.str("task.id"))
	is.Equal(sent["status"], "succeeded")
	is.Equal(sent["object_type"], "company")
	is.Equal(sent["target"], "acme.com")
	is.Equal(sent["loop_id"], loopID)

	d := e.waitDelivery(loopID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	is.Equal(d["id"], deliveryID)
	is.Equal(d["event"], "task.succeeded")
	is.Equal(d["task_id"], r.str("task.id"))
	is.Equal(d["attempts"], 1.0)
	is.Equal(d["last_status_code"], 200.0)
	is.Equal(d["last_error"], nil)
	is.Equal(d["next_attempt_at"], nil)
	is.Equal(rcv.count(), 1) // once
}

func TestDirectCallsDeliverToTheLoopTheyName(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	e.net.addCompany(company("Acme", "acme.com"))
	rcv := newReceiver(t)
	loopID, secret := e.createLoop("Companies", rcv.srv.URL, "company")
	e.startWorkers()

	// A miss: task.failed, data null, the error as polling shows it; refunded.
	miss := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "nowhere.com", "loop_id": loopID})
	is.Equal(miss.status, http.StatusAccepted)
	is.Equal(e.waitSettled(miss.str("task.id")).str("task.status"), "failed")
	failed := rcv.wait(t, 1)[0]
	is.Equal(failed.header.Get("X-Service-Event"), "task.failed")
	is.NoErr(webhook.Verify(failed.body, failed.header.Get("X-Service-Signature"), secret, 0))
	var body map[string]any
	is.NoErr(json.Unmarshal(failed.body, &body))
	is.Equal(body["event"], "task.failed")
	is.Equal(body["data"], nil)
	is.Equal(body["error"].(map[string]any)["code"], "not_found")
	is.Equal(body["task"].(map[string]any)["status"], "failed")

	// Fetched, then served from the store inside the request: both deliver.
	first := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": loopID})
	e.waitSettled(first.str("task.id"))
	hit := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": loopID})
	is.Equal(hit.status, http.StatusOK)
	is.Equal(hit.str("task.status"), "succeeded")
	got := rcv.wait(t, 3)
	var taskIDs []string
	for _, g := range got[1:] {
		is.Equal(g.header.Get("X-Service-Event"), "task.succeeded")
		var b map[string]any
		is.NoErr(json.Unmarshal(g.body, &b))
		taskIDs = append(taskIDs, b["task"].(map[string]any)["id"].(string))
	}
	is.True(strings.Contains(strings.Join(taskIDs, " "), hit.str("task.id")))

	// An idempotent replay sends nothing new.
	key := []string{"Idempotency-Key", "k1"}
	once := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": loopID}, key...)
	is.Equal(once.status, http.StatusOK)
	rcv.wait(t, 4)
	replay := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": loopID}, key...)
	is.Equal(replay.str("task.id"), once.str("task.id"))
	list := e.do("GET", "/v1/loops/"+loopID+"/deliveries", nil)
	is.Equal(list.get("total"), 4.0)

	// A task without a Loop sends nothing.
	plain := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"})
	is.Equal(plain.status, http.StatusOK)
	is.Equal(e.do("GET", "/v1/loops/"+loopID+"/deliveries", nil).get("total"), 4.0)
	is.Equal(e.balance("acme").Charged-e.balance("acme").Refund, int64(4))
}

func TestRunRefusesWhatTheLoopDoesNotTake(t *testing.T) {
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	companies, _ := e.createLoop("Companies", rcv.srv.URL, "company")
	people, _ := e.createLoop("People", rcv.srv.URL, "person")
	disabled, _ := e.createLoop("Paused", rcv.srv.URL, "company")
	if r := e.do("PATCH", "/v1/loops/"+disabled, map[string]any{"enabled": false}); r.status != 200 {
		t.Fatal(r.status)
	}
	profile := "https://www.linkedin.com/in/jane-doe"
	for _, c := range []struct {
		name, loop string
		body       any
		status     int
		code, want string
	}{
		{"email on a company Loop", companies, map[string]string{"email": "jane@acme.com"}, 400, "invalid_input", "enriches companies"},
		{"hint on a company Loop", companies, map[string]string{"domain": "acme.com", "fullName": "Jane"}, 400, "invalid_input", "enriches companies"},
		{"profile URL on a company Loop", companies, map[string]string{"networkUrl": profile}, 400, "invalid_input", "company page"},
		{"domain on a person Loop", people, map[string]string{"domain": "acme.com"}, 400, "invalid_input", "enriches people"},
		{"company page on a person Loop", people, map[string]string{"networkUrl": "https://www.linkedin.com/company/acme"}, 400, "invalid_input", "profile"},
		{"nothing on a company Loop", companies, map[string]string{}, 400, "invalid_input", "send one of domain or networkUrl"},
		{"unknown field", companies, map[string]string{"domain": "acme.com", "loop_id": companies}, 400, "invalid_input", `unknown field "loop_id"`},
		{"disabled Loop", disabled, map[string]string{"domain": "acme.com"}, 409, "loop_disabled", "disabled"},
		{"unknown Loop", "0195f3a2-6b1c-7cde-8f00-123456789abc", map[string]string{"domain": "acme.com"}, 404, "not_found", "loop not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			r := e.do("POST", "/v1/loops/"+c.loop+"/run", c.body)
			is.Equal(r.status, c.status)
			is.Equal(r.str("code"), c.code)
			is.True(strings.Contains(r.str("error"), c.want))
		})
	}
	for _, c := range []struct {
		name, path string
		body       map[string]string
		status     int
		want       string
	}{
		{"direct company call naming a person Loop", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": people}, 400, "takes person enrichments"},
		{"direct person call naming a company Loop", "/v1/people/enrich", map[string]string{"networkUrl": profile, "loop_id": companies}, 400, "takes company enrichments"},
		{"direct call naming a disabled Loop", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": disabled}, 409, "disabled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			r := e.do("POST", c.path, c.body)
			is.Equal(r.status, c.status)
			is.True(strings.Contains(r.str("error"), c.want))
		})
	}
	is := is.New(t)
	is.Equal(e.balance("acme").Charged, int64(0)) // nothing charged
	is.Equal(e.do("GET", "/v1/tasks", nil).get("total"), 0.0)
}

func TestDisabledLoopStillDeliversTasksInFlight(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	e.net.addCompany(company("Acme", "acme.com"))
	rcv := newReceiver(t)
	loopID, _ := e.createLoop("Companies", rcv.srv.URL, "company")

	queued := e.do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "acme.com"})
	is.Equal(queued.status, http.StatusAccepted)
	is.Equal(e.do("PATCH", "/v1/loops/"+loopID, map[string]any{"enabled": false}).status, 200)
	is.Equal(e.do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "acme.com"}).status, http.StatusConflict)

	e.startWorkers()
	e.waitSettled(queued.str("task.id"))
	got := rcv.wait(t, 1)[0]
	is.True(strings.Contains(string(got.body), queued.str("task.id")))
}

func TestDeliveryRetriesOnScheduleWithTheSameID(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t, 500, 503)
	loopID, secret := e.createLoop("Flaky", rcv.srv.URL, "company")
	e.startWorkers()
	start := e.clock.Now().Unix()

	is.Equal(e.do("POST", "/v1/loops/"+loopID+"/test", nil).status, http.StatusAccepted)
	d := e.waitDelivery(loopID, attempts(1))
	is.Equal(d["status"], "pending")
	is.Equal(d["last_status_code"], 500.0)
	is.True(strings.Contains(d["last_error"].(string), "500"))
	next, err := time.Parse(time.RFC3339Nano, d["next_attempt_at"].(string))
	is.NoErr(err)
	is.Equal(next.Unix(), start+10) // 10 seconds after the first attempt
	is.Equal(rcv.count(), 1)        // not due yet on the store's clock

	e.clock.Add(10 * time.Second)
	d = e.waitDelivery(loopID, attempts(2))
	is.Equal(d["last_status_code"], 503.0)
	next, _ = time.Parse(time.RFC3339Nano, d["next_attempt_at"].(string))
	is.Equal(next.Unix(), start+10+60) // a minute after the second
	is.Equal(rcv.count(), 2)

	e.clock.Add(time.Minute)
	d = e.waitDelivery(loopID, attempts(3))
	is.Equal(d["status"], "succeeded")
	is.Equal(d["last_status_code"], 200.0)
	is.Equal(d["last_error"], nil)

	got := rcv.wait(t, 3)
	is.Equal(rcv.count(), 3)
	for i, want := range []int64{start, start + 10, start + 70} {
		is.Equal(signedAt(t, got[i]), want) // each attempt signed when it was sent
		is.Equal(got[i].header.Get("X-Service-Delivery-Id"), d["id"])
		is.Equal(string(got[i].body), string(got[0].body)) // the same bytes every time
	}
	is.NoErr(webhook.Verify(got[0].body, got[0].header.Get("X-Service-Signature"), secret, 0))
	var body map[string]any
	is.NoErr(json.Unmarshal(got[0].body, &body))
	is.Equal(body, map[string]any{"event": "test", "task": nil, "data": nil, "error": nil})
	is.Equal(got[0].header.Get("X-Service-Event"), "test")
}

func TestDeliveryScheduleSurvivesARestart(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t, 500)
	loopID, _ := e.createLoop("Flaky", rcv.srv.URL, "company")
	e.startWorkers()
	start := e.clock.Now().Unix()
	is.Equal(e.do("POST", "/v1/loops/"+loopID+"/test", nil).status, http.StatusAccepted)
	first := e.waitDelivery(loopID, attempts(1))

	e.restart()
	e.startWorkers()
	// Not due yet: the restart did not reset the schedule to "immediately".
	d := e.waitDelivery(loopID, attempts(1))
	is.Equal(d["next_attempt_at"], first["next_attempt_at"])
	is.Equal(rcv.count(), 1)

	e.clock.Add(10 * time.Second)
	d = e.waitDelivery(loopID, attempts(2))
	is.Equal(d["status"], "succeeded")
	got := rcv.wait(t, 2)
	is.Equal(signedAt(t, got[1]), start+10)
	is.Equal(got[1].header.Get("X-Service-Delivery-Id"), first["id"])
}

func TestDeliveryFailsAfterTheLastAttemptAndCanBeRetried(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t, 500, 500, 500, 500, 500, 500, 500)
	loopID, _ := e.createLoop("Down", rcv.srv.URL, "company")
	e.startWorkers()
	created := e.do("POST", "/v1/loops/"+loopID+"/test", nil)
	is.Equal(created.status, http.StatusAccepted)
	is.Equal(created.str("delivery.status"), "pending")
	is.Equal(created.str("delivery.event"), "test")
	id := created.str("delivery.id")

	// A pending delivery already due (or being sent) is left to that attempt: one
	// attempt, not two.
	retryDue := e.do("POST", "/v1/deliveries/"+id+"/retry", nil)
	is.Equal(retryDue.status, http.StatusAccepted)
	is.Equal(retryDue.str("delivery.status"), "pending")
	e.waitDelivery(loopID, attempts(1))
	is.Equal(rcv.count(), 1)

	// A pending delivery waiting for its next attempt (10 s away, and the clock stands
	// still) is sent now, with the same id, and the schedule goes on from there.
	retryPending := e.do("POST", "/v1/deliveries/"+id+"/retry", nil)
	is.Equal(retryPending.status, http.StatusAccepted)
	is.Equal(retryPending.str("delivery.id"), id)
	is.Equal(retryPending.str("delivery.status"), "pending")
	is.Equal(retryPending.str("delivery.next_attempt_at"), e.clock.Now().Truncate(time.Millisecond).Format(time.RFC3339Nano))
	for i, wait := range []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour} {
		e.waitDelivery(loopID, attempts(i+2))
		e.clock.Add(wait)
	}
	d := e.waitDelivery(loopID, attempts(7))
	is.Equal(d["status"], "failed")
	is.Equal(d["next_attempt_at"], nil)
	is.Equal(rcv.count(), 7)
	e.clock.Add(24 * time.Hour)
	is.Equal(e.waitDelivery(loopID, attempts(7))["status"], "failed") // no eighth by itself

	otherKey, _ := e.newOrg("other", 10)
	foreign := e.do("POST", "/v1/deliveries/"+id+"/retry", nil, "Authorization", "Bearer "+otherKey)
	is.Equal(foreign.status, http.StatusNotFound)
	is.Equal(foreign.str("error"), "delivery not found")

	retried := e.do("POST", "/v1/deliveries/"+id+"/retry", nil)
	is.Equal(retried.status, http.StatusAccepted)
	is.Equal(retried.str("delivery.id"), id)
	is.Equal(retried.str("delivery.status"), "pending")
	d = e.waitDelivery(loopID, attempts(8))
	is.Equal(d["status"], "succeeded")
	got := rcv.wait(t, 8)
	for _, g := range got {
		is.Equal(g.header.Get("X-Service-Delivery-Id"), id)
	}
	delivered := e.do("POST", "/v1/deliveries/"+id+"/retry", nil)
	is.Equal(delivered.status, http.StatusConflict)
	is.Equal(delivered.str("code"), "delivery_not_failed")
	is.Equal(delivered.str("error"), "the delivery already succeeded (its receiver acknowledged it); there is nothing to retry")
	is.Equal(rcv.count(), 8)
}

func TestSlowReceiverDoesNotHoldBackOthers(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks, func(cfg *server.Config) {
		cfg.DeliveryConcurrency, cfg.DeliveryPerLoop = 4, 2
	})
	slow, fast := newReceiver(t), newReceiver(t)
	slow.hold()
	slowLoop, _ := e.createLoop("Slow", slow.srv.URL, "company")
	fastLoop, _ := e.createLoop("Fast", fast.srv.URL, "company")
	e.startWorkers()
	for range 6 {
		is.Equal(e.do("POST", "/v1/loops/"+slowLoop+"/test", nil).status, http.StatusAccepted)
	}
	is.Equal(e.do("POST", "/v1/loops/"+fastLoop+"/test", nil).status, http.StatusAccepted)

	fast.wait(t, 1) // arrives while the slow receiver holds every request it got
	is.Equal(slow.count(), 0)
	slow.release()
	slow.wait(t, 6)
}

func TestDeletingALoopDropsItsPendingDeliveries(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	e.net.addCompany(company("Acme", "acme.com"))
	rcv := newReceiver(t, 500)
	loopID, _ := e.createLoop("Gone", rcv.srv.URL, "company")
	e.startWorkers()
	run := e.do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "acme.com"})
	e.waitSettled(run.str("task.id"))
	d := e.waitDelivery(loopID, attempts(1))
	is.Equal(d["status"], "pending")

	is.Equal(e.do("DELETE", "/v1/loops/"+loopID, nil).status, http.StatusNoContent)
	e.clock.Add(time.Hour)
	is.Equal(e.do("POST", "/v1/deliveries/"+d["id"].(string)+"/retry", nil).status, http.StatusNotFound)
	task := e.do("GET", "/v1/tasks/"+run.str("task.id"), nil)
	is.Equal(task.str("task.loop_id"), loopID) // tasks keep their loop_id
	// Nothing further is sent: a new Loop's test event goes out alone.
	other := newReceiver(t)
	otherLoop, _ := e.createLoop("Next", other.srv.URL, "company")
	e.do("POST", "/v1/loops/"+otherLoop+"/test", nil)
	other.wait(t, 1)
	is.Equal(rcv.count(), 1)
}

func TestDeliveriesListPages(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	rcv := newReceiver(t)
	loopID, _ := e.createLoop("Paged", rcv.srv.URL, "company")
	var ids []string
	for range 3 {
		ids = append(ids, e.do("POST", "/v1/loops/"+loopID+"/test", nil).str("delivery.id"))
		e.clock.Add(time.Millisecond)
	}
	page := e.do("GET", "/v1/loops/"+loopID+"/deliveries?pageSize=2", nil)
	is.Equal(page.status, 200)
	is.Equal(page.get("total"), 3.0)
	data := page.get("data").([]any)
	is.Equal(len(data), 2)
	is.Equal(data[0].(map[string]any)["id"], ids[2]) // newest first
	next := e.do("GET", "/v1/loops/"+loopID+"/deliveries?page=1&pageSize=2", nil)
	is.Equal(next.get("data").([]any)[0].(map[string]any)["id"], ids[0])
	bad := e.do("GET", "/v1/loops/"+loopID+"/deliveries?pageSize=101", nil)
	is.Equal(bad.status, http.StatusBadRequest)
	is.True(strings.Contains(bad.str("error"), "pageSize"))
}

func TestAReceiverThatDoesNotAnswerInTimeFailsTheAttempt(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks, func(cfg *server.Config) { cfg.DeliveryTimeout = time.Second })
	rcv := newReceiver(t)
	rcv.hold() // answers only when released: never, within the attempt
	loopID, _ := e.createLoop("Stuck", rcv.srv.URL, "company")
	e.startWorkers()
	is.Equal(e.do("POST", "/v1/loops/"+loopID+"/test", nil).status, http.StatusAccepted)
	d := e.waitDelivery(loopID, attempts(1))
	is.Equal(d["status"], "pending")
	is.Equal(d["last_status_code"], nil)
	is.True(strings.Contains(d["last_error"].(string), "no response within 1s"))

	// Once the receiver answers, the next attempt succeeds; on a machine too busy for
	// the receiver to answer within the second, one of those after it.
	rcv.release()
	for i, wait := range []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute} {
		e.clock.Add(wait)
		if d = e.waitDelivery(loopID, attempts(i+2)); d["status"] == "succeeded" {
			break
		}
	}
	is.Equal(d["status"], "succeeded")
}

func TestAPersonLoopRunsEmailLookups(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	acmeNetwork(e)
	rcv := newReceiver(t)
	loopID, secret := e.createLoop("People", rcv.srv.URL, "person")
	e.startWorkers()

	// A refused address fails inside the request, refunded, and still tells the Loop.
	refused := e.do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"email": "info@acme.com"})
	is.Equal(refused.status, http.StatusOK)
	is.Equal(refused.str("task.status"), "failed")
	is.Equal(refused.str("error.code"), "not_found")
	first := rcv.wait(t, 1)[0]
	is.Equal(first.header.Get("X-Service-Event"), "task.failed")

	// A resolved address costs 3 credits, as on the direct endpoint, and delivers the person.
	run := e.do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"email": "jane.smith@acme.com"})
	is.Equal(run.status, http.StatusAccepted)
	is.Equal(run.get("task.credits_charged"), 3.0)
	is.Equal(e.waitSettled(run.str("task.id")).str("task.status"), "succeeded")
	got := rcv.wait(t, 2)[1]
	is.Equal(got.header.Get("X-Service-Event"), "task.succeeded")
	is.NoErr(webhook.Verify(got.body, got.header.Get("X-Service-Signature"), secret, 0))
	var body map[string]any
	is.NoErr(json.Unmarshal(got.body, &body))
	data := body["data"].(map[string]any)
	is.Equal(data["full_name"], "Jane Smith")
	is.Equal(data["email_match"].(map[string]any)["method"], "resolved")
	is.Equal(e.balance("acme").Charged-e.balance("acme").Refund, int64(3))
}

func TestAnIdempotencyKeyReusedOnAnotherLoopSaysSo(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	first, _ := e.createLoop("first", "https://127.0.0.1:9/hook", "company")
	second, _ := e.createLoop("second", "https://127.0.0.1:9/hook", "company")
	is.Equal(e.do("POST", "/v1/loops/"+first+"/run", map[string]string{"domain": "acme.com"}, "Idempotency-Key", "k1").status, http.StatusAccepted)
	is.Equal(e.do("POST", "/v1/loops/"+first+"/run", map[string]string{"domain": "acme.com"}, "Idempotency-Key", "k1").status, http.StatusOK)

	r := e.do("POST", "/v1/loops/"+second+"/run", map[string]string{"domain": "acme.com"}, "Idempotency-Key", "k1")
	is.Equal(r.status, http.StatusUnprocessableEntity)
	is.Equal(r.str("code"), "idempotency_key_reused")
	is.Equal(r.str("error"), "this Idempotency-Key was first used on POST /v1/loops/"+first+"/run, not on POST /v1/loops/"+second+"/run; "+
		"a key names one request: send a new key for this one")
	// The direct endpoint naming the same Loop is another endpoint as well.
	r = e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": first}, "Idempotency-Key", "k1")
	is.Equal(r.status, http.StatusUnprocessableEntity)
	is.True(strings.Contains(r.str("error"), "first used on POST /v1/loops/"+first+"/run, not on POST /v1/companies/enrich"))
	is.Equal(e.balance("acme").Charged, int64(1))
	is.Equal(e.do("GET", "/v1/tasks", nil).get("total"), 1.0)
}
