package server_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/server/servertest"

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
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t, servertest.AllowPrivateWebhooks, func(c *server.Config) { c.Sources = []enrich.Source{panickySource{}} })
	e.Net.AddCompany(servertest.Company("Acme", "acme.com"))
	rcv := servertest.NewReceiver(t)
	loopID, _ := e.CreateLoop("Companies", rcv.Srv.URL, "company")
	e.StartWorkers()

	var ids []string
	for i := range 2*e.Cfg.Workers + 1 {
		body := map[string]string{"domain": "boom" + string(rune('a'+i)) + ".com"}
		if i == 0 {
			body["loop_id"] = loopID
		}
		r := e.Do("POST", "/v1/companies/enrich", body)
		is.Equal(r.Status, http.StatusAccepted)
		ids = append(ids, r.Str("task.id"))
	}
	// An email lookup whose domain makes the source panic, and a profile lookup.
	ids = append(ids, e.Do("POST", "/v1/people/enrich", map[string]string{"email": "jane.doe@boomworks.com"}).Str("task.id"))
	ids = append(ids, e.Do("POST", "/v1/people/enrich", map[string]string{"networkUrl": "https://www.linkedin.com/in/boom"}).Str("task.id"))
	for _, id := range ids {
		done := e.WaitSettled(id)
		is.Equal(done.Str("task.status"), "failed")
		is.Equal(done.Str("error.code"), "internal_error")
		is.True(done.Str("error.message") != "")
		is.True(!done.Has("data"))
		is.Equal(e.LedgerKinds(id), []string{"charge", "refund"})
		// The stack is logged once, with the task's id.
		var lines int
		for _, l := range strings.Split(e.Logs.String(), "\n") {
			if strings.Contains(l, "recovered from a panic in task") && strings.Contains(l, id) {
				lines++
				is.True(strings.Contains(l, "assignment to entry in nil map"))
				is.True(strings.Contains(l, "survive_test.go")) // the stack
			}
		}
		is.Equal(lines, 1)
	}
	is.Equal(e.Balance("acme").Balance, int64(100))

	// The Loop was told, as of any failure.
	failed := rcv.Wait(t, 1)[0]
	is.Equal(failed.Header.Get("X-Service-Event"), "task.failed")

	// The server still serves, and the workers still work.
	ok := e.Do("POST", "/v1/companies/enrich", map[string]string{"domain": "acme.com"})
	is.Equal(ok.Status, http.StatusAccepted)
	is.Equal(e.WaitSettled(ok.Str("task.id")).Str("task.status"), "succeeded")
	metrics := e.Do("GET", "/metrics", nil)
	is.True(strings.Contains(string(metrics.Raw), `enrichd_panics_total{in="task"} `+strconv.Itoa(len(ids))))
}
