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
	"sync/atomic"
	"testing"
	"time"

	"enrichd/netguard"
	"enrichd/server"
	"enrichd/server/servertest"
	"enrichd/webhook"

	"github.com/matryer/is"
	stripewebhook "github.com/stripe/stripe-go/v85/webhook"
)

func signedAt(t *testing.T, rcv servertest.Received) int64 {
	t.Helper()
	ts, _, _ := strings.Cut(strings.TrimPrefix(rcv.Header.Get(webhook.HeaderSignature), "t="), ",")
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		t.Fatalf("signature header %q: %v", rcv.Header.Get(webhook.HeaderSignature), err)
	}
	return n
}

func TestLoopLifecycle(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)

	created := e.Do("POST", "/v1/loops", map[string]any{"name": "CRM Sync (prod)", "webhook_url": rcv.Srv.URL + "/hook"})
	is.Equal(created.Status, http.StatusCreated)
	id := created.Str("data.id")
	is.Equal(created.Str("data.name"), "CRM Sync (prod)")
	is.Equal(created.Str("data.slug"), "crm-sync-prod")
	is.Equal(created.Str("data.object_type"), "company") // the default
	is.Equal(created.Str("data.operation"), "enrich")
	is.Equal(created.Get("data.enabled"), true)
	is.Equal(created.Str("data.destination.kind"), "webhook")
	is.Equal(created.Str("data.destination.url"), rcv.Srv.URL+"/hook")
	is.Equal(created.Get("data.destination.enabled"), true)
	secret := created.Str("data.destination.secret")
	is.True(strings.HasPrefix(secret, "whsec_"))
	is.True(len(secret) >= len("whsec_")+43) // 32 random bytes
	is.True(created.Str("data.created_at") != "" && created.Str("data.updated_at") != "")

	// The secret is shown once.
	got := e.Do("GET", "/v1/loops/"+id, nil)
	is.Equal(got.Status, 200)
	is.Equal(got.Str("data.id"), id)
	is.True(got.Has("data.destination.url") && !got.Has("data.destination.secret"))
	list := e.Do("GET", "/v1/loops", nil)
	is.Equal(list.Status, 200)
	is.Equal(len(list.Get("data").([]any)), 1)
	is.True(!strings.Contains(string(list.Raw), secret))

	// Slugs stay unique in the organization.
	second := e.Do("POST", "/v1/loops", map[string]any{"name": "CRM sync, prod!", "webhook_url": rcv.Srv.URL, "object_type": "person", "enabled": false})
	is.Equal(second.Status, http.StatusCreated)
	is.Equal(second.Str("data.slug"), "crm-sync-prod-2")
	is.Equal(second.Str("data.object_type"), "person")
	is.Equal(second.Get("data.enabled"), false)
	is.True(second.Str("data.destination.secret") != secret)

	patched := e.Do("PATCH", "/v1/loops/"+id, map[string]any{"name": "Warehouse", "enabled": false, "webhook_url": rcv.Srv.URL + "/v2"})
	is.Equal(patched.Status, 200)
	is.Equal(patched.Str("data.name"), "Warehouse")
	is.Equal(patched.Str("data.slug"), "warehouse")
	is.Equal(patched.Get("data.enabled"), false)
	is.Equal(patched.Str("data.destination.url"), rcv.Srv.URL+"/v2")
	is.True(!patched.Has("data.destination.secret"))
	is.Equal(e.Do("GET", "/v1/loops/"+id, nil).Get("data.enabled"), false)

	noType := e.Do("PATCH", "/v1/loops/"+id, map[string]any{"object_type": "person"})
	is.Equal(noType.Status, http.StatusBadRequest)
	is.True(strings.Contains(noType.Str("error"), "object_type cannot change"))

	// Another organization sees none of it.
	otherKey, _ := e.NewOrg("other", 10)
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
		r := e.Do(req.method, req.path, req.body, as...)
		is.Equal(r.Status, http.StatusNotFound)
		is.Equal(r.Str("code"), "not_found")
		is.Equal(r.Str("error"), "loop not found")
	}
	is.Equal(len(e.Do("GET", "/v1/loops", nil, as...).Get("data").([]any)), 0)
	is.Equal(e.Do("GET", "/v1/loops/"+id, nil).Get("data.enabled"), false) // untouched

	deleted := e.Do("DELETE", "/v1/loops/"+id, nil)
	is.Equal(deleted.Status, http.StatusNoContent)
	is.Equal(len(deleted.Raw), 0)
	is.Equal(e.Do("GET", "/v1/loops/"+id, nil).Status, http.StatusNotFound)
	is.Equal(e.Do("DELETE", "/v1/loops/"+id, nil).Status, http.StatusNotFound)
	is.Equal(e.Do("GET", "/v1/loops/not-a-uuid", nil).Status, http.StatusNotFound)
}

func TestLoopCreateAndPatchRefuseBadInput(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	id, _ := e.CreateLoop("Existing", rcv.Srv.URL, "company")
	long := strings.Repeat("n", 201)
	for _, c := range []struct {
		name, method, path string
		body               any
		want               string
	}{
		{"no name", "POST", "/v1/loops", map[string]any{"webhook_url": rcv.Srv.URL}, "name is required"},
		{"blank name", "POST", "/v1/loops", map[string]any{"name": "  ", "webhook_url": rcv.Srv.URL}, "name must be"},
		{"long name", "POST", "/v1/loops", map[string]any{"name": long, "webhook_url": rcv.Srv.URL}, "name must be"},
		{"control character in name", "POST", "/v1/loops", map[string]any{"name": "crm\x00sync", "webhook_url": rcv.Srv.URL}, "holds a control character"},
		{"control character in a new name", "PATCH", "/v1/loops/" + id, map[string]any{"name": "crm\nsync"}, "holds a control character"},
		{"no URL", "POST", "/v1/loops", map[string]any{"name": "x"}, "webhook_url is required"},
		{"not a URL", "POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": "hooks"}, "webhook_url"},
		{"ftp URL", "POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": "ftp://example.com/"}, "https"},
		{"bad object type", "POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": rcv.Srv.URL, "object_type": "job"}, "object_type must be company or person"},
		{"enabled not a boolean", "POST", "/v1/loops", `{"name":"x","webhook_url":"` + rcv.Srv.URL + `","enabled":"yes"}`, "enabled must be a boolean"},
		{"unknown field", "POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": rcv.Srv.URL, "secret": "mine"}, `unknown field "secret"`},
		{"patch blank name", "PATCH", "/v1/loops/" + id, map[string]any{"name": ""}, "name must be"},
		{"patch bad URL", "PATCH", "/v1/loops/" + id, map[string]any{"webhook_url": "ftp://example.com/"}, "https"},
		{"patch unknown field", "PATCH", "/v1/loops/" + id, map[string]any{"slug": "mine"}, `unknown field "slug"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			r := e.Do(c.method, c.path, c.body)
			is.Equal(r.Status, http.StatusBadRequest)
			is.True(strings.Contains(r.Str("error"), c.want))
		})
	}
	is := is.New(t)
	list := e.Do("GET", "/v1/loops", nil)
	is.Equal(len(list.Get("data").([]any)), 1) // nothing created
	got := e.Do("GET", "/v1/loops/"+id, nil)
	is.Equal(got.Str("data.name"), "Existing") // nothing changed
	is.Equal(got.Str("data.destination.url"), rcv.Srv.URL)
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
	t.Parallel()
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
	e := servertest.NewEnv(t, func(cfg *server.Config) { cfg.WebhookPolicy = netguard.Policy{Resolver: dns} })
	id, _ := e.CreateLoop("Public", "https://hooks.example.com/in", "company")

	for name, addr := range targets {
		literal := addr
		if strings.Contains(addr, ":") {
			literal = "[" + addr + "]"
		}
		for _, url := range []string{"https://" + literal + "/hook", "https://" + strings.ReplaceAll(name, " ", "-") + ".rebind.example/hook"} {
			t.Run(name+" "+url, func(t *testing.T) {
				is := is.New(t)
				r := e.Do("POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": url})
				is.Equal(r.Status, http.StatusBadRequest)
				is.True(strings.Contains(r.Str("error"), "not publicly reachable"))
				r = e.Do("PATCH", "/v1/loops/"+id, map[string]any{"webhook_url": url})
				is.Equal(r.Status, http.StatusBadRequest)
			})
		}
	}
	is := is.New(t)
	// Plain http and a private address are refused with the way to allow them for
	// local testing; a host that does not resolve has no such remedy.
	const allowHint = " (to allow plain http and private addresses for local testing only, " +
		"the server's operator starts it with `enrichd serve --allow-private-webhooks`)"
	plain := e.Do("POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": "http://hooks.example.com/in"})
	is.Equal(plain.Status, http.StatusBadRequest)
	is.Equal(plain.Str("error"), "webhook_url: the URL must use https, not http"+allowHint)
	plain = e.Do("PATCH", "/v1/loops/"+id, map[string]any{"webhook_url": "http://hooks.example.com/in"})
	is.Equal(plain.Status, http.StatusBadRequest)
	is.Equal(plain.Str("error"), "webhook_url: the URL must use https, not http"+allowHint)
	private := e.Do("POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": "https://127.0.0.1/in"})
	is.Equal(private.Status, http.StatusBadRequest)
	is.True(strings.HasSuffix(private.Str("error"), allowHint))
	is.Equal(e.Do("POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": "ftp://hooks.example.com/in"}).Str("error"),
		`webhook_url: the URL must use https, not "ftp"`)
	unresolvable := e.Do("POST", "/v1/loops", map[string]any{"name": "x", "webhook_url": "https://nowhere.example/in"})
	is.Equal(unresolvable.Status, http.StatusBadRequest)
	is.True(strings.Contains(unresolvable.Str("error"), "does not resolve"))
	is.True(!strings.Contains(unresolvable.Str("error"), "allow-private-webhooks"))
	is.Equal(len(e.Do("GET", "/v1/loops", nil).Get("data").([]any)), 1)
	is.Equal(e.Do("GET", "/v1/loops/"+id, nil).Str("data.destination.url"), "https://hooks.example.com/in")
}

func TestDeliveryIsRefusedAtConnectionToANonPublicAddress(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	// The URL was accepted once (as if DNS then pointed to a public address); at
	// delivery time it leads to loopback, and the dial is refused.
	var hits atomic.Int64
	tlsReceiver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer tlsReceiver.Close()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	id, _ := e.CreateLoop("Rebound", tlsReceiver.URL, "company")
	e.StopWorkers()
	e.Cfg.WebhookPolicy = netguard.Policy{}
	e.Restart()
	e.StartWorkers()

	is.Equal(e.Do("POST", "/v1/loops/"+id+"/test", nil).Status, http.StatusAccepted)
	d := e.WaitDelivery(id, servertest.Attempts(1))
	is.Equal(d["status"], "pending") // to be retried on schedule
	is.True(strings.Contains(d["last_error"].(string), "not publicly reachable"))
	is.Equal(d["last_status_code"], nil)
	is.Equal(hits.Load(), int64(0))
}

func TestAPlainHTTPWebhookIsNotSentByAServerThatRequiresHTTPS(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	// Accepted under the development setting, then served without it.
	rcv := servertest.NewReceiver(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	id, _ := e.CreateLoop("Plain", rcv.Srv.URL, "company")
	e.StopWorkers()
	e.Cfg.WebhookPolicy = netguard.Policy{}
	e.Restart()
	e.StartWorkers()

	is.Equal(e.Do("POST", "/v1/loops/"+id+"/test", nil).Status, http.StatusAccepted)
	d := e.WaitDelivery(id, servertest.Attempts(1))
	is.True(strings.Contains(d["last_error"].(string), "does not use https"))
	is.Equal(rcv.Count(), 0)
}

func TestRenamingALoopKeepsItsSlugWhenTheNameFoldsToIt(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	id, _ := e.CreateLoop("CRM Hooks", rcv.Srv.URL, "company")
	r := e.Do("PATCH", "/v1/loops/"+id, map[string]any{"name": "crm hooks"})
	is.Equal(r.Status, 200)
	is.Equal(r.Str("data.slug"), "crm-hooks")
	// Sending object_type unchanged is not a change.
	is.Equal(e.Do("PATCH", "/v1/loops/"+id, map[string]any{"object_type": "company"}).Status, 200)
}

// TestDeliveriesGoOutOldestFirstAcrossLoops: when the sender is full, the slot that
// frees goes to the oldest due delivery, whichever Loop it is for, skipping only a
// Loop already at its share. The receivers hold every request until the test answers
// it, so exactly one slot frees at a time and every claim is checked against the
// oldest due delivery at that moment. (Comparing arrival order across receivers, as
// this test once did, measured how fast the scheduler ran one in-flight request
// against another, not which delivery the sender chose.)
func TestDeliveriesGoOutOldestFirstAcrossLoops(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, func(cfg *server.Config) { cfg.DeliveryConcurrency, cfg.DeliveryPerLoop = 2, 1 })
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
	a, _ := e.CreateLoop("A", receiver("A"), "company")
	b, _ := e.CreateLoop("B", receiver("B"), "company")
	c, _ := e.CreateLoop("C", receiver("C"), "company")
	t.Cleanup(func() { close(stop) }) // runs before the receivers close: nothing is left hanging

	var due []delivery // oldest first
	age := map[string]int{}
	queue := func(name, loopID string) {
		r := e.Do("POST", "/v1/loops/"+loopID+"/test", nil)
		if r.Status != http.StatusAccepted {
			t.Fatalf("test delivery to %s: %d %s", name, r.Status, r.Raw)
		}
		d := delivery{name, r.Str("delivery.id")}
		age[d.id] = len(due)
		due = append(due, d)
		e.Clock.Add(time.Millisecond) // each due at its own time, so "oldest" has one answer
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

	e.StartWorkers()
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
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	arrived, release := make(chan struct{}, 2), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	defer close(release)
	id, _ := e.CreateLoop("Slow", srv.URL, "company")
	e.StartWorkers()
	e.Do("POST", "/v1/loops/"+id+"/test", nil)
	<-arrived
	e.Clock.Add(9 * time.Second) // the receiver takes 9 s to answer 500
	failedAt := e.Clock.Now()
	release <- struct{}{}
	d := e.WaitDelivery(id, servertest.Attempts(1))
	next, err := time.Parse(time.RFC3339Nano, d["next_attempt_at"].(string))
	is.NoErr(err)
	is.Equal(next.UnixMilli(), failedAt.Add(10*time.Second).UnixMilli())
}

func TestRunDeliversASignedEventOnce(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	rcv := servertest.NewReceiver(t)
	loopID, secret := e.CreateLoop("Companies", rcv.Srv.URL+"/hook", "company")
	e.StartWorkers()

	r := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "acme.com"})
	is.Equal(r.Status, http.StatusAccepted)
	is.Equal(r.Str("task.loop_id"), loopID)
	is.Equal(r.Get("task.credits_charged"), 1.0) // the same as the direct call
	is.Equal(r.Get("task.input"), map[string]any{"domain": "acme.com"})
	task := e.WaitSettled(r.Str("task.id"))
	is.Equal(task.Str("task.status"), "succeeded")

	got := rcv.Wait(t, 1)[0]
	is.Equal(got.Header.Get("Content-Type"), "application/json")
	is.Equal(got.Header.Get("User-Agent"), "Service-Webhook/1")
	is.Equal(got.Header.Get("X-Service-Event"), "task.succeeded")
	deliveryID := got.Header.Get("X-Service-Delivery-Id")
	is.True(deliveryID != "")
	sig := got.Header.Get("X-Service-Signature")
	is.NoErr(webhook.Verify(got.Body, sig, secret, 0))
	is.NoErr(stripewebhook.ValidatePayloadWithTolerance(got.Body, sig, secret, 300*time.Second))
	is.True(webhook.Verify(got.Body, sig, "whsec_wrong", 0) != nil)

	var body map[string]any
	is.NoErr(json.Unmarshal(got.Body, &body))
	is.Equal(body["event"], "task.succeeded")
	is.Equal(body["error"], nil)
	is.True(body["data"] != nil)
	is.Equal(body["data"].(map[string]any)["name"], "Acme")
	sent := body["task"].(map[string]any)
	is.Equal(sent["id"], r.Str("task.id"))
	is.Equal(sent["status"], "succeeded")
	is.Equal(sent["object_type"], "company")
	is.Equal(sent["target"], "acme.com")
	is.Equal(sent["loop_id"], loopID)

	d := e.WaitDelivery(loopID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	is.Equal(d["id"], deliveryID)
	is.Equal(d["event"], "task.succeeded")
	is.Equal(d["task_id"], r.Str("task.id"))
	is.Equal(d["attempts"], 1.0)
	is.Equal(d["last_status_code"], 200.0)
	is.Equal(d["last_error"], nil)
	is.Equal(d["next_attempt_at"], nil)
	is.Equal(rcv.Count(), 1) // once
}

func TestDirectCallsDeliverToTheLoopTheyName(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	rcv := servertest.NewReceiver(t)
	loopID, secret := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	e.StartWorkers()

	// A miss: task.failed, data null, the error as polling shows it; refunded.
	miss := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "nowhere.com", "loop_id": loopID})
	is.Equal(miss.Status, http.StatusAccepted)
	is.Equal(e.WaitSettled(miss.Str("task.id")).Str("task.status"), "failed")
	failed := rcv.Wait(t, 1)[0]
	is.Equal(failed.Header.Get("X-Service-Event"), "task.failed")
	is.NoErr(webhook.Verify(failed.Body, failed.Header.Get("X-Service-Signature"), secret, 0))
	var body map[string]any
	is.NoErr(json.Unmarshal(failed.Body, &body))
	is.Equal(body["event"], "task.failed")
	is.Equal(body["data"], nil)
	is.Equal(body["error"].(map[string]any)["code"], "not_found")
	is.Equal(body["task"].(map[string]any)["status"], "failed")

	// Fetched, then served from the store inside the request: both deliver.
	first := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": loopID})
	e.WaitSettled(first.Str("task.id"))
	hit := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": loopID})
	is.Equal(hit.Status, http.StatusOK)
	is.Equal(hit.Str("task.status"), "succeeded")
	got := rcv.Wait(t, 3)
	var taskIDs []string
	for _, g := range got[1:] {
		is.Equal(g.Header.Get("X-Service-Event"), "task.succeeded")
		var b map[string]any
		is.NoErr(json.Unmarshal(g.Body, &b))
		taskIDs = append(taskIDs, b["task"].(map[string]any)["id"].(string))
	}
	is.True(strings.Contains(strings.Join(taskIDs, " "), hit.Str("task.id")))

	// An idempotent replay sends nothing new.
	key := []string{"Idempotency-Key", "k1"}
	once := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": loopID}, key...)
	is.Equal(once.Status, http.StatusOK)
	rcv.Wait(t, 4)
	replay := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": loopID}, key...)
	is.Equal(replay.Str("task.id"), once.Str("task.id"))
	list := e.Do("GET", "/v1/loops/"+loopID+"/deliveries", nil)
	is.Equal(list.Get("total"), 4.0)

	// A task without a Loop sends nothing.
	plain := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"})
	is.Equal(plain.Status, http.StatusOK)
	is.Equal(e.Do("GET", "/v1/loops/"+loopID+"/deliveries", nil).Get("total"), 4.0)
	is.Equal(e.Balance("acme").Charged-e.Balance("acme").Refund, int64(4))
}

func TestRunRefusesWhatTheLoopDoesNotTake(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	companies, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	people, _ := e.CreateLoop("People", rcv.Srv.URL, "person")
	disabled, _ := e.CreateLoop("Paused", rcv.Srv.URL, "company")
	if r := e.Do("PATCH", "/v1/loops/"+disabled, map[string]any{"enabled": false}); r.Status != 200 {
		t.Fatal(r.Status)
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
			r := e.Do("POST", "/v1/loops/"+c.loop+"/run", c.body)
			is.Equal(r.Status, c.status)
			is.Equal(r.Str("code"), c.code)
			is.True(strings.Contains(r.Str("error"), c.want))
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
			r := e.Do("POST", c.path, c.body)
			is.Equal(r.Status, c.status)
			is.True(strings.Contains(r.Str("error"), c.want))
		})
	}
	is := is.New(t)
	is.Equal(e.Balance("acme").Charged, int64(0)) // nothing charged
	is.Equal(e.Do("GET", "/v1/tasks", nil).Get("total"), 0.0)
}

func TestDisabledLoopStillDeliversTasksInFlight(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")

	queued := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "acme.com"})
	is.Equal(queued.Status, http.StatusAccepted)
	is.Equal(e.Do("PATCH", "/v1/loops/"+loopID, map[string]any{"enabled": false}).Status, 200)
	is.Equal(e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "acme.com"}).Status, http.StatusConflict)

	e.StartWorkers()
	e.WaitSettled(queued.Str("task.id"))
	got := rcv.Wait(t, 1)[0]
	is.True(strings.Contains(string(got.Body), queued.Str("task.id")))
}

func TestDeliveryRetriesOnScheduleWithTheSameID(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t, 500, 503)
	loopID, secret := e.CreateLoop("Flaky", rcv.Srv.URL, "company")
	e.StartWorkers()
	start := e.Clock.Now().Unix()

	is.Equal(e.Do("POST", "/v1/loops/"+loopID+"/test", nil).Status, http.StatusAccepted)
	d := e.WaitDelivery(loopID, servertest.Attempts(1))
	is.Equal(d["status"], "pending")
	is.Equal(d["last_status_code"], 500.0)
	is.True(strings.Contains(d["last_error"].(string), "500"))
	next, err := time.Parse(time.RFC3339Nano, d["next_attempt_at"].(string))
	is.NoErr(err)
	is.Equal(next.Unix(), start+10) // 10 seconds after the first attempt
	is.Equal(rcv.Count(), 1)        // not due yet on the store's clock

	e.Clock.Add(10 * time.Second)
	d = e.WaitDelivery(loopID, servertest.Attempts(2))
	is.Equal(d["last_status_code"], 503.0)
	next, _ = time.Parse(time.RFC3339Nano, d["next_attempt_at"].(string))
	is.Equal(next.Unix(), start+10+60) // a minute after the second
	is.Equal(rcv.Count(), 2)

	e.Clock.Add(time.Minute)
	d = e.WaitDelivery(loopID, servertest.Attempts(3))
	is.Equal(d["status"], "succeeded")
	is.Equal(d["last_status_code"], 200.0)
	is.Equal(d["last_error"], nil)

	got := rcv.Wait(t, 3)
	is.Equal(rcv.Count(), 3)
	for i, want := range []int64{start, start + 10, start + 70} {
		is.Equal(signedAt(t, got[i]), want) // each attempt signed when it was sent
		is.Equal(got[i].Header.Get("X-Service-Delivery-Id"), d["id"])
		is.Equal(string(got[i].Body), string(got[0].Body)) // the same bytes every time
	}
	is.NoErr(webhook.Verify(got[0].Body, got[0].Header.Get("X-Service-Signature"), secret, 0))
	var body map[string]any
	is.NoErr(json.Unmarshal(got[0].Body, &body))
	is.Equal(body, map[string]any{"event": "test", "task": nil, "data": nil, "error": nil})
	is.Equal(got[0].Header.Get("X-Service-Event"), "test")
}

func TestDeliveryScheduleSurvivesARestart(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t, 500)
	loopID, _ := e.CreateLoop("Flaky", rcv.Srv.URL, "company")
	e.StartWorkers()
	start := e.Clock.Now().Unix()
	is.Equal(e.Do("POST", "/v1/loops/"+loopID+"/test", nil).Status, http.StatusAccepted)
	first := e.WaitDelivery(loopID, servertest.Attempts(1))

	e.Restart()
	e.StartWorkers()
	// Not due yet: the restart did not reset the schedule to "immediately".
	d := e.WaitDelivery(loopID, servertest.Attempts(1))
	is.Equal(d["next_attempt_at"], first["next_attempt_at"])
	is.Equal(rcv.Count(), 1)

	e.Clock.Add(10 * time.Second)
	d = e.WaitDelivery(loopID, servertest.Attempts(2))
	is.Equal(d["status"], "succeeded")
	got := rcv.Wait(t, 2)
	is.Equal(signedAt(t, got[1]), start+10)
	is.Equal(got[1].Header.Get("X-Service-Delivery-Id"), first["id"])
}

func TestDeliveryFailsAfterTheLastAttemptAndCanBeRetried(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t, 500, 500, 500, 500, 500, 500, 500)
	loopID, _ := e.CreateLoop("Down", rcv.Srv.URL, "company")
	created := e.Do("POST", "/v1/loops/"+loopID+"/test", nil)
	is.Equal(created.Status, http.StatusAccepted)
	is.Equal(created.Str("delivery.status"), "pending")
	is.Equal(created.Str("delivery.event"), "test")
	id := created.Str("delivery.id")

	// A pending delivery already due (or being sent) is left to that attempt: one
	// attempt, not two. The sender starts after the retry: started before, it could
	// make the first attempt before the retry is read, and the retry would then find a
	// delivery waiting for its next attempt and send it again at once (below).
	retryDue := e.Do("POST", "/v1/deliveries/"+id+"/retry", nil)
	is.Equal(retryDue.Status, http.StatusAccepted)
	is.Equal(retryDue.Str("delivery.status"), "pending")
	e.StartWorkers()
	e.WaitDelivery(loopID, servertest.Attempts(1))
	is.Equal(rcv.Count(), 1)

	// A pending delivery waiting for its next attempt (10 s away, and the clock stands
	// still) is sent now, with the same id, and the schedule goes on from there.
	retryPending := e.Do("POST", "/v1/deliveries/"+id+"/retry", nil)
	is.Equal(retryPending.Status, http.StatusAccepted)
	is.Equal(retryPending.Str("delivery.id"), id)
	is.Equal(retryPending.Str("delivery.status"), "pending")
	is.Equal(retryPending.Str("delivery.next_attempt_at"), e.Clock.Now().Truncate(time.Millisecond).Format(time.RFC3339Nano))
	for i, wait := range []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour} {
		e.WaitDelivery(loopID, servertest.Attempts(i+2))
		e.Clock.Add(wait)
	}
	d := e.WaitDelivery(loopID, servertest.Attempts(7))
	is.Equal(d["status"], "failed")
	is.Equal(d["next_attempt_at"], nil)
	is.Equal(rcv.Count(), 7)
	e.Clock.Add(24 * time.Hour)
	is.Equal(e.WaitDelivery(loopID, servertest.Attempts(7))["status"], "failed") // no eighth by itself

	otherKey, _ := e.NewOrg("other", 10)
	foreign := e.Do("POST", "/v1/deliveries/"+id+"/retry", nil, "Authorization", "Bearer "+otherKey)
	is.Equal(foreign.Status, http.StatusNotFound)
	is.Equal(foreign.Str("error"), "delivery not found")

	retried := e.Do("POST", "/v1/deliveries/"+id+"/retry", nil)
	is.Equal(retried.Status, http.StatusAccepted)
	is.Equal(retried.Str("delivery.id"), id)
	is.Equal(retried.Str("delivery.status"), "pending")
	d = e.WaitDelivery(loopID, servertest.Attempts(8))
	is.Equal(d["status"], "succeeded")
	got := rcv.Wait(t, 8)
	for _, g := range got {
		is.Equal(g.Header.Get("X-Service-Delivery-Id"), id)
	}
	delivered := e.Do("POST", "/v1/deliveries/"+id+"/retry", nil)
	is.Equal(delivered.Status, http.StatusConflict)
	is.Equal(delivered.Str("code"), "delivery_not_failed")
	is.Equal(delivered.Str("error"), "the delivery already succeeded (its receiver acknowledged it); there is nothing to retry")
	is.Equal(rcv.Count(), 8)
}

func TestSlowReceiverDoesNotHoldBackOthers(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, func(cfg *server.Config) {
		cfg.DeliveryConcurrency, cfg.DeliveryPerLoop = 4, 2
	})
	slow, fast := servertest.NewReceiver(t), servertest.NewReceiver(t)
	slow.Hold()
	slowLoop, _ := e.CreateLoop("Slow", slow.Srv.URL, "company")
	fastLoop, _ := e.CreateLoop("Fast", fast.Srv.URL, "company")
	e.StartWorkers()
	for range 6 {
		is.Equal(e.Do("POST", "/v1/loops/"+slowLoop+"/test", nil).Status, http.StatusAccepted)
	}
	is.Equal(e.Do("POST", "/v1/loops/"+fastLoop+"/test", nil).Status, http.StatusAccepted)

	fast.Wait(t, 1) // arrives while the slow receiver holds every request it got
	is.Equal(slow.Count(), 0)
	slow.Release()
	slow.Wait(t, 6)
}

func TestDeletingALoopDropsItsPendingDeliveries(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	rcv := servertest.NewReceiver(t, 500)
	loopID, _ := e.CreateLoop("Gone", rcv.Srv.URL, "company")
	e.StartWorkers()
	run := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"domain": "acme.com"})
	e.WaitSettled(run.Str("task.id"))
	d := e.WaitDelivery(loopID, servertest.Attempts(1))
	is.Equal(d["status"], "pending")

	is.Equal(e.Do("DELETE", "/v1/loops/"+loopID, nil).Status, http.StatusNoContent)
	e.Clock.Add(time.Hour)
	is.Equal(e.Do("POST", "/v1/deliveries/"+d["id"].(string)+"/retry", nil).Status, http.StatusNotFound)
	task := e.Do("GET", "/v1/tasks/"+run.Str("task.id"), nil)
	is.Equal(task.Str("task.loop_id"), loopID) // tasks keep their loop_id
	// Nothing further is sent: a new Loop's test event goes out alone.
	other := servertest.NewReceiver(t)
	otherLoop, _ := e.CreateLoop("Next", other.Srv.URL, "company")
	e.Do("POST", "/v1/loops/"+otherLoop+"/test", nil)
	other.Wait(t, 1)
	is.Equal(rcv.Count(), 1)
}

func TestDeliveriesListPages(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("Paged", rcv.Srv.URL, "company")
	var ids []string
	for range 3 {
		ids = append(ids, e.Do("POST", "/v1/loops/"+loopID+"/test", nil).Str("delivery.id"))
		e.Clock.Add(time.Millisecond)
	}
	page := e.Do("GET", "/v1/loops/"+loopID+"/deliveries?pageSize=2", nil)
	is.Equal(page.Status, 200)
	is.Equal(page.Get("total"), 3.0)
	data := page.Get("data").([]any)
	is.Equal(len(data), 2)
	is.Equal(data[0].(map[string]any)["id"], ids[2]) // newest first
	next := e.Do("GET", "/v1/loops/"+loopID+"/deliveries?page=1&pageSize=2", nil)
	is.Equal(next.Get("data").([]any)[0].(map[string]any)["id"], ids[0])
	bad := e.Do("GET", "/v1/loops/"+loopID+"/deliveries?pageSize=101", nil)
	is.Equal(bad.Status, http.StatusBadRequest)
	is.True(strings.Contains(bad.Str("error"), "pageSize"))
}

func TestAReceiverThatDoesNotAnswerInTimeFailsTheAttempt(t *testing.T) {
	// Not in parallel: what it checks is bounded in time, which other tests running
	// at once would stretch.
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, func(cfg *server.Config) { cfg.DeliveryTimeout = time.Second })
	rcv := servertest.NewReceiver(t)
	rcv.Hold() // answers only when released: never, within the attempt
	loopID, _ := e.CreateLoop("Stuck", rcv.Srv.URL, "company")
	e.StartWorkers()
	is.Equal(e.Do("POST", "/v1/loops/"+loopID+"/test", nil).Status, http.StatusAccepted)
	d := e.WaitDelivery(loopID, servertest.Attempts(1))
	is.Equal(d["status"], "pending")
	is.Equal(d["last_status_code"], nil)
	is.True(strings.Contains(d["last_error"].(string), "no response within 1s"))

	// Once the receiver answers, the next attempt succeeds; on a machine too busy for
	// the receiver to answer within the second, one of those after it.
	rcv.Release()
	for i, wait := range []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute} {
		e.Clock.Add(wait)
		if d = e.WaitDelivery(loopID, servertest.Attempts(i+2)); d["status"] == "succeeded" {
			break
		}
	}
	is.Equal(d["status"], "succeeded")
}

func TestAPersonLoopRunsEmailLookups(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	servertest.AcmeNetwork(e)
	rcv := servertest.NewReceiver(t)
	loopID, secret := e.CreateLoop("People", rcv.Srv.URL, "person")
	e.StartWorkers()

	// A refused address fails inside the request, refunded, and still tells the Loop.
	refused := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"email": "info@acme.com"})
	is.Equal(refused.Status, http.StatusOK)
	is.Equal(refused.Str("task.status"), "failed")
	is.Equal(refused.Str("error.code"), "not_found")
	first := rcv.Wait(t, 1)[0]
	is.Equal(first.Header.Get("X-Service-Event"), "task.failed")

	// A resolved address costs 3 credits, as on the direct endpoint, and delivers the person.
	run := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"email": "jane.smith@acme.com"})
	is.Equal(run.Status, http.StatusAccepted)
	is.Equal(run.Get("task.credits_charged"), 3.0)
	is.Equal(e.WaitSettled(run.Str("task.id")).Str("task.status"), "succeeded")
	got := rcv.Wait(t, 2)[1]
	is.Equal(got.Header.Get("X-Service-Event"), "task.succeeded")
	is.NoErr(webhook.Verify(got.Body, got.Header.Get("X-Service-Signature"), secret, 0))
	var body map[string]any
	is.NoErr(json.Unmarshal(got.Body, &body))
	data := body["data"].(map[string]any)
	is.Equal(data["full_name"], "Jane Smith")
	is.Equal(data["email_match"].(map[string]any)["method"], "resolved")
	is.Equal(e.Balance("acme").Charged-e.Balance("acme").Refund, int64(3))
}

func TestAnIdempotencyKeyReusedOnAnotherLoopSaysSo(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	first, _ := e.CreateLoop("first", "https://127.0.0.1:9/hook", "company")
	second, _ := e.CreateLoop("second", "https://127.0.0.1:9/hook", "company")
	is.Equal(e.Do("POST", "/v1/loops/"+first+"/run", map[string]string{"domain": "acme.com"}, "Idempotency-Key", "k1").Status, http.StatusAccepted)
	is.Equal(e.Do("POST", "/v1/loops/"+first+"/run", map[string]string{"domain": "acme.com"}, "Idempotency-Key", "k1").Status, http.StatusOK)

	r := e.Do("POST", "/v1/loops/"+second+"/run", map[string]string{"domain": "acme.com"}, "Idempotency-Key", "k1")
	is.Equal(r.Status, http.StatusUnprocessableEntity)
	is.Equal(r.Str("code"), "idempotency_key_reused")
	is.Equal(r.Str("error"), "this Idempotency-Key was first used on POST /v1/loops/"+first+"/run, not on POST /v1/loops/"+second+"/run; "+
		"a key names one request: send a new key for this one")
	// The direct endpoint naming the same Loop is another endpoint as well.
	r = e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com", "loop_id": first}, "Idempotency-Key", "k1")
	is.Equal(r.Status, http.StatusUnprocessableEntity)
	is.True(strings.Contains(r.Str("error"), "first used on POST /v1/loops/"+first+"/run, not on POST /v1/companies/enrich"))
	is.Equal(e.Balance("acme").Charged, int64(1))
	is.Equal(e.Do("GET", "/v1/tasks", nil).Get("total"), 1.0)
}
