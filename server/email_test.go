package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/server/servertest"

	"github.com/matryer/is"
)

func TestRefusedAddressesFailInTheRequestAndCostNothing(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	for _, address := range []string{"jane.smith@gmail.com", "Jane@Outlook.FR", "jane@mail.yahoo.co.uk", "info@acme.com", "sales+eu@acme.com", "noreply@acme.com"} {
		t.Run(address, func(t *testing.T) {
			is := is.New(t)
			r := e.Do("POST", "/v1/people/enrich", map[string]string{"email": address})
			is.Equal(r.Status, http.StatusOK) // settled inside the request
			is.Equal(r.Str("task.status"), "failed")
			is.Equal(r.Str("error.code"), "not_found")
			is.True(r.Str("error.message") != "")
			is.True(!r.Has("error.candidates"))
			is.True(!r.Has("data"))
			is.Equal(r.Get("task.credits_charged"), 3.0)
			is.True(r.Str("task.finished_at") != "" && r.Get("task.queued_at") == nil)
			is.Equal(r.Header.Get("Retry-After"), "")

			got := e.Do("GET", "/v1/tasks/"+r.Str("task.id"), nil)
			is.Equal(got.Str("task.status"), "failed")
			is.Equal(got.Str("error.code"), "not_found")

			ledger, err := e.DB.CreditLedger(t.Context(), "acme")
			is.NoErr(err)
			var kinds []string
			for _, l := range ledger {
				if l.TaskID != nil && *l.TaskID == r.Str("task.id") {
					kinds = append(kinds, l.Kind)
				}
			}
			is.Equal(kinds, []string{"charge", "refund"}) // charged and refunded at once
		})
	}
	is := is.New(t)
	is.Equal(e.Net.Calls.Load(), int64(0)) // no source was asked
	is.Equal(e.Balance("acme").Balance, int64(100))
	is.Equal(e.Do("GET", "/v1/tasks?status=queued", nil).Get("total"), 0.0)

	// A replay of a refused request is the same task, charged nothing more.
	first := e.Do("POST", "/v1/people/enrich", map[string]string{"email": "info@acme.com"}, "Idempotency-Key", "k1")
	replay := e.Do("POST", "/v1/people/enrich", map[string]string{"email": "info@acme.com"}, "Idempotency-Key", "k1")
	is.Equal(replay.Status, http.StatusOK)
	is.Equal(replay.Str("task.id"), first.Str("task.id"))
	is.Equal(replay.Str("error.code"), "not_found")
	b := e.Balance("acme")
	is.Equal(b.Balance, int64(100))
	is.Equal(b.Charged, int64(21)) // seven refused lookups of 3 credits, each refunded
	is.Equal(b.Refund, int64(21))
}

func TestAnAddressOnRecordIsExact(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.ImportJSONL(`{"type":"person","network_url":"https://www.linkedin.com/in/jane-doe","full_name":"Jane Doe","first_name":"Jane","last_name":"Doe",` +
		`"positions":[{"title":"CTO","company_name":"Acme","is_current":true}],"emails":["jane@acme.com"],"last_enriched_at":"` + e.Clock.Now().Add(-24*time.Hour).Format(time.RFC3339) + `"}`)
	e.StartWorkers()

	r, done := e.EmailLookup("jane@acme.com")
	is.Equal(r.Status, http.StatusAccepted) // the dataset is not the store: queued
	is.Equal(done.Str("task.status"), "succeeded")
	is.Equal(done.Str("data.full_name"), "Jane Doe")
	is.Equal(done.Get("data.email_match"), map[string]any{"method": "exact", "email": "jane@acme.com", "pattern": nil, "source": nil, "matched_by": nil})
	is.Equal(e.Net.Searches.Load(), int64(0)) // no search for an address on record

	// Now in the store: settled inside the request, in any case and with a +tag.
	for _, address := range []string{"jane@acme.com", "Jane+news@ACME.com"} {
		again := e.Do("POST", "/v1/people/enrich", map[string]string{"email": address})
		is.Equal(again.Status, http.StatusOK)
		is.Equal(again.Str("task.status"), "succeeded")
		is.True(!again.Has("data"))
		got := e.Do("GET", "/v1/tasks/"+again.Str("task.id"), nil)
		is.Equal(got.Str("data.email_match.method"), "exact")
		is.Equal(got.Get("data.email_match.pattern"), nil)
	}
	is.Equal(e.Balance("acme").Balance, int64(91))
}

func TestAnAddressIsResolvedOnTheNetworkThenExact(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.StartWorkers()

	r, done := e.EmailLookup("jane.smith@acme.com")
	is.Equal(r.Status, http.StatusAccepted)
	is.Equal(r.Get("task.credits_charged"), 3.0)
	is.Equal(r.Str("task.target"), "jane.smith@acme.com")
	is.Equal(done.Str("task.status"), "succeeded")
	is.Equal(done.Str("data.network_url"), "https://www.linkedin.com/in/jane-smith")
	is.Equal(done.Str("data.enrichment_status"), "enriched")
	is.Equal(done.Get("data.email_match"), map[string]any{"method": "resolved", "email": "jane.smith@acme.com", "pattern": "first.last", "source": "fake-network", "matched_by": nil})
	is.Equal(e.Net.Searches.Load(), int64(1))
	is.Equal(e.Balance("acme").Balance, int64(97))

	// The address is remembered: the next lookup is exact, inside the request.
	calls := e.Net.Calls.Load()
	again := e.Do("POST", "/v1/people/enrich", map[string]string{"email": "jane.smith@acme.com"})
	is.Equal(again.Status, http.StatusOK)
	got := e.Do("GET", "/v1/tasks/"+again.Str("task.id"), nil)
	is.Equal(got.Get("data.email_match"), map[string]any{"method": "exact", "email": "jane.smith@acme.com", "pattern": nil, "source": nil, "matched_by": nil})
	is.Equal(e.Net.Calls.Load(), calls)
	// The profile itself is in the store too.
	is.Equal(e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/in/jane-smith"}).Status, http.StatusOK)
}

// A person held does not shadow the company's staff: jsmith@ fits three Smiths on the
// network, and having looked up one of them before does not make it theirs.
func TestAPersonHeldDoesNotShadowTheStaff(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.StartWorkers()
	// John Smith is held once his profile has been looked up.
	stored := e.WaitSettled(e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/in/john-smith"}).Str("task.id"))
	is.Equal(stored.Str("task.status"), "succeeded")

	_, done := e.EmailLookup("jsmith@acme.com")
	is.Equal(done.Str("task.status"), "failed")
	is.Equal(done.Str("error.code"), "ambiguous")
	is.Equal(done.Get("error.candidates"), 3.0) // as when nobody is held
	is.Equal(e.Net.Searches.Load(), int64(1))
	is.Equal(e.Balance("acme").Balance, int64(99)) // the profile lookup; the email refunded

	// john.smith@ fits John and Jack (a nickname): still two, held or not.
	_, both := e.EmailLookup("john.smith@acme.com")
	is.Equal(both.Str("error.code"), "ambiguous")
	is.Equal(both.Get("error.candidates"), 2.0)
}

// A person held whom the staff search does not show (here, a position named after the
// company but without its page, which the network's search goes by) decides nothing
// alone: a search that cannot see the one person it should have listed may miss
// others the address fits too. The lookup fails not_found, refunded.
func TestAPersonHeldTheSearchDoesNotShowDecidesNothingAlone(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	ada := servertest.Employee("ada-lovelace", "Ada", "Lovelace", servertest.AcmeURL, "Engineer", "London", "GB", false)
	ada.Positions[0].CompanyNetworkURL = nil
	e.Net.AddPerson(ada)
	e.StartWorkers()
	stored := e.WaitSettled(e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/in/ada-lovelace"}).Str("task.id"))
	is.Equal(stored.Str("task.status"), "succeeded")

	_, done := e.EmailLookup("alovelace@acme.com")
	is.Equal(done.Str("task.status"), "failed")
	is.Equal(done.Str("error.code"), "not_found")
	is.True(strings.Contains(done.Str("error.message"), "could not see everyone"))
	is.Equal(e.Net.Searches.Load(), int64(1)) // the staff was searched all the same

	// With the network down (the company stored, so it is still identified) the search
	// cannot say that nobody else fits: no answer.
	is.Equal(e.WaitSettled(e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"}).Str("task.id")).Str("task.status"), "succeeded")
	e.Net.SetDown(true)
	_, down := e.EmailLookup("ada.lovelace@acme.com")
	is.Equal(down.Str("error.code"), "provider_unavailable")
	is.True(strings.Contains(down.Str("error.message"), "while resolving the address"))
	is.Equal(e.Balance("acme").Balance, int64(100-1-1)) // the profile and the company; no email lookup
}

func TestAnAddressNobodyFitsIsNotFound(t *testing.T) {
	t.Parallel()
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.StartWorkers()
	for name, address := range map[string]string{
		"nobody of that name":      "zed.zebra@acme.com",
		"a former employee":        "jane.doe@acme.com",
		"no company at the domain": "jane.smith@nowhere.example",
		"no name in the address":   "12345@acme.com",
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			_, done := e.EmailLookup(address)
			is.Equal(done.Str("task.status"), "failed")
			is.Equal(done.Str("error.code"), "not_found")
			is.True(!done.Has("error.candidates"))
			is.True(!done.Has("data"))
		})
	}
	is := is.New(t)
	is.Equal(e.Balance("acme").Balance, int64(100)) // every miss refunded
}

func TestAnAmbiguousAddressAndItsHints(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.StartWorkers()

	// jsmith fits Jane, Jack and John: nothing in the address separates them.
	r, done := e.EmailLookup("jsmith@acme.com")
	is.Equal(r.Status, http.StatusAccepted)
	is.Equal(done.Str("task.status"), "failed")
	is.Equal(done.Str("error.code"), "ambiguous")
	is.Equal(done.Get("error.candidates"), 3.0)
	is.Equal(done.Get("error.hintsAccepted"), []any{"fullName", "title", "location"})
	is.True(!done.Has("data"))
	is.Equal(e.Balance("acme").Balance, int64(100)) // refunded
	searches, profiles := e.Net.Searches.Load(), e.Net.Profiles.Load()
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
		_, done := e.EmailLookup("jsmith@acme.com", tt.hint, tt.value)
		is.Equal(done.Str("task.status"), "succeeded")
		is.Equal(done.Str("data.network_url"), tt.want)
		is.Equal(done.Get("data.email_match"), map[string]any{"method": "resolved", "email": "jsmith@acme.com", "pattern": "flast", "source": "fake-network", "matched_by": nil})
	}

	// A hint that two of them match is still ambiguous; now only the full name helps.
	_, still := e.EmailLookup("jsmith@acme.com", "title", "Software Engineer")
	is.Equal(still.Str("error.code"), "ambiguous")
	is.Equal(still.Get("error.candidates"), 2.0)
	is.Equal(still.Get("error.hintsAccepted"), []any{"fullName"})
	_, still = e.EmailLookup("jsmith@acme.com", "location", "Berlin")
	is.Equal(still.Get("error.candidates"), 2.0)
	// Hints together narrow further.
	_, both := e.EmailLookup("jsmith@acme.com", "location", "Berlin", "fullName", "Jack")
	is.Equal(both.Str("data.network_url"), "https://www.linkedin.com/in/jack-smith")

	// A hint that matches none of them is a miss.
	_, none := e.EmailLookup("jsmith@acme.com", "fullName", "Jim Smith")
	is.Equal(none.Str("error.code"), "not_found")
	_, none = e.EmailLookup("jsmith@acme.com", "location", "Paris")
	is.Equal(none.Str("error.code"), "not_found")

	is.Equal(e.Net.Searches.Load(), searches) // no new search
	is.Equal(e.Net.Profiles.Load(), profiles) // no new retrieval

	// A tie broken by a hint does not make the address anybody's: without a hint it is
	// still ambiguous.
	_, again := e.EmailLookup("jsmith@acme.com")
	is.Equal(again.Str("error.code"), "ambiguous")
	is.Equal(again.Get("error.candidates"), 3.0)

	// Only what succeeded was charged: 6 successes of 3 credits.
	is.Equal(e.Balance("acme").Balance, int64(100-6*3))
}

func TestAnAmbiguousReplayIsTheSameTask(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.StartWorkers()
	first := e.Do("POST", "/v1/people/enrich", map[string]string{"email": "jsmith@acme.com"}, "Idempotency-Key", "k")
	e.WaitSettled(first.Str("task.id"))
	replay := e.Do("POST", "/v1/people/enrich", map[string]string{"email": "jsmith@acme.com"}, "Idempotency-Key", "k")
	is.Equal(replay.Status, http.StatusOK)
	is.Equal(replay.Str("task.id"), first.Str("task.id"))
	is.Equal(replay.Str("error.code"), "ambiguous")
	is.Equal(replay.Get("error.candidates"), 3.0)
	is.Equal(e.Net.Searches.Load(), int64(1))
	b := e.Balance("acme")
	is.Equal(b.Charged, int64(3))
	is.Equal(b.Balance, int64(100))
}

// Hints are not filters: an address that fits one person gets that person, whatever
// the hints say.
func TestHintsDoNotFilterASingleFit(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.StartWorkers()
	_, done := e.EmailLookup("jane.smith@acme.com", "fullName", "Somebody Else", "location", "Tokyo")
	is.Equal(done.Str("task.status"), "succeeded")
	is.Equal(done.Str("data.network_url"), "https://www.linkedin.com/in/jane-smith")

	// Jack is a nickname of John: john.smith fits John Smith and Jack Smith alike, and
	// the hint decides.
	_, both := e.EmailLookup("john.smith@acme.com")
	is.Equal(both.Get("error.candidates"), 2.0)
	_, done = e.EmailLookup("john.smith@acme.com", "fullName", "John Smith")
	is.Equal(done.Str("data.network_url"), "https://www.linkedin.com/in/john-smith")
}

func TestAStaleAddressIsRefreshedBeforeSettling(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.StartWorkers()
	_, first := e.EmailLookup("jane.smith@acme.com")
	is.Equal(first.Str("data.email_match.method"), "resolved")

	e.Clock.Add(31 * 24 * time.Hour)
	e.Net.AddPerson(servertest.Employee("jane-smith", "Jane", "Smith", servertest.AcmeURL, "Engineering Manager", "Berlin", "DE", false))
	r, done := e.EmailLookup("jane.smith@acme.com")
	is.Equal(r.Status, http.StatusAccepted) // older than 30 days: queued and refreshed
	is.Equal(done.Str("task.status"), "succeeded")
	is.Equal(done.Get("data.positions").([]any)[0].(map[string]any)["title"], "Engineering Manager")
	is.True(done.Str("data.last_enriched_at") > first.Str("data.last_enriched_at"))
	is.Equal(done.Str("data.email_match.method"), "exact")

	// Fresh again: inside the request.
	is.Equal(e.Do("POST", "/v1/people/enrich", map[string]string{"email": "jane.smith@acme.com"}).Status, http.StatusOK)
}

// A stale address whose refresh cannot complete still settles, with the stored record.
func TestAStaleAddressWithTheNetworkDownServesTheStoredRecord(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.StartWorkers()
	_, first := e.EmailLookup("jane.smith@acme.com")
	e.Clock.Add(31 * 24 * time.Hour)
	e.Net.SetDown(true)
	_, done := e.EmailLookup("jane.smith@acme.com")
	is.Equal(done.Str("task.status"), "succeeded")
	is.Equal(done.Str("data.last_enriched_at"), first.Str("data.last_enriched_at"))
	is.Equal(done.Str("data.email_match.method"), "exact")
}

// jsmith@ may stand for Acme's three Smiths. Allowed two retrievals, the lookup
// cannot check them all, so it confirms nobody and retrieves nothing (not_found,
// refunded); allowed three, it retrieves the three and finds them all current.
func TestEmailRetrievalsAreBounded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, func(c *server.Config) { c.EmailMaxRetrievals = 2 })
	servertest.AcmeNetwork(e)
	e.StartWorkers()
	_, done := e.EmailLookup("jsmith@acme.com")
	is.Equal(done.Str("error.code"), "not_found")
	is.True(strings.Contains(done.Str("error.message"), "more people at Acme the address may stand for than this server retrieves for one lookup (2)"))
	is.Equal(e.Net.Profiles.Load(), int64(0))
	is.Equal(e.Balance("acme").Balance, int64(100))

	e = servertest.NewEnv(t, func(c *server.Config) { c.EmailMaxRetrievals = 3 })
	servertest.AcmeNetwork(e)
	e.StartWorkers()
	_, done = e.EmailLookup("jsmith@acme.com")
	is.Equal(done.Str("error.code"), "ambiguous")
	is.Equal(done.Get("error.candidates"), float64(3))
	is.Equal(e.Net.Profiles.Load(), int64(3))
}

func TestTheNetworkDownIsProviderUnavailable(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.Net.SetDown(true)
	e.StartWorkers()
	_, done := e.EmailLookup("jane.smith@acme.com")
	is.Equal(done.Str("error.code"), "provider_unavailable")
	is.Equal(e.Balance("acme").Balance, int64(100))
}

var _ enrich.StaffSearcher = (*servertest.FakeNetwork)(nil)
