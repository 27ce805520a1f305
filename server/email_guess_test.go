package server_test

import (
	"testing"
	"time"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// A remembered address whose person has left Acme: the stale record is refreshed, the
// refresh shows the position ended, and the address is not served as theirs.
func TestARememberedAddressOfSomeoneWhoLeftIsNotServed(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.StartWorkers()
	_, first := e.EmailLookup("jane.smith@acme.com")
	is.Equal(first.Str("task.status"), "succeeded")

	e.Clock.Add(31 * 24 * time.Hour)
	e.Net.AddPerson(servertest.Employee("jane-smith", "Jane", "Smith", servertest.AcmeURL, "Software Engineer", "Berlin", "DE", true)) // left
	_, done := e.EmailLookup("jane.smith@acme.com")
	is.Equal(done.Str("task.status"), "failed") // a former employee is not the address's owner
}

// A retry decided against profiles gathered earlier must not write the old snapshot
// over a newer stored record of the same person.
func TestATieBreakDoesNotRollBackANewerStoredProfile(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.StartWorkers()
	_, amb := e.EmailLookup("jsmith@acme.com")
	is.Equal(amb.Str("error.code"), "ambiguous")

	e.Clock.Add(10 * 24 * time.Hour)
	e.Net.AddPerson(servertest.Employee("john-smith", "John", "Smith", servertest.AcmeURL, "VP Sales", "London", "GB", false))
	url := map[string]string{"networkUrl": "https://www.linkedin.com/in/john-smith"}
	fresh := e.WaitSettled(e.Do("POST", "/v1/people/enrich", url).Str("task.id"))
	is.Equal(fresh.Get("data.positions").([]any)[0].(map[string]any)["title"], "VP Sales")

	_, picked := e.EmailLookup("jsmith@acme.com", "fullName", "John Smith")
	is.Equal(picked.Str("task.status"), "succeeded")

	again := e.Do("POST", "/v1/people/enrich", url)
	got := e.WaitSettled(again.Str("task.id"))
	is.Equal(got.Get("data.positions").([]any)[0].(map[string]any)["title"], "VP Sales")
}
