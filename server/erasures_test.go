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

	"enrichd/server/servertest"
	"enrichd/store"
	"enrichd/store/storetest"
	"enrichd/webhook"

	"github.com/matryer/is"
)

// TestErasingAPersonRemovesThemAndTellsTheLoopsThatWereSentThem: Rosa, looked up by
// profile through a Loop, by address, in a batch and watched, is erased by her profile:
// the address she was found at is followed, every task about her keeps its charge but
// answers without her (its target the marker, with erased_at), her watch goes, the
// Loop's receiver gets a signed person.erased event naming her profile (which it was
// sent) and not her address (which it was not), the delivery history keeps the
// erasure's id and not her, she is suppressed, and the erasure completes once the
// event is delivered. Another organization sees none of it.
func TestErasingAPersonRemovesThemAndTellsTheLoopsThatWereSentThem(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, servertest.ErasuresOften)
	otherKey, _ := e.NewOrg("globex", 10)
	servertest.RosaNetwork(e)
	e.StartWorkers()
	rcv := servertest.NewReceiver(t)
	loopID, secret, tasks := servertest.LookUpRosaEverywhere(t, e, rcv)
	is.Equal(len(tasks), 3)
	balance := e.Balance("acme").Balance

	r := e.Do("POST", "/v1/erasures", map[string]any{"networkUrl": "https://de.linkedin.com/in/Rosa-Quintero/"})
	is.Equal(r.Status, http.StatusCreated)
	id := r.Str("data.id")
	is.Equal(r.Str("data.kind"), "profile")
	is.Equal(r.Str("data.hint"), "https://www.linkedin.com/in/r***")
	is.Equal(r.Get("data.identifiers"), []any{"https://www.linkedin.com/in/r***", "r***@acme.com"})
	is.Equal(r.Str("data.requested_by.kind"), "key")
	is.Equal(r.Str("data.requested_by.name"), "test")
	is.Equal(r.Get("data.removed.tasks"), 3.0)
	is.Equal(r.Get("data.removed.watches"), 1.0)
	is.Equal(r.Get("data.removed.records"), 1.0)
	is.Equal(r.Get("data.removed.batch_rows"), 1.0)
	is.Equal(len(r.Get("data.loops").([]any)), 1)
	is.Equal(r.Str("data.loops.0.id"), loopID)
	is.Equal(r.Str("data.loops.0.name"), "CRM people")
	for _, s := range servertest.RosaSays {
		is.True(!strings.Contains(string(r.Raw), s)) // masked
	}

	// The receiver is told, signed as every delivery is, with what it holds already.
	got := rcv.Wait(t, 2)[1]
	is.Equal(got.Header.Get(webhook.HeaderEvent), "person.erased")
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
	is.NoErr(json.Unmarshal(got.Body, &event))
	is.Equal(event.Event, "person.erased")
	is.Equal(event.ErasureID, id)
	is.Equal(event.Person.NetworkURLs, []string{servertest.Rosa.URL})
	is.Equal(event.Person.Emails, []string{}) // it was never sent her address
	is.True(!bytes.Contains(got.Body, []byte(servertest.Rosa.Name)))

	done := e.WaitErasureComplete(id)
	is.Equal(done.Str("data.loops.0.status"), "succeeded")
	deliveries := e.Do("GET", "/v1/loops/"+loopID+"/deliveries", nil)
	for _, d := range deliveries.Get("data").([]any) {
		is.Equal(d.(map[string]any)["erasure_id"], id) // the event's, and the task's event it erased
	}
	events := deliveries.Get("data").([]any)
	is.Equal(events[0].(map[string]any)["event"], "person.erased")
	_, payload, err := e.DB.GetDelivery(context.Background(), e.OrgID, events[0].(map[string]any)["id"].(string))
	is.NoErr(err)
	is.Equal(string(payload), `{"event":"person.erased","erasure_id":"`+id+`","person":null}`) // its identifiers are gone

	for _, task := range tasks {
		got := e.Do("GET", "/v1/tasks/"+task, nil)
		is.Equal(got.Status, http.StatusOK)
		is.Equal(got.Str("task.target"), "[erased]")
		is.Equal(got.Get("task.input"), map[string]any{})
		is.True(got.Str("task.erased_at") != "")
		is.True(!got.Has("data"))
		for _, s := range servertest.RosaSays {
			is.True(!strings.Contains(string(got.Raw), s))
		}
	}
	is.Equal(e.Balance("acme").Balance, balance) // the ledger is whole: nothing charged or refunded
	is.Equal(e.WatchTotal(), 0.0)

	// She is suppressed, by her profile and by the address found for her.
	for _, body := range []map[string]string{{"networkUrl": servertest.Rosa.URL}, {"email": servertest.Rosa.Email}} {
		r := e.Do("POST", "/v1/people/enrich", body)
		is.Equal(r.Str("task.status"), "failed")
		is.True(strings.Contains(r.Str("error.message"), "suppressed"))
	}
	sups := e.Do("GET", "/v1/suppressions", nil)
	is.Equal(sups.Get("total"), 2.0)
	is.True(strings.Contains(sups.Str("data.0.reason"), id))

	list := e.Do("GET", "/v1/erasures", nil)
	is.Equal(list.Get("total"), 1.0)
	is.Equal(list.Str("data.0.id"), id)
	// Another organization sees nothing of it.
	other := e.Do("GET", "/v1/erasures", nil, "Authorization", "Bearer "+otherKey)
	is.Equal(other.Get("total"), 0.0)
	is.Equal(e.Do("GET", "/v1/erasures/"+id, nil, "Authorization", "Bearer "+otherKey).Status, http.StatusNotFound)
}

// TestAnErasedTaskLosesItsIdempotencyKey: a client that keys its requests by the
// address it asks about finds neither in the task an erasure kept, nor the key's
// binding left behind.
func TestAnErasedTaskLosesItsIdempotencyKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, servertest.ErasuresOften)
	servertest.JaneOnRecord(e)
	e.StartWorkers()
	r := e.Do("POST", "/v1/people/enrich", map[string]string{"email": "jane@acme.com"}, "Idempotency-Key", "jane@acme.com")
	is.True(r.Status < 300)
	id := r.Str("task.id")
	is.True(id != "")
	var bound int
	is.NoErr(e.DB.Reader().QueryRow(t.Context(), `SELECT count(*) FROM idempotency_keys WHERE task_id = ?`, id).Scan(&bound))
	is.Equal(bound, 1)

	er := e.Do("POST", "/v1/erasures", map[string]any{"email": "jane@acme.com"})
	is.Equal(er.Status, http.StatusCreated)
	g := e.Do("GET", "/v1/tasks/"+id, nil)
	is.Equal(g.Status, http.StatusOK)
	is.True(!strings.Contains(string(g.Raw), "jane@acme.com")) // her address, as the key, is gone too
	is.True(strings.Contains(string(g.Raw), `"idempotency_key":null`))
	is.NoErr(e.DB.Reader().QueryRow(t.Context(), `SELECT count(*) FROM idempotency_keys WHERE task_id = ?`, id).Scan(&bound))
	is.Equal(bound, 0)
}

// TestAnErasureHeldByAReaderCompletesSoonAfterItEnds: a transaction that may still
// read the rows as they were (a reader of SQLite's log; on PostgreSQL a transaction
// given its id first) keeps an erasure from completing, and once it has for 15
// minutes the log says what holds it; once it ends, the erasure completes within
// seconds, not at the next maintenance round a minute later.
func TestAnErasureHeldByAReaderCompletesSoonAfterItEnds(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t) // maintenance once a minute, the default
	servertest.RosaNetwork(e)
	e.StartWorkers()
	_, looked := e.EmailLookup(servertest.Rosa.Email)
	is.Equal(looked.Str("task.status"), "succeeded")

	open := storetest.OpenRaw(t, e.Path).HoldSnapshot(t)

	r := e.Do("POST", "/v1/erasures", map[string]any{"email": servertest.Rosa.Email})
	is.Equal(r.Status, http.StatusCreated)
	is.Equal(len(r.Get("data.loops").([]any)), 0) // nothing to tell: ready at once
	id := r.Str("data.id")
	for held := time.Now().Add(1500 * time.Millisecond); time.Now().Before(held); time.Sleep(100 * time.Millisecond) {
		got := e.Do("GET", "/v1/erasures/"+id, nil)
		is.Equal(got.Get("data.completed_at"), nil) // the reader holds it
	}

	// Held for 15 minutes, the log says what holds it, and names nothing of her.
	e.Clock.Add(16 * time.Minute)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(e.Logs.String(), "erasures wait to complete"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no warning of the held erasure in the log:\n%s", e.Logs.String())
		}
	}
	for line := range strings.Lines(e.Logs.String()) {
		if strings.Contains(line, "erasures wait to complete") {
			is.True(strings.Contains(line, `"heldBy":"`) && !strings.Contains(line, `"heldBy":""`))
			for _, said := range append([]string{servertest.Rosa.Email, servertest.Rosa.URL}, servertest.RosaSays...) {
				is.True(!strings.Contains(line, said))
			}
		}
	}

	is.NoErr(open.Rollback())
	ended := time.Now()
	for {
		got := e.Do("GET", "/v1/erasures/"+id, nil)
		if got.Get("data.completed_at") != nil {
			break
		}
		// Under the next maintenance round (a minute): a try held by a reader of the
		// test's own polls puts the next one off by twice as long, at most 31 s here.
		if time.Since(ended) > 45*time.Second {
			t.Fatalf("the erasure did not complete within 45 s of the reader's end: %s", got.Raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBadErasuresAndExportsAreRefusedAndChangeNothing: two identifiers, none, text that
// is not an address or a profile, an unknown field, an unknown or another
// organization's id: 400 or 404, and nothing is erased.
func TestBadErasuresAndExportsAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	otherKey, _ := e.NewOrg("globex", 10)
	servertest.RosaNetwork(e)
	e.StartWorkers()
	_, looked := e.EmailLookup(servertest.Rosa.Email)
	if looked.Str("task.status") != "succeeded" {
		t.Fatalf("lookup: %s", looked.Raw)
	}
	for name, body := range map[string]any{
		"none":            map[string]any{},
		"two subjects":    map[string]any{"email": servertest.Rosa.Email, "networkUrl": servertest.Rosa.URL},
		"not an address":  map[string]any{"email": "rosa"},
		"a company page":  map[string]any{"networkUrl": "https://www.linkedin.com/company/acme"},
		"a domain":        map[string]any{"domain": "acme.com"},
		"empty":           map[string]any{"email": ""},
		"a NUL":           map[string]any{"email": "rosa\u0000@acme.com"},
		"unknown field":   map[string]any{"email": servertest.Rosa.Email, "reason": "asked"},
		"wrong type":      map[string]any{"email": 42},
		"null":            map[string]any{"email": nil},
		"not JSON":        "{",
		"an array":        []string{servertest.Rosa.Email},
		"invalid UTF-8":   "{\"email\": \"rosa\xff@acme.com\"}",
		"a free address":  map[string]any{"networkUrl": "rosa@gmail.com"},
		"too long":        map[string]any{"email": strings.Repeat("r", 300) + "@acme.com"},
		"a relative path": map[string]any{"networkUrl": "/in/rosa-quintero"},
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			r := e.Do("POST", "/v1/erasures", body)
			is.Equal(r.Status, http.StatusBadRequest)
			is.True(r.Str("error") != "")
		})
	}
	for name, query := range map[string]string{
		"none":          "",
		"two subjects":  "?email=" + url.QueryEscape(servertest.Rosa.Email) + "&networkUrl=" + url.QueryEscape(servertest.Rosa.URL),
		"twice":         "?email=" + url.QueryEscape(servertest.Rosa.Email) + "&email=" + url.QueryEscape(servertest.Rosa.Email),
		"invalid":       "?email=rosa",
		"unknown":       "?email=" + url.QueryEscape(servertest.Rosa.Email) + "&full=1",
		"a NUL":         "?email=rosa%00%40acme.com",
		"a company":     "?networkUrl=" + url.QueryEscape("https://www.linkedin.com/company/acme"),
		"invalid UTF-8": "?email=rosa%ff%40acme.com",
	} {
		t.Run("export "+name, func(t *testing.T) {
			is := is.New(t)
			r := e.Do("GET", "/v1/people/export"+query, nil)
			is.Equal(r.Status, http.StatusBadRequest)
			is.True(r.Str("error") != "")
		})
	}
	is := is.New(t)
	r := e.Do("POST", "/v1/erasures", `{"email":"`+servertest.Rosa.Email+`"}`, "Content-Type", "")
	is.Equal(r.Status, http.StatusBadRequest)
	for _, page := range []string{"page=-1", "pageSize=0", "pageSize=101", "page=x", "page=500&pageSize=100"} {
		is.Equal(e.Do("GET", "/v1/erasures?"+page, nil).Status, http.StatusBadRequest)
	}
	for _, bad := range []string{"00000000-0000-0000-0000-000000000000", "not-an-id", strings.Repeat("x", 300)} {
		r := e.Do("GET", "/v1/erasures/"+bad, nil)
		is.Equal(r.Status, http.StatusNotFound)
		is.Equal(r.Str("code"), "not_found")
	}
	// Another organization's erasure is not found; its own is unchanged.
	theirs := e.Do("POST", "/v1/erasures", map[string]any{"email": "someone@globex.com"}, "Authorization", "Bearer "+otherKey)
	is.Equal(theirs.Status, http.StatusCreated)
	is.Equal(e.Do("GET", "/v1/erasures/"+theirs.Str("data.id"), nil).Status, http.StatusNotFound)

	// Nothing was erased.
	is.Equal(e.Do("GET", "/v1/erasures", nil).Get("total"), 0.0)
	is.Equal(e.Do("GET", "/v1/suppressions", nil).Get("total"), 0.0)
	again := e.Do("GET", "/v1/tasks/"+looked.Str("task.id"), nil)
	is.Equal(again.Str("data.network_url"), servertest.Rosa.URL)
	is.Equal(again.Get("task.erased_at"), nil)
}

// TestAnExportShowsEverythingTheOrganizationHolds: the export by her address finds
// her profile, her record with where and when each field came from, every task about
// her and how it was made, the Loop sent her and when, the batch row by column, the
// watch, and whether she is suppressed; another organization's export of her shows
// the stored record, which the store serves it too, and nothing of acme's.
func TestAnExportShowsEverythingTheOrganizationHolds(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks)
	otherKey, _ := e.NewOrg("globex", 10)
	servertest.RosaNetwork(e)
	e.StartWorkers()
	rcv := servertest.NewReceiver(t)
	loopID, _, tasks := servertest.LookUpRosaEverywhere(t, e, rcv)

	x := e.Do("GET", "/v1/people/export?email="+url.QueryEscape("Rosa.Quintero@ACME.com"), nil)
	is.Equal(x.Status, http.StatusOK)
	is.Equal(x.Get("asked.email"), "Rosa.Quintero@acme.com")
	is.Equal(x.Get("identifiers.networkUrls"), []any{servertest.Rosa.URL})
	is.Equal(x.Get("suppressed"), false)
	is.Equal(len(x.Get("records").([]any)), 1)
	is.Equal(x.Str("records.0.data.full_name"), servertest.Rosa.Name)
	is.Equal(x.Str("records.0.provenance.full_name.source"), "fake-network")
	is.True(x.Str("records.0.provenance.full_name.at") != "")
	is.Equal(len(x.Get("tasks").([]any)), len(tasks))
	vias := map[string]bool{}
	for _, task := range x.Get("tasks").([]any) {
		vias[task.(map[string]any)["via"].(string)] = true
		is.True(task.(map[string]any)["credits_charged"] != nil)
	}
	is.Equal(vias, map[string]bool{"loop": true, "request": true, "batch": true})
	is.Equal(x.Str("loops.0.id"), loopID)
	is.Equal(x.Str("loops.0.name"), "CRM people")
	is.Equal(x.Str("loops.0.deliveries.0.status"), "succeeded")
	is.Equal(x.Str("batches.0.values.note"), "met at the fair")
	is.Equal(len(x.Get("watches").([]any)), 1)
	is.Equal(len(x.Get("erasures").([]any)), 0)

	theirs := e.Do("GET", "/v1/people/export?networkUrl="+url.QueryEscape(servertest.Rosa.URL), nil, "Authorization", "Bearer "+otherKey)
	is.Equal(theirs.Status, http.StatusOK)
	is.Equal(len(theirs.Get("records").([]any)), 1) // the installation's store
	for _, kind := range []string{"tasks", "loops", "batches", "watches", "suppressions"} {
		is.Equal(len(theirs.Get(kind).([]any)), 0)
	}
	is.True(!strings.Contains(string(theirs.Raw), "met at the fair"))
	is.True(!strings.Contains(string(theirs.Raw), loopID))

	// Once she is erased, the export says so, suppressed, without her data.
	is.Equal(e.Do("POST", "/v1/erasures", map[string]any{"email": servertest.Rosa.Email}).Status, http.StatusCreated)
	after := e.Do("GET", "/v1/people/export?email="+url.QueryEscape(servertest.Rosa.Email), nil)
	is.Equal(after.Get("suppressed"), true)
	is.Equal(len(after.Get("erasures").([]any)), 1)
	is.Equal(len(after.Get("records").([]any)), 0)
	is.True(!strings.Contains(string(after.Raw), "Chief Rocket Scientist"))
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
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, servertest.ErasuresOften)
	servertest.RosaNetwork(e)
	e.StartWorkers()
	rcv := servertest.NewReceiver(t)
	servertest.LookUpRosaEverywhere(t, e, rcv)
	held := func(b []byte) []string {
		var out []string
		for _, s := range servertest.RosaSays {
			if bytes.Contains(b, []byte(s)) {
				out = append(out, s)
			}
		}
		return out
	}
	var read func(what string) []byte
	if servertest.OnPostgres() {
		read = postgresBytes(t, e.Path)
	} else {
		// The log first: a checkpoint between the two reads moves its pages into the
		// file, where the second read finds them (read the other way round, a page the
		// checkpoint moved was in neither read, once in a run under load).
		read = func(string) []byte {
			var all []byte
			for _, f := range []string{e.Path + "-wal", e.Path} {
				b, err := os.ReadFile(f)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				all = append(all, b...)
			}
			return all
		}
	}
	is.Equal(held(read("tuples")), servertest.RosaSays) // every one of them is there now

	r := e.Do("POST", "/v1/erasures", map[string]any{"email": servertest.Rosa.Email})
	is.Equal(r.Status, http.StatusCreated)
	is.Equal(len(r.Get("data.loops").([]any)), 1)
	rcv.Wait(t, 2)
	e.WaitErasureComplete(r.Str("data.id"))
	is.Equal(held(read("tuples")), []string(nil))
	if servertest.OnPostgres() {
		t.Logf("left in the tables' files after VACUUM, in the space it freed: %v", held(read("files")))
		raw := postgresRaw(t, e.Path)
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
