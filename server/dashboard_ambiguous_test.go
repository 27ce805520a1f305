package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// An ambiguous email answer's page offers the retry the API allows: the address
// again with the hints its hintsAccepted names (and those it was sent with), as a
// form an admin sends; the retry settles on the one person the hint picks, charged
// once. A viewer is told an admin can; an answer no hint can settle offers nothing.
func TestDashboardAmbiguousAnswerOffersARetryWithHints(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	acmeNetwork(e)
	e.startWorkers()
	admin, viewer := e.signIn("acme", "admin"), e.signIn("acme", "viewer")

	// jsmith with a title two of the three Smiths have: only a full name tells them apart.
	_, done := e.emailLookup("jsmith@acme.com", "title", "Software Engineer")
	is.Equal(done.str("error.code"), "ambiguous")
	is.Equal(done.get("error.hintsAccepted"), []any{"fullName"})
	p := admin.get("/dashboard/tasks/" + done.str("task.id"))
	is.Equal(p.status, http.StatusOK)
	_, form, ok := strings.Cut(p.body, `<form method="post" action="/dashboard/try" id="retry-hints"`)
	is.True(ok)
	form, _, _ = strings.Cut(form, "</form>")
	is.True(strings.Contains(form, `<input type="hidden" name="kind" value="person_email">`))
	is.True(strings.Contains(form, `<input type="hidden" name="email" value="jsmith@acme.com">`))
	is.True(strings.Contains(form, `<span>Full name <span class="muted">· tells them apart</span></span>`))
	is.True(strings.Contains(form, `<span>Title</span>`))
	is.True(strings.Contains(form, `name="fullName" value=""`))
	is.True(strings.Contains(form, `name="title" value="Software Engineer"`)) // as sent
	is.True(!strings.Contains(form, `name="location"`))                       // neither sent nor of help
	v := viewer.get("/dashboard/tasks/" + done.str("task.id"))
	is.True(!v.has(`id="retry-hints"`))
	is.True(v.has(`id="retry-hints-viewer"`))

	// The form as the browser sends it, the full name filled in.
	before := e.balance("acme").Balance
	sent := admin.post("/dashboard/try", url.Values{"kind": {"person_email"}, "email": {"jsmith@acme.com"},
		"fullName": {"Jack Smith"}, "title": {"Software Engineer"}})
	is.Equal(sent.status, http.StatusSeeOther)
	id := strings.TrimPrefix(sent.location[:strings.IndexByte(sent.location, '?')], "/dashboard/tasks/")
	retried := e.waitSettled(id)
	is.Equal(retried.str("task.status"), "succeeded")
	is.Equal(retried.str("data.network_url"), "https://www.linkedin.com/in/jack-smith")
	is.Equal(e.balance("acme").Balance, before-3)

	// No hint can help: the page says so and offers nothing to send.
	e.net.addPerson(employee("max-muster", "Max", "Muster", acmeURL, "Designer", "Berlin", "DE", false))
	e.net.addPerson(employee("max-muster-2", "Max", "Muster", acmeURL, "Designer", "Berlin", "DE", false))
	_, twins := e.emailLookup("max.muster@acme.com")
	is.Equal(twins.str("error.code"), "ambiguous")
	is.Equal(twins.get("error.hintsAccepted"), []any{})
	p = admin.get("/dashboard/tasks/" + twins.str("task.id"))
	is.True(p.has("No hint can tell them apart."))
	is.True(!p.has(`id="retry-hints"`))
}
