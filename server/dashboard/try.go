package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
)

// tryKind is one thing "Try it" can look up.
type tryKind struct {
	Value, Label string
	Lookup       enrich.Lookup
}

// Cost is what the lookup charges.
func (k tryKind) Cost() int64 { return k.Lookup.Cost() }

var tryKinds = []tryKind{
	{"company_domain", "Company by domain", enrich.LookupDomain},
	{"company_url", "Company by page URL", enrich.LookupCompanyURL},
	{"person_url", "Person by profile URL", enrich.LookupPersonURL},
	{"person_email", "Person by work email", enrich.LookupEmail},
}

// tryForm is the "Try it" form as sent, shown back with what went wrong.
type tryForm struct {
	Kind, Domain, NetworkURL, Email, FullName, Title, Location string
	Error                                                      string
	Balance                                                    int64
	Kinds                                                      []tryKind
}

func (s *Dashboard) renderTry(w http.ResponseWriter, r *http.Request, status int, f tryForm) {
	b, err := s.db.CreditBalance(r.Context(), dashUser(r).OrgName)
	if err != nil {
		s.dashError(w, r, err)
		return
	}
	f.Balance, f.Kinds = b.Balance, tryKinds
	if f.Kind == "" {
		f.Kind = tryKinds[0].Value
	}
	s.render(w, r, status, "try", view{Title: "Try it", Section: "try", Notice: notice(r), Data: f})
}

func handleTryPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.renderTry(w, r, http.StatusOK, tryForm{})
	})
}

// handleTry enriches from the form: the input checked as the API checks it, then the
// same task, charge and queue as POST /v1/companies/enrich or /v1/people/enrich.
// Whatever is refused is refused before anything is charged, and shown on the form.
func handleTry(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := parseForm(w, r, enrich.MaxURL); err != nil {
			s.tryRefused(w, r, readTryForm(r), err)
			return
		}
		f := readTryForm(r)
		tr, err := s.tryRequest(r, f.Kind)
		if err != nil {
			s.tryRefused(w, r, f, err)
			return
		}
		u := dashUser(r)
		tr.OrgID = u.OrgID
		res, err := s.srv.SubmitTask(r.Context(), tr)
		if err != nil {
			s.tryRefused(w, r, f, err)
			return
		}
		t := res.Task
		// The notice says only what stays true: the task page's cards show the charge,
		// the refund and the balance as they are, and a queued task may yet fail.
		var msg string
		switch t.Status {
		case store.StatusFailed:
			msg = fmt.Sprintf("The task failed at once; its %s refunded.", creditsWere(t.CreditsCharged))
		case store.StatusSucceeded:
			msg = fmt.Sprintf("Done: charged %s.", credits(t.CreditsCharged))
		default:
			msg = fmt.Sprintf("Sent: charged %s, refunded if the task fails.", credits(t.CreditsCharged))
		}
		seeOther(w, r, "/dashboard/tasks/"+url.PathEscape(t.ID), msg)
	})
}

// tryRequest builds the task the form asks for, with the input normalised as the API
// normalises it, or the API's error for it.
func (s *Dashboard) tryRequest(r *http.Request, kind string) (server.TaskRequest, error) {
	company := func(c server.CompanyRequest) (server.TaskRequest, error) {
		return s.srv.CompanyTask(c)
	}
	person := func(p server.PersonRequest) (server.TaskRequest, error) {
		p.FullName, p.Title, p.Location = formValue(r, "fullName"), formValue(r, "title"), formValue(r, "location")
		return s.srv.PersonTask(p)
	}
	switch kind {
	case "company_domain":
		return company(server.CompanyRequest{Domain: formValue(r, "domain")})
	case "company_url":
		return company(server.CompanyRequest{NetworkURL: formValue(r, "networkUrl")})
	case "person_url":
		return person(server.PersonRequest{NetworkURL: formValue(r, "networkUrl")})
	case "person_email":
		return person(server.PersonRequest{Email: formValue(r, "email")})
	}
	return server.TaskRequest{}, enrich.Errorf(enrich.KindInvalid, "Choose what to look up: a company by domain or page URL, or a person by profile URL or work email.")
}

// tryRefused shows the form again with why it was refused, in the status the API
// would have answered; nothing was charged.
func (s *Dashboard) tryRefused(w http.ResponseWriter, r *http.Request, f tryForm, err error) {
	var e *enrich.Error
	if !errors.As(err, &e) || e.Kind == enrich.KindInternal {
		s.dashError(w, r, err)
		return
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(e.RetryAfter))
	}
	f.Error = e.Message
	s.renderTry(w, r, server.StatusOf[e.Kind], f)
}

// readTryForm is the form as sent, each field bounded for showing back.
func readTryForm(r *http.Request) tryForm {
	v := func(name string) string { return server.Clip(r.PostFormValue(name), enrich.MaxURL) }
	return tryForm{Kind: server.Clip(r.PostFormValue("kind"), 40), Domain: v("domain"), NetworkURL: v("networkUrl"), Email: v("email"),
		FullName: v("fullName"), Title: v("title"), Location: v("location")}
}
