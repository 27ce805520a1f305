package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"enrichd/server/servertest"

	"github.com/matryer/is"
)

// An ambiguous email answer's page offers the retry the API allows: the address
// again with the hints its hintsAccepted names (and those it was sent with), as a
// form an admin sends; the retry settles on the one person the hint picks, charged
// once. A viewer is told an admin can; an answer no hint can settle offers nothing.
func TestDashboardAmbiguousAnswerOffersARetryWithHints(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	servertest.AcmeNetwork(e)
	e.StartWorkers()
	admin, viewer := e.SignIn("acme", "admin"), e.SignIn("acme", "viewer")

	// jsmith with a title two of the three Smiths have: only a full name tells them apart.
	_, done := e.EmailLookup("jsmith@acme.com", "title", "Software Engineer")
	is.Equal(done.Str("error.code"), "ambiguous")
	is.Equal(done.Get("error.hintsAccepted"), []any{"fullName"})
	p := admin.Get("/dashboard/tasks/" + done.Str("task.id"))
	is.Equal(p.Status, http.StatusOK)
	_, form, ok := strings.Cut(p.Body, `<form method="post" action="/dashboard/try" id="retry-hints"`)
	is.True(ok)
	form, _, _ = strings.Cut(form, "</form>")
	is.True(strings.Contains(form, `<input type="hidden" name="kind" value="person_email">`))
	is.True(strings.Contains(form, `<input type="hidden" name="email" value="jsmith@acme.com">`))
	is.True(strings.Contains(form, `<span>Full name <span class="muted">· tells them apart</span></span>`))
	is.True(strings.Contains(form, `<span>Title</span>`))
	is.True(strings.Contains(form, `name="fullName" value=""`))
	is.True(strings.Contains(form, `name="title" value="Software Engineer"`)) // as sent
	is.True(!strings.Contains(form, `name="location"`))                       // neither sent nor of help
	v := viewer.Get("/dashboard/tasks/" + done.Str("task.id"))
	is.True(!v.Has(`id="retry-hints"`))
	is.True(v.Has(`id="retry-hints-viewer"`))

	// The form as the browser sends it, the full name filled in.
	before := e.Balance("acme").Balance
	sent := admin.Post("/dashboard/try", url.Values{"kind": {"person_email"}, "email": {"jsmith@acme.com"},
		"fullName": {"Jack Smith"}, "title": {"Software Engineer"}})
	is.Equal(sent.Status, http.StatusSeeOther)
	id := strings.TrimPrefix(sent.Location[:strings.IndexByte(sent.Location, '?')], "/dashboard/tasks/")
	retried := e.WaitSettled(id)
	is.Equal(retried.Str("task.status"), "succeeded")
	is.Equal(retried.Str("data.network_url"), "https://www.linkedin.com/in/jack-smith")
	is.Equal(e.Balance("acme").Balance, before-3)

	// No hint can help: the page says so and offers nothing to send.
	e.Net.AddPerson(servertest.Employee("max-muster", "Max", "Muster", servertest.AcmeURL, "Designer", "Berlin", "DE", false))
	e.Net.AddPerson(servertest.Employee("max-muster-2", "Max", "Muster", servertest.AcmeURL, "Designer", "Berlin", "DE", false))
	_, twins := e.EmailLookup("max.muster@acme.com")
	is.Equal(twins.Str("error.code"), "ambiguous")
	is.Equal(twins.Get("error.hintsAccepted"), []any{})
	p = admin.Get("/dashboard/tasks/" + twins.Str("task.id"))
	is.True(p.Has("No hint can tell them apart."))
	is.True(!p.Has(`id="retry-hints"`))
}
