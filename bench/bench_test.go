package bench

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"enrichd/store"

	"github.com/matryer/is"
)

func testOptions(t *testing.T) Options {
	t.Helper()
	raw, err := os.ReadFile("../schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	return Options{Schema: string(raw), Duration: 400 * time.Millisecond, Concurrency: 4, Workers: 2, GrowthTasks: 2000}
}

func TestMixWeightsMakeAHundred(t *testing.T) {
	sum := 0
	for _, k := range mixKinds {
		sum += k.weight
	}
	is.New(t).Equal(sum, 100) // the draw in mix.call picks from 0 to 99
}

// TestMixed runs the mixed scenario briefly: a row for the whole, one per type of call,
// each compared with its ceiling, then the storage row, and nothing answered otherwise
// than expected.
func TestMixed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and loads it")
	}
	is := is.New(t)
	opt := testOptions(t)
	rep, err := Run(context.Background(), Options{Schema: opt.Schema, Duration: opt.Duration, Concurrency: opt.Concurrency,
		Workers: opt.Workers, Scenarios: []string{"mixed"}})
	is.NoErr(err)
	var names []string
	for _, r := range rep.Results {
		names = append(names, r.Scenario)
		is.True(r.Count > 0) // measured something
		is.True(r.Rate > 0)
		is.Equal(r.Errors, int64(0)) // every call got the answer it expects
	}
	is.Equal(names, []string{"mixed", "mixed/read", "mixed/list", "mixed/hit", "mixed/miss", "mixed/email", "mixed/loop", "mixed/replay", "storage"})
	whole := rep.Results[0]
	var sum, made int64
	for i, r := range rep.Results[1:8] {
		sum += r.Count
		if i != mixRead && i != mixList && i != mixReplay {
			made += r.Count
		}
		is.True(r.P99ms >= r.P50ms)
		want := "reads/s"
		if mixKinds[i].post {
			want = "tx/s"
		}
		is.Equal(r.CeilingUnit, want) // POSTs beside the write ceiling, GETs beside the read ceiling
		is.True(r.Ceiling > 0 && r.Ratio > 0)
	}
	is.Equal(whole.Count, sum)
	is.Equal(whole.Ceiling, 0.0)

	st := rep.Results[8]
	is.Equal(st.Unit, "B/task")
	is.True(st.Storage != nil)
	is.Equal(st.Count, st.Storage.Tasks)
	is.Equal(st.Storage.Tasks, 256+128+made) // the warm-up's, the replayed requests', and those the load made
	is.Equal(st.Rate, float64(st.Storage.Bytes)/float64(st.Storage.Tasks))
	var tasks *StorageObject
	for i, o := range st.Storage.Objects {
		if o.Name == "tasks" {
			tasks = &st.Storage.Objects[i]
		}
	}
	is.True(tasks != nil && tasks.Bytes > 0 && tasks.BytesPerTask < st.Rate)
	is.True(strings.Contains(st.Note, "tasks "))

	var table strings.Builder
	is.NoErr(rep.WriteTable(&table))
	for _, want := range []string{"mixed/replay", "B/task", "storage: the whole file"} {
		is.True(strings.Contains(table.String(), want))
	}
}

// TestMixResolvesWhatItAsks: the email addresses the mix sends are resolved by the sim
// source and every miss is found, so the workers do the work of real lookups, not of
// failures; a replay is answered as one.
func TestMixResolvesWhatItAsks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and loads it")
	}
	is := is.New(t)
	ctx := context.Background()
	opt := testOptions(t)
	rc, err := startReceiver()
	is.NoErr(err)
	defer rc.close()
	e, key, orgID, err := startEnv(ctx, opt)
	is.NoErr(err)
	defer e.close()
	loop, err := e.db.CreateLoop(ctx, store.NewLoop{OrgID: orgID, Name: "bench", ObjectType: "company", WebhookURL: rc.url, Enabled: true})
	is.NoErr(err)
	m, err := setUpMix(ctx, e, key, loop.ID, 2)
	is.NoErr(err)
	for c := range 2 {
		for i := range 60 {
			kind, ok := m.call(ctx, c, i)
			if !ok {
				t.Fatalf("client %d call %d (%s) did not get the answer expected", c, i, mixKinds[kind].name)
			}
		}
	}
	for range 3 { // a few more addresses than the calls above drew
		a, err := e.do(ctx, key, "POST", "/v1/people/enrich", `{"email":"`+m.nextEmail()+`"}`, "")
		is.NoErr(err)
		is.Equal(a.status, 202)
	}
	is.NoErr(e.settled(ctx, orgID))
	failed, err := e.db.CountTasks(ctx, orgID, store.StatusFailed)
	is.NoErr(err)
	is.Equal(failed, int64(0))
	deadline := time.Now().Add(time.Minute)
	for rc.received.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	is.True(rc.received.Load() > 0) // the Loop's runs reached the receiver
}

// TestGrowth runs the growth scenario small: each figure on the grown database as a
// ratio to the same on the small one, claims included.
func TestGrowth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and loads it")
	}
	is := is.New(t)
	opt := testOptions(t)
	opt.Scenarios = []string{"growth"}
	rep, err := Run(context.Background(), opt)
	is.NoErr(err)
	var names []string
	for _, r := range rep.Results {
		names = append(names, r.Scenario)
		is.True(r.Count > 0)
		is.Equal(r.Errors, int64(0))
		is.True(r.Rate > 0 && r.Ceiling > 0 && r.Ratio > 0) // beside its small baseline
		is.Equal(r.CeilingUnit, r.Unit)
	}
	is.Equal(names, []string{"growth-list", "growth-get", "growth-hit", "growth-miss", "growth-claim"})
	claim := rep.Results[4]
	is.Equal(claim.Unit, "claims/s")
	is.True(strings.Contains(claim.Note, "behind 2000 queued tasks") && strings.Contains(claim.Note, "behind 20 "))
}

func TestReadProcMemory(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	is := is.New(t)
	m, err := readProcMemory(os.Getpid())
	is.NoErr(err)
	is.True(m.rss > 0 && m.hwm >= m.rss && m.anon > 0)
	is.True(m.anon+m.file <= m.rss+1024) // RssShmem is the rest
	_, err = readProcMemory(-1)
	is.True(err != nil)
}

// TestPeer runs the peer scenario briefly: a row per request kind and server, each
// with requests in every round and none answered otherwise than expected, and
// enrichd's rows carrying its rate over each peer's.
func TestPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers and loads them")
	}
	is := is.New(t)
	opt := testOptions(t)
	opt.Scenarios, opt.Duration, opt.Rounds = []string{"peer"}, 300*time.Millisecond, 2
	rep, err := Run(context.Background(), opt)
	is.NoErr(err)
	var names []string
	rate := map[string]float64{}
	for _, r := range rep.Results {
		names = append(names, r.Scenario)
		is.True(r.Peer != nil)
		is.True(r.Count > 0 && r.Rate > 0)
		is.Equal(r.Errors, int64(0)) // every answer a 200 opening as enrichd's does
		is.True(r.P99ms >= r.P50ms)
		is.Equal(len(r.Peer.Rounds), 2)
		var sum int64
		for _, round := range r.Peer.Rounds {
			is.True(round.Count > 0 && round.Rate > 0) // every round drove every server
			sum += round.Count
		}
		is.Equal(sum, r.Count)
		rate[r.Scenario] = r.Rate
	}
	is.Equal(names, []string{"peer/hit/bare", "peer/hit/naive", "peer/hit/enrichd", "peer/read/bare", "peer/read/naive", "peer/read/enrichd"})
	for _, i := range []int{2, 5} {
		r := rep.Results[i]
		kind := r.Peer.Request
		is.Equal(r.Peer.EnrichdPerNaive, r.Rate/rate["peer/"+kind+"/naive"])
		is.Equal(r.Peer.EnrichdPerBare, r.Rate/rate["peer/"+kind+"/bare"])
	}
	is.Equal(rep.Results[0].Peer.EnrichdPerNaive, 0.0) // the ratios are enrichd's alone

	var table strings.Builder
	is.NoErr(rep.WriteTable(&table))
	for _, want := range []string{"peer/read/enrichd", "enrichd / server", "× the naive service"} {
		is.True(strings.Contains(table.String(), want))
	}
}

// TestPeersAnswerAsEnrichdDoes: the bare stack and the naive service answer a store hit
// and a task read with a 200 and a JSON body of the same fields as enrichd's, and
// refuse a wrong key as enrichd does, so that the three do comparable work.
func TestPeersAnswerAsEnrichdDoes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers")
	}
	is := is.New(t)
	ctx := context.Background()
	ps, err := startPeers(ctx, testOptions(t), 4)
	is.NoErr(err)
	defer ps.close()
	answers := map[string]map[string]string{} // request/server: the body's shape
	for _, server := range peerServers {
		p := ps.targets[server]
		for _, req := range []struct{ name, method, path, body string }{
			{"hit", "POST", "/v1/companies/enrich", `{"domain":"` + p.hits[1] + `"}`},
			{"read", "GET", "/v1/tasks/" + p.tasks[1], ""},
		} {
			a, err := p.raw.do(ctx, p.key, req.method, req.path, req.body, "")
			is.NoErr(err)
			if a.status != 200 {
				t.Fatalf("%s %s: %d %s", server, req.name, a.status, a.body)
			}
			var body any
			is.NoErr(json.Unmarshal(a.body, &body))
			answers[req.name+"/"+server] = jsonShape(body, "")
			a, err = p.raw.do(ctx, "wrong-key", req.method, req.path, req.body, "")
			is.NoErr(err)
			is.Equal(a.status, 401) // every server checks the bearer
		}
	}
	for _, kind := range []string{"hit", "read"} {
		want := answers[kind+"/enrichd"]
		is.True(len(want) > 10)
		for _, server := range []string{"bare", "naive"} {
			got := answers[kind+"/"+server]
			for field, shape := range want {
				if got[field] == "" {
					t.Errorf("%s of %s: no %s, which enrichd's answer has", kind, server, field)
				} else if got[field] != shape && got[field] != "null" && shape != "null" {
					t.Errorf("%s of %s: %s is %q, enrichd's %q", kind, server, field, got[field], shape)
				}
			}
			for field := range got {
				if _, ok := want[field]; !ok {
					t.Errorf("%s of %s: %s, which enrichd's answer does not have", kind, server, field)
				}
			}
		}
	}
}

// jsonShape maps each field of a decoded JSON value, by its path, to its JSON type.
func jsonShape(v any, path string) map[string]string {
	shape := map[string]string{}
	switch v := v.(type) {
	case map[string]any:
		shape[path] = "object"
		for k, field := range v {
			maps.Copy(shape, jsonShape(field, path+"."+k))
		}
	case []any:
		shape[path] = "array"
	case string:
		shape[path] = "string"
	case float64:
		shape[path] = "number"
	case bool:
		shape[path] = "bool"
	default:
		shape[path] = "null"
	}
	return shape
}

// TestTail runs the tail scenario briefly: every window has its rate and latency, the
// worst window's p99 is the highest, the checkpoints are read from the SQLite driver
// itself (not left at zero because it stopped counting), and the table names them.
func TestTail(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and loads it")
	}
	is := is.New(t)
	opt := testOptions(t)
	opt.Duration, opt.TailWindow, opt.Scenarios = 2500*time.Millisecond, 500*time.Millisecond, []string{"tail"}
	rep, err := Run(context.Background(), opt)
	is.NoErr(err)
	is.Equal(len(rep.Results), 1)
	r := rep.Results[0]
	is.Equal(r.Scenario, "tail")
	is.True(r.Count > 0)
	is.Equal(r.Errors, int64(0))
	is.True(r.Tail != nil)
	is.True(len(r.Tail.Windows) >= 5) // 2.5 s in windows of 0.5 s, the last one short
	var worst float64
	var checkpoints int64
	for _, w := range r.Tail.Windows[:5] {
		is.True(w.Rate > 0)
		is.True(w.P99ms > 0 && w.MaxMS >= w.P99ms)
		is.True(w.PerCommit >= 1)
		worst = max(worst, w.P99ms)
		checkpoints += w.Checkpoints
	}
	for _, w := range r.Tail.Windows {
		worst = max(worst, w.P99ms)
	}
	is.Equal(r.Tail.WorstP99ms, worst)
	is.True(checkpoints > 0) // the background checkpoint runs each second there were commits
	var table strings.Builder
	is.NoErr(rep.WriteTable(&table))
	is.True(strings.Contains(table.String(), "tail: store hits window by window (500ms each)"))
	is.True(strings.Contains(table.String(), "checkpoints"))
}
