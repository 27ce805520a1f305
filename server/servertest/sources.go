package servertest

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
	"enrichd/store/storetest"
	"enrichd/wire"
)

// keyedSource is a vendor source as GET /v1/sources sees one: it takes an API key.
type keyedSource struct {
	enrich.Source
	name string
}

func (k keyedSource) Name() string { return k.name }

func (k keyedSource) KeyEnv() string { return "TEST_" + k.name + "_KEY" }

func (k keyedSource) Prices() enrich.Prices { return enrich.Prices{} }

// WithPricedVendors adds priced, keyed sources after the fake network and the dataset.
func WithPricedVendors(names ...string) func(*server.Config) {
	return func(c *server.Config) {
		for _, n := range names {
			c.Sources = append(c.Sources, keyedSource{Source: NewFakeNetwork(), name: n})
		}
	}
}

// Ask is one ask of a source, as the pipeline makes it: admitted, then settled.
func (e *Env) Ask(org string, call enrich.SourceCall) string {
	e.T.Helper()
	ctx := context.Background()
	b, skip := e.Work.Spend().Admit(ctx, org, call.Name, call.OwnKey)
	if skip != "" {
		return skip
	}
	e.Work.Spend().Spent(ctx, org, call, b)
	return ""
}

// Admit is an ask of a source admitted and left under way, as a process killed while
// the vendor answers leaves it; "" when it was not admitted.
func Admit(t *testing.T, spend enrich.Spend, org, source string) *enrich.Booking {
	t.Helper()
	b, skip := spend.Admit(context.Background(), org, source, false)
	if skip != "" {
		return nil
	}
	return b
}

// SourcesOf reads GET /v1/sources with key, by source name.
func (e *Env) SourcesOf(key string) (month string, by map[string]server.SourceReport, order []string) {
	e.T.Helper()
	r := e.Do("GET", "/v1/sources", nil, "Authorization", "Bearer "+key)
	if r.Status != 200 {
		e.T.Fatalf("GET /v1/sources: %d %s", r.Status, r.Raw)
	}
	var rep server.SourcesReport
	if err := json.Unmarshal(r.Raw, &rep); err != nil {
		e.T.Fatal(err)
	}
	by = map[string]server.SourceReport{}
	for _, s := range rep.Sources {
		by[s.Name] = s
		order = append(order, s.Name)
	}
	return rep.Month, by, order
}

// ReplicaOf starts another replica of e's server: a handle of its own on the same
// database (the same SQLite file, or the same PostgreSQL database), its own
// server.New and its own listener, answering to e's key.
func ReplicaOf(e *Env) *Env {
	e.T.Helper()
	db, err := store.Open(context.Background(), e.Path, storetest.Schema(e.T), store.WithSubjectKey(storetest.SubjectKey))
	if err != nil {
		e.T.Fatal(err)
	}
	db.Now = e.Clock.Now
	r := &Env{T: e.T, Path: e.Path, DB: db, Cfg: e.Cfg, Clock: e.Clock, Net: e.Net, Logs: &syncBuffer{}, Key: e.Key, OrgID: e.OrgID}
	cfg := e.Cfg
	cfg.Sources = append([]enrich.Source{e.Net, db.Dataset()}, e.Cfg.Sources...)
	r.Srv, r.Work = wire.New(db, cfg)
	r.HTTP = httptest.NewServer(r.Srv)
	e.T.Cleanup(r.Close)
	return r
}
