package server_test

import (
	"testing"
	"time"

	"github.com/matryer/is"
)

// A remembered address whose person has left Acme: the stale record is refreshed, the
// refresh shows the position ended, and the address is not served as theirs.
func TestARememberedAddressOfSomeoneWhoLeftIsNotServed(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	e.startWorkers()
	_, first := e.emailLookup("jane.smith@acme.com")
	is.Equal(first.str("task.status"), "succeeded")

	e.clock.Add(31 * 24 * time.Hour)
	e.net.addPerson(employee("jane-smith", "Jane", "Smith", acmeURL, "Software Engineer", "Berlin", "DE", true)) // left
	_, done := e.emailLookup("jane.smith@acme.com")
	is.Equal(done.str("task.status"), "failed") // a former employee is not the address's owner
}

// A retry decided against profiles gathered earlier must not write the old snapshot
// over a newer stored record of the same person.
func TestATieBreakDoesNotRollBackANewerStoredProfile(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	e.startWorkers()
	_, amb := e.emailLookup("jsmith@acme.com")
	is.Equal(amb.str("error.code"), "ambiguous")

	e.clock.Add(10 * 24 * time.Hour)
	e.net.addPerson(employee("john-smith", "John", "Smith", acmeURL, "VP Sales", "London", "GB", false))
	url := map[string]string{"networkUrl": "https://www.linkedin.com/in/john-smith"}
	fresh := e.waitSettled(e.do("POST", "/v1/people/enrich", url).str("task.id"))
	is.Equal(fresh.get("data.positions").([]any)[0].(map[string]any)["title"], "VP Sales")

	_, picked := e.emailLookup("jsmith@acme.com", "fullName", "John Smith")
	is.Equal(picked.str("task.status"), "succeeded")

	again := e.do("POST", "/v1/people/enrich", url)
	got := e.waitSettled(again.str("task.id"))
	is.Equal(got.get("data.positions").([]any)[0].(map[string]any)["title"], "VP Sales")
}
