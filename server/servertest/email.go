package servertest

import (
	"net/http"
)

const AcmeURL = "https://www.linkedin.com/company/acme"

// AcmeNetwork puts Acme (acme.com) on the fake network with three Smiths, two of whom
// share a title and a city, and a Jane Doe who has left.
func AcmeNetwork(e *Env) {
	e.Net.AddCompany(Company("Acme", "acme.com"))
	e.Net.AddPerson(Employee("jane-smith", "Jane", "Smith", AcmeURL, "Software Engineer", "Berlin", "DE", false))
	e.Net.AddPerson(Employee("jack-smith", "Jack", "Smith", AcmeURL, "Software Engineer", "Berlin", "DE", false))
	e.Net.AddPerson(Employee("john-smith", "John", "Smith", AcmeURL, "Sales Director", "London", "GB", false))
	e.Net.AddPerson(Employee("jane-doe", "Jane", "Doe", AcmeURL, "Designer", "Paris", "FR", true))
}

// EmailLookup asks for an address, with hints as name, value pairs, and waits for
// the task to settle.
func (e *Env) EmailLookup(address string, hints ...string) (enqueued, settled *Response) {
	e.T.Helper()
	body := map[string]string{"email": address}
	for i := 0; i+1 < len(hints); i += 2 {
		body[hints[i]] = hints[i+1]
	}
	enqueued = e.Do("POST", "/v1/people/enrich", body)
	if enqueued.Status != http.StatusOK && enqueued.Status != http.StatusAccepted {
		e.T.Fatalf("POST %v: %d %s", body, enqueued.Status, enqueued.Raw)
	}
	return enqueued, e.WaitSettled(enqueued.Str("task.id"))
}
