package server_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"enrichd/enrich"
	"enrichd/server"

	"github.com/matryer/is"
)

// panickySource is a source with a bug: any question about a subject named "boom..."
// panics; it knows nothing else.
type panickySource struct{}

func (panickySource) Name() string { return "panicky" }

func (panickySource) ask(subject string) error {
	if strings.Contains(subject, "boom") {
		var m map[string]int
		m[subject]++ // assignment to entry in nil map
	}
	return enrich.ErrNotFound
}

func (p panickySource) CompanyByDomain(_ context.Context, _ *enrich.Tally, d string) (*enrich.Company, error) {
	return nil, p.ask(d)
}

func (p panickySource) CompanyByURL(_ context.Context, _ *enrich.Tally, u string) (*enrich.Company, error) {
	return nil, p.ask(u)
}

func (p panickySource) PersonByURL(_ context.Context, _ *enrich.Tally, u string) (*enrich.Person, error) {
	return nil, p.ask(u)
}

// A source that panics fails the task it was asked for, as internal_error and
// refunded; the panic is logged once with its stack, and the workers go on: more
// panics than there are workers, then tasks that succeed.
func TestAPanickingSourceFailsOnlyItsTask(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, allowPrivateWebhooks, func(c *server.Config) { c.Sources = []enrich.Source{panickySource{}} })
	e.net.addCompany(company("Acme", "acme.com"))
	rcv := newReceiver(t)
	loopID, _ := e.createLoop("Companies", rcv.srv.URL, "company")
	e.startWorkers()

	var ids []string
	for i := range 2*e.cfg.Workers + 1 {
		body := map[string]string{"domain": "boom" + string(rune('a'+i)) + ".com"}
		if i == 0 {
			body["loop_id"] = loopID
		}
		r := e.do("POST", "/v1/companies/enrich", body)
		is.Equal(r.status, http.StatusAccepted)
		ids = append(ids, r.str("task.id"))
	}
	// An email lookup whose domain makes the source panic, and a profile lookup.
	ids = append(ids, e.do("POST", "/v1/people/enrich", map[string]string{"email": "jane.doe@boomworks.com"}).str("task.id"))
	ids = append(ids, e.do("POST", "/v1/people/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/in/boom"}).str("task.id"))
	for _, id := range ids {
		done := e.waitSettled(id)
		is.Equal(done.str("task.status"), "failed")
		is.Equal(done.str("error.code"), "internal_error")
		is.True(done.str("error.message") != "")
		is.True(!done.has("data"))
		is.Equal(e.ledgerKinds(id), []string{"charge", "refund"})
		// The stack is logged once, with the task's id.
		var lines int
		for _, l := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(l, "recovered from a panic in task") && strings.Contains(l, id) {
				lines++
				is.True(strings.Contains(l, "assignment to entry in nil map"))
				is.True(strings.Contains(l, "survive_test.go")) // the stack
			}
		}
		is.Equal(lines, 1)
	}
	is.Equal(e.balance("acme").Balance, int64(100))

	// The Loop was told, as of any failure.
	failed := rcv.wait(t, 1)[0]
	is.Equal(failed.header.Get("X-Service-Event"), "task.failed")

	// The server still serves, and the workers still work.
	ok := e.do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"})
	is.Equal(ok.status, http.StatusAccepted)
	is.Equal(e.waitSettled(ok.str("task.id")).str("task.status"), "succeeded")
	metrics := e.do("GET", "/metrics", nil)
	is.True(strings.Contains(string(metrics.raw), `enrichd_panics_total{in="task"} `+strconv.Itoa(len(ids))))
}
