package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server"

	"github.com/matryer/is"
)

const acmeURL = "https://www.linkedin.com/company/acme"

// acmeNetwork puts Acme (acme.com) on the fake network with three Smiths, two of whom
// share a title and a city, and a Jane Doe who has left.
func acmeNetwork(e *env) {
	e.net.addCompany(company("Acme", "acme.com"))
	e.net.addPerson(employee("jane-smith", "Jane", "Smith", acmeURL, "Software Engineer", "Berlin", "DE", false))
	e.net.addPerson(employee("jack-smith", "Jack", "Smith", acmeURL, "Software Engineer", "Berlin", "DE", false))
	e.net.addPerson(employee("john-smith", "John", "Smith", acmeURL, "Sales Director", "London", "GB", false))
	e.net.addPerson(employee("jane-doe", "Jane", "Doe", acmeURL, "Designer", "Paris", "FR", true))
}

// emailLookup asks for an address, with hints as name, value pairs, and waits for
// the task to settle.
func (e *env) emailLookup(address string, hints ...string) (enqueued, settled *response) {
	e.t.Helper()
	body := map[string]string{"email": address}
	for i := 0; i+1 < len(hints); i += 2 {
		body[hints[i]] = hints[i+1]
	}
	enqueued = e.do("POST", "/v1/people/enrich", body)
	if enqueued.status != http.StatusOK && enqueued.status != http.StatusAccepted {
		e.t.Fatalf("POST %v: %d %s", body, enqueued.status, enqueued.raw)
	}
	return enqueued, e.waitSettled(enqueued.str("task.id"))
}

func TestRefusedAddressesFailInTheRequestAndCostNothing(t *testing.T) {
	e := newEnv(t)
	acmeNetwork(e)
	for _, address := range []string{"jane.smith@gmail.com", "Jane@Outlook.FR", "jane@mail.yahoo.co.uk", "info@acme.com", "sales+eu@acme.com", "noreply@acme.com"} {
		t.Run(address, func(t *testing.T) {
			is := is.New(t)
			r := e.do("POST", "/v1/people/enrich", map[string]string{"email": address})
			is.Equal(r.status, http.StatusOK) // settled inside the request
			is.Equal(r.str("task.status"), "failed")
			is.Equal(r.str("error.code"), "not_found")
			is.True(r.str("error.message") != "")
			is.True(!r.has("error.candidates"))
			is.True(!r.has("data"))
			is.Equal(r.get("task.credits_charged"), 3.0)
			is.True(r.str("task.finished_at") != "" && r.get("task.queued_at") == nil)
			is.Equal(r.header.Get("Retry-After"), "")

			got := e.do("GET", "/v1/tasks/"+r.str("task.id"), nil)
			is.Equal(got.str("task.status"), "failed")
			is.Equal(got.str("error.code"), "not_found")

			ledger, err := e.db.CreditLedger(t.Context(), "acme")
			is.NoErr(err)
			var kinds []string
			for _, l := range ledger {
				if l.TaskID != nil && *l.TaskID == r.str("task.id") {
					kinds = append(kinds, l.Kind)
				}
			}
			is.Equal(kinds, []string{"charge", "refund"}) // charged and refunded at once
		})
	}
	is := is.New(t)
	is.Equal(e.net.calls.Load(), int64(0)) // no source was asked
	is.Equal(e.balance("acme").Balance, int64(100))
	is.Equal(e.do("GET", "/v1/tasks?status=queued", nil).get("total"), 0.0)

	// A replay of a refused request is the same task, charged nothing more.
	first := e.do("POST", "/v1/people/enrich", map[string]string{"email": "info@acme.com"}, "Idempotency-Key", "k1")
	replay := e.do("POST", "/v1/people/enrich", map[string]string{"email": "info@acme.com"}, "Idempotency-Key", "k1")
	is.Equal(replay.status, http.StatusOK)
	is.Equal(replay.str("task.id"), first.str("task.id"))
	is.Equal(replay.str("error.code"), "not_found")
	b := e.balance("acme")
	is.Equal(b.Balance, int64(100))
	is.Equal(b.Charged, int64(21)) // seven refused lookups of 3 credits, each refunded
	is.Equal(b.Refund, int64(21))
}

func TestAnAddressOnRecordIsExact(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.importJSONL(`{"type":"person","network_url":"https://www.linkedin.com/in/jane-doe","full_name":"Jane Doe","first_name":"Jane","last_name":"Doe",` +
		`"positions":[{"title":"CTO","company_name":"Acme","is_current":true}],"emails":["jane@acme.com"],"last_enriched_at":"` + e.clock.Now().Add(-24*time.Hour).Format(time.RFC3339) + `"}`)
	e.startWorkers()

	r, done := e.emailLookup("jane@acme.com")
	is.Equal(r.status, http.StatusAccepted) // the dataset is not the store: queued
	is.Equal(done.str("task.status"), "succeeded")
	is.Equal(done.str("data.full_name"), "Jane Doe")
	is.Equal(done.get("data.email_match"), map[string]any{"method": "exact", "email": "jane@acme.com", "pattern": nil, "source": nil, "matched_by": nil})
	is.Equal(e.net.searches.Load(), int64(0)) // no search for an address on record

	// Now in the store: settled inside the request, in any case and with a +tag.
	for _, address := range []string{"jane@acme.com", "Jane+news@ACME.com"} {
		again := e.do("POST", "/v1/people/enrich", map[string]string{"email": address})
		is.Equal(again.status, http.StatusOK)
		is.Equal(again.str("task.status"), "succeeded")
		is.True(!again.has("data"))
		got := e.do("GET", "/v1/tasks/"+again.str("task.id"), nil)
		is.Equal(got.str("data.email_match.method"), "exact")
		is.Equal(got.get("data.email_match.pattern"), nil)
	}
	is.Equal(e.balance("acme").Balance, int64(91))
}

func TestAnAddressIsResolvedOnTheNetworkThenExact(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	e.startWorkers()

	r, done := e.emailLookup("jane.smith@acme.com")
	is.Equal(r.status, http.StatusAccepted)
	is.Equal(r.get("task.credits_charged"), 3.0)
	is.Equal(r.str("task.target"), "jane.smith@acme.com")
	is.Equal(done.str("task.status"), "succeeded")
	is.Equal(done.str("data.network_url"), "https://www.linkedin.com/in/jane-smith")
	is.Equal(done.str("data.enrichment_status"), "enriched")
	is.Equal(done.get("data.email_match"), map[string]any{"method": "resolved", "email": "jane.smith@acme.com", "pattern": "first.last", "source": "fake-network", "matched_by": nil})
	is.Equal(e.net.searches.Load(), int64(1))
	is.Equal(e.balance("acme").Balance, int64(97))

	// The address is remembered: the next lookup is exact, inside the request.
	calls := e.net.calls.Load()
	again := e.do("POST", "/v1/people/enrich", map[string]string{"email": "jane.smith@acme.com"})
	is.Equal(again.status, http.StatusOK)
	got := e.do("GET", "/v1/tasks/"+again.str("task.id"), nil)
	is.Equal(got.get("data.email_match"), map[string]any{"method": "exact", "email": "jane.smith@acme.com", "pattern": nil, "source": nil, "matched_by": nil})
	is.Equal(e.net.calls.Load(), calls)
	// The profile itself is in the store too.
	is.Equal(e.do("POST", "/v1/people/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/in/jane-smith"}).status, http.StatusOK)
}

// A person held does not shadow the company's staff: jsmith@ fits three Smiths on the
// network, and having looked up one of them before does not make it theirs.
func TestAPersonHeldDoesNotShadowTheStaff(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	e.startWorkers()
	// John Smith is held once his profile has been looked up.
	stored := e.waitSettled(e.do("POST", "/v1/people/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/in/john-smith"}).str("task.id"))
	is.Equal(stored.str("task.status"), "succeeded")

	_, done := e.emailLookup("jsmith@acme.com")
	is.Equal(done.str("task.status"), "failed")
	is.Equal(done.str("error.code"), "ambiguous")
	is.Equal(done.get("error.candidates"), 3.0) // as when nobody is held
	is.Equal(e.net.searches.Load(), int64(1))
	is.Equal(e.balance("acme").Balance, int64(99)) // the profile lookup; the email refunded

	// john.smith@ fits John and Jack (a nickname): still two, held or not.
	_, both := e.emailLookup("john.smith@acme.com")
	is.Equal(both.str("error.code"), "ambiguous")
	is.Equal(both.get("error.candidates"), 2.0)
}

// A person held whom the staff search does not show (here, a position named after the
// company but without its page, which the network's search goes by) decides nothing
// alone: a search that cannot see the one person it should have listed may miss
// others the address fits too. The lookup fails not_found, refunded.
func TestAPersonHeldTheSearchDoesNotShowDecidesNothingAlone(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	ada := employee("ada-lovelace", "Ada", "Lovelace", acmeURL, "Engineer", "London", "GB", false)
	ada.Positions[0].CompanyNetworkURL = nil
	e.net.addPerson(ada)
	e.startWorkers()
	stored := e.waitSettled(e.do("POST", "/v1/people/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/in/ada-lovelace"}).str("task.id"))
	is.Equal(stored.str("task.status"), "succeeded")

	_, done := e.emailLookup("alovelace@acme.com")
	is.Equal(done.str("task.status"), "failed")
	is.Equal(done.str("error.code"), "not_found")
	is.True(strings.Contains(done.str("error.message"), "could not see everyone"))
	is.Equal(e.net.searches.Load(), int64(1)) // the staff was searched all the same

	// With the network down (the company stored, so it is still identified) the search
	// cannot say that nobody else fits: no answer.
	is.Equal(e.waitSettled(e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).str("task.id")).str("task.status"), "succeeded")
	e.net.setDown(true)
	_, down := e.emailLookup("ada.lovelace@acme.com")
	is.Equal(down.str("error.code"), "provider_unavailable")
	is.True(strings.Contains(down.str("error.message"), "while resolving the address"))
	is.Equal(e.balance("acme").Balance, int64(100-1-1)) // the profile and the company; no email lookup
}

func TestAnAddressNobodyFitsIsNotFound(t *testing.T) {
	e := newEnv(t)
	acmeNetwork(e)
	e.startWorkers()
	for name, address := range map[string]string{
		"nobody of that name":      "zed.zebra@acme.com",
		"a former employee":        "jane.doe@acme.com",
		"no company at the domain": "jane.smith@nowhere.example",
		"no name in the address":   "12345@acme.com",
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			_, done := e.emailLookup(address)
			is.Equal(done.str("task.status"), "failed")
			is.Equal(done.str("error.code"), "not_found")
			is.True(!done.has("error.candidates"))
			is.True(!done.has("data"))
		})
	}
	is := is.New(t)
	is.Equal(e.balance("acme").Balance, int64(100)) // every miss refunded
}

func TestAnAmbiguousAddressAndItsHints(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	e.startWorkers()

	// jsmith fits Jane, Jack and John: nothing in the address separates them.
	r, done := e.emailLookup("jsmith@acme.com")
	is.Equal(r.status, http.StatusAccepted)
	is.Equal(done.str("task.status"), "failed")
	is.Equal(done.str("error.code"), "ambiguous")
	is.Equal(done.get("error.candidates"), 3.0)
	is.Equal(done.get("error.hintsAccepted"), []any{"fullName", "title", "location"})
	is.True(!done.has("data"))
	is.Equal(e.balance("acme").Balance, int64(100)) // refunded
	searches, profiles := e.net.searches.Load(), e.net.profiles.Load()
	is.Equal(searches, int64(1))
	is.Equal(profiles, int64(3)) // the three Smiths; the name shown for Jane Doe cannot be jsmith

	// Each hint breaks the tie against the profiles gathered, without a new search.
	for _, tt := range []struct {
		hint, value, want string
	}{
		{"fullName", "Jack Smith", "https://www.linkedin.com/in/jack-smith"},
		{"fullName", "jane", "https://www.linkedin.com/in/jane-smith"},
		{"title", "sales director", "https://www.linkedin.com/in/john-smith"},
		{"location", "London, United Kingdom", "https://www.linkedin.com/in/john-smith"},
		{"location", "GB", "https://www.linkedin.com/in/john-smith"},
	} {
		_, done := e.emailLookup("jsmith@acme.com", tt.hint, tt.value)
		is.Equal(done.str("task.status"), "succeeded")
		is.Equal(done.str("data.network_url"), tt.want)
		is.Equal(done.get("data.email_match"), map[string]any{"method": "resolved", "email": "jsmith@acme.com", "pattern": "flast", "source": "fake-network", "matched_by": nil})
	}

	// A hint that two of them match is still ambiguous; now only the full name helps.
	_, still := e.emailLookup("jsmith@acme.com", "title", "Software Engineer")
	is.Equal(still.str("error.code"), "ambiguous")
	is.Equal(still.get("error.candidates"), 2.0)
	is.Equal(still.get("error.hintsAccepted"), []any{"fullName"})
	_, still = e.emailLookup("jsmith@acme.com", "location", "Berlin")
	is.Equal(still.get("error.candidates"), 2.0)
	// Hints together narrow further.
	_, both := e.emailLookup("jsmith@acme.com", "location", "Berlin", "fullName", "Jack")
	is.Equal(both.str("data.network_url"), "https://www.linkedin.com/in/jack-smith")

	// A hint that matches none of them is a miss.
	_, none := e.emailLookup("jsmith@acme.com", "fullName", "Jim Smith")
	is.Equal(none.str("error.code"), "not_found")
	_, none = e.emailLookup("jsmith@acme.com", "location", "Paris")
	is.Equal(none.str("error.code"), "not_found")

	is.Equal(e.net.searches.Load(), searches) // no new search
	is.Equal(e.net.profiles.Load(), profiles) // no new retrieval

	// A tie broken by a hint does not make the address anybody's: without a hint it is
	// still ambiguous.
	_, again := e.emailLookup("jsmith@acme.com")
	is.Equal(again.str("error.code"), "ambiguous")
	is.Equal(again.get("error.candidates"), 3.0)

	// Only what succeeded was charged: 6 successes of 3 credits.
	is.Equal(e.balance("acme").Balance, int64(100-6*3))
}

func TestAnAmbiguousReplayIsTheSameTask(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	e.startWorkers()
	first := e.do("POST", "/v1/people/enrich", map[string]string{"email": "jsmith@acme.com"}, "Idempotency-Key", "k")
	e.waitSettled(first.str("task.id"))
	replay := e.do("POST", "/v1/people/enrich", map[string]string{"email": "jsmith@acme.com"}, "Idempotency-Key", "k")
	is.Equal(replay.status, http.StatusOK)
	is.Equal(replay.str("task.id"), first.str("task.id"))
	is.Equal(replay.str("error.code"), "ambiguous")
	is.Equal(replay.get("error.candidates"), 3.0)
	is.Equal(e.net.searches.Load(), int64(1))
	b := e.balance("acme")
	is.Equal(b.Charged, int64(3))
	is.Equal(b.Balance, int64(100))
}

// Hints are not filters: an address that fits one person gets that person, whatever
// the hints say.
func TestHintsDoNotFilterASingleFit(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	e.startWorkers()
	_, done := e.emailLookup("jane.smith@acme.com", "fullName", "Somebody Else", "location", "Tokyo")
	is.Equal(done.str("task.status"), "succeeded")
	is.Equal(done.str("data.network_url"), "https://www.linkedin.com/in/jane-smith")

	// Jack is a nickname of John: john.smith fits John Smith and Jack Smith alike, and
	// the hint decides.
	_, both := e.emailLookup("john.smith@acme.com")
	is.Equal(both.get("error.candidates"), 2.0)
	_, done = e.emailLookup("john.smith@acme.com", "fullName", "John Smith")
	is.Equal(done.str("data.network_url"), "https://www.linkedin.com/in/john-smith")
}

func TestAStaleAddressIsRefreshedBeforeSettling(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	e.startWorkers()
	_, first := e.emailLookup("jane.smith@acme.com")
	is.Equal(first.str("data.email_match.method"), "resolved")

	e.clock.Add(31 * 24 * time.Hour)
	e.net.addPerson(employee("jane-smith", "Jane", "Smith", acmeURL, "Engineering Manager", "Berlin", "DE", false))
	r, done := e.emailLookup("jane.smith@acme.com")
	is.Equal(r.status, http.StatusAccepted) // older than 30 days: queued and refreshed
	is.Equal(done.str("task.status"), "succeeded")
	is.Equal(done.get("data.positions").([]any)[0].(map[string]any)["title"], "Engineering Manager")
	is.True(done.str("data.last_enriched_at") > first.str("data.last_enriched_at"))
	is.Equal(done.str("data.email_match.method"), "exact")

	// Fresh again: inside the request.
	is.Equal(e.do("POST", "/v1/people/enrich", map[string]string{"email": "jane.smith@acme.com"}).status, http.StatusOK)
}

// A stale address whose refresh cannot complete still settles, with the stored record.
func TestAStaleAddressWithTheNetworkDownServesTheStoredRecord(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	e.startWorkers()
	_, first := e.emailLookup("jane.smith@acme.com")
	e.clock.Add(31 * 24 * time.Hour)
	e.net.setDown(true)
	_, done := e.emailLookup("jane.smith@acme.com")
	is.Equal(done.str("task.status"), "succeeded")
	is.Equal(done.str("data.last_enriched_at"), first.str("data.last_enriched_at"))
	is.Equal(done.str("data.email_match.method"), "exact")
}

// jsmith@ may stand for Acme's three Smiths. Allowed two retrievals, the lookup
// cannot check them all, so it confirms nobody and retrieves nothing (not_found,
// refunded); allowed three, it retrieves the three and finds them all current.
func TestEmailRetrievalsAreBounded(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, func(c *server.Config) { c.EmailMaxRetrievals = 2 })
	acmeNetwork(e)
	e.startWorkers()
	_, done := e.emailLookup("jsmith@acme.com")
	is.Equal(done.str("error.code"), "not_found")
	is.True(strings.Contains(done.str("error.message"), "more people at Acme the address may stand for than this server retrieves for one lookup (2)"))
	is.Equal(e.net.profiles.Load(), int64(0))
	is.Equal(e.balance("acme").Balance, int64(100))

	e = newEnv(t, func(c *server.Config) { c.EmailMaxRetrievals = 3 })
	acmeNetwork(e)
	e.startWorkers()
	_, done = e.emailLookup("jsmith@acme.com")
	is.Equal(done.str("error.code"), "ambiguous")
	is.Equal(done.get("error.candidates"), float64(3))
	is.Equal(e.net.profiles.Load(), int64(3))
}

func TestTheNetworkDownIsProviderUnavailable(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	e.net.setDown(true)
	e.startWorkers()
	_, done := e.emailLookup("jane.smith@acme.com")
	is.Equal(done.str("error.code"), "provider_unavailable")
	is.Equal(e.balance("acme").Balance, int64(100))
}

var _ enrich.StaffSearcher = (*fakeNetwork)(nil)
