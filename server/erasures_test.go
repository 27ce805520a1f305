package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
	"enrichd/webhook"

	"github.com/matryer/is"
)

// rosa is a person on the fake network whose every identifying byte can be looked for
// in the database files: her name, profile, address and headline.
var rosa = struct{ name, slug, url, email, headline string }{
	"Rosa Quintero", "rosa-quintero", "https://www.linkedin.com/in/rosa-quintero", "rosa.quintero@acme.com", "Chief Rocket Scientist at Acme",
}

// rosaSays are the strings of hers nothing may keep once she is erased.
var rosaSays = []string{rosa.name, "Quintero", rosa.slug, rosa.email, "Chief Rocket Scientist"}

// rosaNetwork puts Acme and Rosa Quintero, who works there, on the fake network.
func rosaNetwork(e *env) {
	acmeNetwork(e)
	p := employee(rosa.slug, "Rosa", "Quintero", acmeURL, "Chief Rocket Scientist", "Lisbon", "PT", false)
	p.Headline = enrich.Ptr(rosa.headline)
	e.net.addPerson(p)
}

// lookUpRosaEverywhere looks Rosa up by profile through a person Loop (whose receiver
// gets the event), by address directly, and in a batch, and watches her through the
// Loop. It returns the Loop's id and secret and the tasks' ids.
func lookUpRosaEverywhere(t *testing.T, e *env, rcv *receiver) (loopID, secret string, tasks []string) {
	t.Helper()
	is := is.New(t)
	loopID, secret = e.createLoop("CRM people", rcv.srv.URL+"/hook", "person")
	run := e.do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"networkUrl": rosa.url})
	is.Equal(e.waitSettled(run.str("task.id")).str("task.status"), "succeeded")
	got := rcv.wait(t, 1)
	is.True(bytes.Contains(got[0].body, []byte(rosa.name))) // the receiver holds her
	_, byEmail := e.emailLookup(rosa.email)
	is.Equal(byEmail.str("task.status"), "succeeded")
	is.Equal(byEmail.str("data.network_url"), rosa.url)
	b := e.uploadCSV("networkUrl,note\n"+rosa.url+",met at the fair\n", "")
	is.Equal(b.status, http.StatusAccepted)
	done := e.waitBatchDone(b.str("data.id"))
	is.Equal(count(done, "succeeded"), 1)
	w := e.createWatch(map[string]any{"object_type": "person", "networkUrl": rosa.url, "loop_id": loopID})
	is.True(w.str("data.id") != "")
	list := e.do("GET", "/v1/tasks?pageSize=100", nil)
	for _, task := range list.get("data").([]any) {
		tasks = append(tasks, task.(map[string]any)["id"].(string))
	}
	return loopID, secret, tasks
}

// waitErasureComplete polls an erasure until it is complete.
func (e *env) waitErasureComplete(id string) *response {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := e.do("GET", "/v1/erasures/"+id, nil)
		if r.status != http.StatusOK {
			e.t.Fatalf("GET erasure: %d %s", r.status, r.raw)
		}
		if r.get("data.completed_at") != nil {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the erasure did not complete: %s", r.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// erasuresOften completes erasures, as maintenance does, every 50 ms.
func erasuresOften(cfg *server.Config) { cfg.MaintenanceInterval = 50 * time.Millisecond }

// TestErasingAPersonRemovesThemAndTellsTheLoopsThatWereSentThem: Rosa, looked up by
// profile through a Loop, by address, in a batch and watched, is erased by her profile:
// the address she was found at is followed, every task about her keeps its charge but
// answers without her (its target the marker, with erased_at), her watch goes, the
// Loop's receiver gets a signed person.erased event naming her profile (which it was
// sent) and not her address (which it was not), the delivery history keeps the
// erasure's id and not her, she is suppressed, and the erasure completes once the
// event is delivered. Another organization sees none of it.
func TestErasingAPersonRemovesThemAndTellsTheLoopsThatWereSentThem(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks, erasuresOften)
	otherKey, _ := e.newOrg("globex", 10)
	rosaNetwork(e)
	e.startWorkers()
	rcv := newReceiver(t)
	loopID, secret, tasks := lookUpRosaEverywhere(t, e, rcv)
	is.Equal(len(tasks), 3)
	balance := e.balance("acme").Balance

	r := e.do("POST", "/v1/erasures", map[string]any{"networkUrl": "https://de.linkedin.com/in/Rosa-Quintero/"})
	is.Equal(r.status, http.StatusCreated)
	id := r.str("data.id")
	is.Equal(r.str("data.kind"), "profile")
	is.Equal(r.str("data.hint"), "https://www.linkedin.com/in/r***")
	is.Equal(r.get("data.identifiers"), []any{"https://www.linkedin.com/in/r***", "r***@acme.com"})
	is.Equal(r.str("data.requested_by.kind"), "key")
	is.Equal(r.str("data.requested_by.name"), "test")
	is.Equal(r.get("data.removed.tasks"), 3.0)
	is.Equal(r.get("data.removed.watches"), 1.0)
	is.Equal(r.get("data.removed.records"), 1.0)
	is.Equal(r.get("data.removed.batch_rows"), 1.0)
	is.Equal(len(r.get("data.loops").([]any)), 1)
	is.Equal(r.str("data.loops.0.id"), loopID)
	is.Equal(r.str("data.loops.0.name"), "CRM people")
	for _, s := range rosaSays {
		is.True(!strings.Contains(string(r.raw), s)) // masked
	}

	// The receiver is told, signed as every delivery is, with what it holds already.
	got := rcv.wait(t, 2)[1]
	is.Equal(got.header.Get(webhook.HeaderEvent), "person.erased")
	stripe, standard := verifiers(t, got, secret)
	is.True(stripe)
	is.True(standard)
	var event struct {
		Event     string `json:"event"`
		ErasureID string `json:"erasure_id"`
		Person    struct {
			Emails      []string `json:"emails"`
			NetworkURLs []string `json:"networkUrls"`
		} `json:"person"`
	}
	is.NoErr(json.Unmarshal(got.body, &event))
	is.Equal(event.Event, "person.erased")
	is.Equal(event.ErasureID, id)
	is.Equal(event.Person.NetworkURLs, []string{rosa.url})
	is.Equal(event.Person.Emails, []string{}) // it was never sent her address
	is.True(!bytes.Contains(got.body, []byte(rosa.name)))

	done := e.waitErasureComplete(id)
	is.Equal(done.str("data.loops.0.status"), "succeeded")
	deliveries := e.do("GET", "/v1/loops/"+loopID+"/deliveries", nil)
	for _, d := range deliveries.get("data").([]any) {
		is.Equal(d.(map[string]any)["erasure_id"], id) // the event's, and the task's event it erased
	}
	events := deliveries.get("data").([]any)
	is.Equal(events[0].(map[string]any)["event"], "person.erased")
	_, payload, err := e.db.GetDelivery(context.Background(), e.orgID, events[0].(map[string]any)["id"].(string))
	is.NoErr(err)
	is.Equal(string(payload), `{"event":"person.erased","erasure_id":"`+id+`","person":null}`) // its identifiers are gone

	for _, task := range tasks {
		got := e.do("GET", "/v1/tasks/"+task, nil)
		is.Equal(got.status, http.StatusOK)
		is.Equal(got.str("task.target"), "[erased]")
		is.Equal(got.get("task.input"), map[string]any{})
		is.True(got.str("task.erased_at") != "")
		is.True(!got.has("data"))
		for _, s := range rosaSays {
			is.True(!strings.Contains(string(got.raw), s))
		}
	}
	is.Equal(e.balance("acme").Balance, balance) // the ledger is whole: nothing charged or refunded
	is.Equal(e.watchTotal(), 0.0)

	// She is suppressed, by her profile and by the address found for her.
	for _, body := range []map[string]string{{"networkUrl": rosa.url}, {"email": rosa.email}} {
		r := e.do("POST", "/v1/people/enrich", body)
		is.Equal(r.str("task.status"), "failed")
		is.True(strings.Contains(r.str("error.message"), "suppressed"))
	}
	sups := e.do("GET", "/v1/suppressions", nil)
	is.Equal(sups.get("total"), 2.0)
	is.True(strings.Contains(sups.str("data.0.reason"), id))

	list := e.do("GET", "/v1/erasures", nil)
	is.Equal(list.get("total"), 1.0)
	is.Equal(list.str("data.0.id"), id)
	// Another organization sees nothing of it.
	other := e.do("GET", "/v1/erasures", nil, "Authorization", "Bearer "+otherKey)
	is.Equal(other.get("total"), 0.0)
	is.Equal(e.do("GET", "/v1/erasures/"+id, nil, "Authorization", "Bearer "+otherKey).status, http.StatusNotFound)
}

// TestAnErasedTaskLosesItsIdempotencyKey: a client that keys its requests by the
// address it asks about finds neither in the task an erasure kept, nor the key's
// binding left behind.
func TestAnErasedTaskLosesItsIdempotencyKey(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks, erasuresOften)
	janeOnRecord(e)
	e.startWorkers()
	r := e.do("POST", "/v1/people/enrich", map[string]string{"email": "jane@acme.com"}, "Idempotency-Key", "jane@acme.com")
	is.True(r.status < 300)
	id := r.str("task.id")
	is.True(id != "")
	var bound int
	is.NoErr(e.db.Reader().QueryRow(t.Context(), `SELECT count(*) FROM idempotency_keys WHERE task_id = ?`, id).Scan(&bound))
	is.Equal(bound, 1)

	er := e.do("POST", "/v1/erasures", map[string]any{"email": "jane@acme.com"})
	is.Equal(er.status, http.StatusCreated)
	g := e.do("GET", "/v1/tasks/"+id, nil)
	is.Equal(g.status, http.StatusOK)
	is.True(!strings.Contains(string(g.raw), "jane@acme.com")) // her address, as the key, is gone too
	is.True(strings.Contains(string(g.raw), `"idempotency_key":null`))
	is.NoErr(e.db.Reader().QueryRow(t.Context(), `SELECT count(*) FROM idempotency_keys WHERE task_id = ?`, id).Scan(&bound))
	is.Equal(bound, 0)
}

// TestBadErasuresAndExportsAreRefusedAndChangeNothing: two identifiers, none, text that
// is not an address or a profile, an unknown field, an unknown or another
// organization's id: 400 or 404, and nothing is erased.
func TestBadErasuresAndExportsAreRefusedAndChangeNothing(t *testing.T) {
	e := newEnv(t)
	otherKey, _ := e.newOrg("globex", 10)
	rosaNetwork(e)
	e.startWorkers()
	_, looked := e.emailLookup(rosa.email)
	if looked.str("task.status") != "succeeded" {
		t.Fatalf("lookup: %s", looked.raw)
	}
	for name, body := range map[string]any{
		"none":            map[string]any{},
		"two subjects":    map[string]any{"email": rosa.email, "networkUrl": rosa.url},
		"not an address":  map[string]any{"email": "rosa"},
		"a company page":  map[string]any{"networkUrl": "https://www.linkedin.com/company/acme"},
		"a domain":        map[string]any{"domain": "acme.com"},
		"empty":           map[string]any{"email": ""},
		"a NUL":           map[string]any{"email": "rosa\u0000@acme.com"},
		"unknown field":   map[string]any{"email": rosa.email, "reason": "asked"},
		"wrong type":      map[string]any{"email": 42},
		"null":            map[string]any{"email": nil},
		"not JSON":        "{",
		"an array":        []string{rosa.email},
		"invalid UTF-8":   "{\"email\": \"rosa\xff@acme.com\"}",
		"a free address":  map[string]any{"networkUrl": "rosa@gmail.com"},
		"too long":        map[string]any{"email": strings.Repeat("r", 300) + "@acme.com"},
		"a relative path": map[string]any{"networkUrl": "/in/rosa-quintero"},
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			r := e.do("POST", "/v1/erasures", body)
			is.Equal(r.status, http.StatusBadRequest)
			is.True(r.str("error") != "")
		})
	}
	for name, query := range map[string]string{
		"none":          "",
		"two subjects":  "?email=" + url.QueryEscape(rosa.email) + "&networkUrl=" + url.QueryEscape(rosa.url),
		"twice":         "?email=" + url.QueryEscape(rosa.email) + "&email=" + url.QueryEscape(rosa.email),
		"invalid":       "?email=rosa",
		"unknown":       "?email=" + url.QueryEscape(rosa.email) + "&full=1",
		"a NUL":         "?email=rosa%00%40acme.com",
		"a company":     "?networkUrl=" + url.QueryEscape("https://www.linkedin.com/company/acme"),
		"invalid UTF-8": "?email=rosa%ff%40acme.com",
	} {
		t.Run("export "+name, func(t *testing.T) {
			is := is.New(t)
			r := e.do("GET", "/v1/people/export"+query, nil)
			is.Equal(r.status, http.StatusBadRequest)
			is.True(r.str("error") != "")
		})
	}
	is := is.New(t)
	r := e.do("POST", "/v1/erasures", `{"email":"`+rosa.email+`"}`, "Content-Type", "")
	is.Equal(r.status, http.StatusBadRequest)
	for _, page := range []string{"page=-1", "pageSize=0", "pageSize=101", "page=x", "page=500&pageSize=100"} {
		is.Equal(e.do("GET", "/v1/erasures?"+page, nil).status, http.StatusBadRequest)
	}
	for _, bad := range []string{"00000000-0000-0000-0000-000000000000", "not-an-id", strings.Repeat("x", 300)} {
		r := e.do("GET", "/v1/erasures/"+bad, nil)
		is.Equal(r.status, http.StatusNotFound)
		is.Equal(r.str("code"), "not_found")
	}
	// Another organization's erasure is not found; its own is unchanged.
	theirs := e.do("POST", "/v1/erasures", map[string]any{"email": "someone@globex.com"}, "Authorization", "Bearer "+otherKey)
	is.Equal(theirs.status, http.StatusCreated)
	is.Equal(e.do("GET", "/v1/erasures/"+theirs.str("data.id"), nil).status, http.StatusNotFound)

	// Nothing was erased.
	is.Equal(e.do("GET", "/v1/erasures", nil).get("total"), 0.0)
	is.Equal(e.do("GET", "/v1/suppressions", nil).get("total"), 0.0)
	again := e.do("GET", "/v1/tasks/"+looked.str("task.id"), nil)
	is.Equal(again.str("data.network_url"), rosa.url)
	is.Equal(again.get("task.erased_at"), nil)
}

// TestAnExportShowsEverythingTheOrganizationHolds: the export by her address finds
// her profile, her record with where and when each field came from, every task about
// her and how it was made, the Loop sent her and when, the batch row by column, the
// watch, and whether she is suppressed; another organization's export of her shows
// the stored record, which the store serves it too, and nothing of acme's.
func TestAnExportShowsEverythingTheOrganizationHolds(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks)
	otherKey, _ := e.newOrg("globex", 10)
	rosaNetwork(e)
	e.startWorkers()
	rcv := newReceiver(t)
	loopID, _, tasks := lookUpRosaEverywhere(t, e, rcv)

	x := e.do("GET", "/v1/people/export?email="+url.QueryEscape("Rosa.Quintero@ACME.com"), nil)
	is.Equal(x.status, http.StatusOK)
	is.Equal(x.get("asked.email"), "Rosa.Quintero@acme.com")
	is.Equal(x.get("identifiers.networkUrls"), []any{rosa.url})
	is.Equal(x.get("suppressed"), false)
	is.Equal(len(x.get("records").([]any)), 1)
	is.Equal(x.str("records.0.data.full_name"), rosa.name)
	is.Equal(x.str("records.0.provenance.full_name.source"), "fake-network")
	is.True(x.str("records.0.provenance.full_name.at") != "")
	is.Equal(len(x.get("tasks").([]any)), len(tasks))
	vias := map[string]bool{}
	for _, task := range x.get("tasks").([]any) {
		vias[task.(map[string]any)["via"].(string)] = true
		is.True(task.(map[string]any)["credits_charged"] != nil)
	}
	is.Equal(vias, map[string]bool{"loop": true, "request": true, "batch": true})
	is.Equal(x.str("loops.0.id"), loopID)
	is.Equal(x.str("loops.0.name"), "CRM people")
	is.Equal(x.str("loops.0.deliveries.0.status"), "succeeded")
	is.Equal(x.str("batches.0.values.note"), "met at the fair")
	is.Equal(len(x.get("watches").([]any)), 1)
	is.Equal(len(x.get("erasures").([]any)), 0)

	theirs := e.do("GET", "/v1/people/export?networkUrl="+url.QueryEscape(rosa.url), nil, "Authorization", "Bearer "+otherKey)
	is.Equal(theirs.status, http.StatusOK)
	is.Equal(len(theirs.get("records").([]any)), 1) // the installation's store
	for _, kind := range []string{"tasks", "loops", "batches", "watches", "suppressions"} {
		is.Equal(len(theirs.get(kind).([]any)), 0)
	}
	is.True(!strings.Contains(string(theirs.raw), "met at the fair"))
	is.True(!strings.Contains(string(theirs.raw), loopID))

	// Once she is erased, the export says so, suppressed, without her data.
	is.Equal(e.do("POST", "/v1/erasures", map[string]any{"email": rosa.email}).status, http.StatusCreated)
	after := e.do("GET", "/v1/people/export?email="+url.QueryEscape(rosa.email), nil)
	is.Equal(after.get("suppressed"), true)
	is.Equal(len(after.get("erasures").([]any)), 1)
	is.Equal(len(after.get("records").([]any)), 0)
	is.True(!strings.Contains(string(after.raw), "Chief Rocket Scientist"))
}

// TestAnErasedPersonLeavesNoByteInTheDatabaseFiles: Rosa looked up by profile, by
// address, through a Loop and in a batch, then erased. On SQLite, once the erasure and
// its event are done, neither the database file nor its write-ahead log holds a byte
// of her name, profile, address or headline (before the erasure both held them). On
// PostgreSQL, no tuple of any table (nor of its TOAST table) holds one once the
// erasure has vacuumed them, read page by page through pageinspect; the tables' files
// may still hold the bytes in the space VACUUM freed, until new rows take it, and hold
// none once VACUUM FULL has rewritten them, read through pg_read_binary_file.
func TestAnErasedPersonLeavesNoByteInTheDatabaseFiles(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks, erasuresOften)
	rosaNetwork(e)
	e.startWorkers()
	rcv := newReceiver(t)
	lookUpRosaEverywhere(t, e, rcv)
	held := func(b []byte) []string {
		var out []string
		for _, s := range rosaSays {
			if bytes.Contains(b, []byte(s)) {
				out = append(out, s)
			}
		}
		return out
	}
	var read func(what string) []byte
	if onPostgres() {
		read = postgresBytes(t, e.path)
	} else {
		read = func(string) []byte {
			var all []byte
			for _, f := range []string{e.path, e.path + "-wal"} {
				b, err := os.ReadFile(f)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				all = append(all, b...)
			}
			return all
		}
	}
	is.Equal(held(read("tuples")), rosaSays) // every one of them is there now

	r := e.do("POST", "/v1/erasures", map[string]any{"email": rosa.email})
	is.Equal(r.status, http.StatusCreated)
	is.Equal(len(r.get("data.loops").([]any)), 1)
	rcv.wait(t, 2)
	e.waitErasureComplete(r.str("data.id"))
	is.Equal(held(read("tuples")), []string(nil))
	if onPostgres() {
		t.Logf("left in the tables' files after VACUUM, in the space it freed: %v", held(read("files")))
		raw := postgresRaw(t, e.path)
		var tables []string
		for _, p := range store.PersonalTables() {
			tables = append(tables, p.Name)
		}
		if _, err := raw.Exec(`VACUUM FULL ` + strings.Join(tables, ", ")); err != nil {
			t.Fatal(err)
		}
		is.Equal(held(read("files")), []string(nil))
	}
}

// postgresRaw is database/sql on the test's PostgreSQL database.
func postgresRaw(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// postgresBytes reads, of every table of the registry and its TOAST table, either the
// data of every tuple on every page, live or dead (what: "tuples", through
// pageinspect's heap_page_items), or the whole of each relation's files, its indexes
// included ("files", through pg_read_binary_file). It skips the test when the server
// has no pageinspect.
func postgresBytes(t *testing.T, dsn string) func(what string) []byte {
	t.Helper()
	raw := postgresRaw(t, dsn)
	if _, err := raw.Exec(`CREATE EXTENSION IF NOT EXISTS pageinspect`); err != nil {
		t.Skipf("pageinspect is not available on this server (%v): the tuples cannot be read page by page", err)
	}
	var names []any
	for _, p := range store.PersonalTables() {
		names = append(names, p.Name)
	}
	in := "($1" + strings.Repeat(", $x", len(names)-1) + ")"
	for i := 2; i <= len(names); i++ {
		in = strings.Replace(in, "$x", "$"+strconv.Itoa(i), 1)
	}
	// The registry's tables, their TOAST tables and, for "files", every index of either.
	relations := `SELECT c.oid FROM pg_class c WHERE c.relname IN ` + in + ` AND c.relnamespace = current_schema()::regnamespace
		UNION SELECT c.reltoastrelid FROM pg_class c WHERE c.relname IN ` + in + ` AND c.relnamespace = current_schema()::regnamespace AND c.reltoastrelid <> 0`
	return func(what string) []byte {
		t.Helper()
		q := `SELECT coalesce(i.t_data, '') FROM (` + relations + `) r,
			generate_series(0, (pg_relation_size(r.oid) / current_setting('block_size')::int) - 1) b,
			heap_page_items(get_raw_page(r.oid::regclass::text, b::int)) i`
		if what == "files" {
			q = `SELECT pg_read_binary_file(pg_relation_filepath(x.oid)) FROM (
				SELECT r.oid FROM (` + relations + `) r UNION SELECT x.indexrelid FROM pg_index x WHERE x.indrelid IN (` + relations + `)) x
				WHERE pg_relation_size(x.oid) > 0`
		}
		rows, err := raw.Query(q, names...)
		if err != nil {
			t.Fatalf("reading the %s: %v", what, err)
		}
		defer rows.Close()
		var all []byte
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return all
	}
}
