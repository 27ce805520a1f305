package client

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"enrichd/enrich"
	"enrichd/secret"
	"enrichd/server"
)

// TestHubSpotLoop: a Loop writing into HubSpot, created with its token (refused: the
// error's code says so), its deliveries' summaries read, its token replaced.
func TestHubSpotLoop(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const token = "pat-na1-client-test-9f3c"
	var mu sync.Mutex
	created := map[string]string{}
	hubspot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"status":"error","message":"Authentication credentials not found.","correlationId":"x","category":"INVALID_AUTHENTICATION"}`))
			return
		}
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/crm/v3/objects/companies":
			w.Write([]byte(`{"results":[]}`))
		case r.Method == http.MethodPost && r.URL.Path == "/crm/v3/objects/companies/search":
			w.Write([]byte(`{"total":0,"results":[]}`))
		case r.Method == http.MethodPost && r.URL.Path == "/crm/v3/properties/companies":
			// The unique property enrichd keeps a company's domain in, made once.
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"name":"enrichd_domain","hasUniqueValue":true}`))
		case r.Method == http.MethodPost && r.URL.Path == "/crm/v3/objects/companies":
			var body struct{ Properties map[string]string }
			json.NewDecoder(r.Body).Decode(&body)
			created = body.Properties
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"id":"901","properties":{},"archived":false}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"status":"error","message":"not found","category":"OBJECT_NOT_FOUND"}`))
		}
	}))
	defer hubspot.Close()
	box, _, err := secret.LoadOrCreate(filepath.Join(t.TempDir(), "secret-key"))
	is.NoErr(err)
	e := newEnv(t, func(c *server.Config) { c.HubSpotURL, c.Secrets = hubspot.URL, box })
	e.src.addCompany("Acme", "acme.com")
	e.startWorkers()
	ctx := t.Context()

	_, err = e.c.CreateLoop(ctx, NewLoop{Name: "HubSpot", Destination: &NewDestination{Kind: "hubspot", Token: "pat-na1-wrong"}})
	is.True(IsCode(err, "hubspot_token_refused"))
	l, err := e.c.CreateLoop(ctx, NewLoop{Name: "HubSpot", Destination: &NewDestination{Kind: "hubspot", Token: token, Refresh: true}})
	is.NoErr(err)
	is.Equal(l.Destination.Kind, "hubspot")
	is.Equal(l.Destination.TokenLast4, "…9f3c")
	is.Equal(*l.Destination.Refresh, true)
	is.Equal(l.Destination.Secret, "")

	q, err := e.c.RunLoop(ctx, l.ID, RunInput{Domain: "acme.com"})
	is.NoErr(err)
	_, err = e.c.WaitTask(ctx, q.Task.ID)
	is.NoErr(err)
	var ds *DeliveryList
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ds, err = e.c.Deliveries(ctx, l.ID, DeliveryListOptions{}); err == nil && len(ds.Data) == 1 && ds.Data[0].Status == "succeeded" {
			break
		}
	}
	is.Equal(ds.Data[0].Status, "succeeded")
	is.True(ds.Data[0].Summary != nil && strings.HasPrefix(*ds.Data[0].Summary, "created company 901 with "))
	mu.Lock()
	is.Equal(created["domain"], "acme.com")
	mu.Unlock()

	bad := "pat-na1-other"
	_, err = e.c.UpdateLoop(ctx, l.ID, LoopPatch{Destination: &DestinationPatch{Token: &bad}})
	is.True(IsCode(err, "hubspot_token_refused"))
	off := false
	l, err = e.c.UpdateLoop(ctx, l.ID, LoopPatch{Destination: &DestinationPatch{Refresh: &off}})
	is.NoErr(err)
	is.Equal(*l.Destination.Refresh, false)
	is.Equal(l.Destination.TokenLast4, "…9f3c") // kept
}

// TestHubSpotLoopInAnExport: a person Loop writes Jane's contact into HubSpot; her
// export names the contact under the Loop, and the properties enrichd wrote, without
// their values, which enrichd does not keep.
func TestHubSpotLoopInAnExport(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const token = "pat-na1-client-test-7d21"
	hubspot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Header.Get("Authorization") != "Bearer "+token:
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"status":"error","message":"Authentication credentials not found.","correlationId":"x","category":"INVALID_AUTHENTICATION"}`))
		case r.Method == http.MethodGet && r.URL.Path == "/crm/v3/objects/contacts":
			w.Write([]byte(`{"results":[]}`))
		case r.Method == http.MethodPost && r.URL.Path == "/crm/v3/objects/contacts/search":
			w.Write([]byte(`{"total":0,"results":[]}`))
		case r.Method == http.MethodPost && r.URL.Path == "/crm/v3/objects/contacts":
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"id":"7301","properties":{},"archived":false}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"status":"error","message":"not found","category":"OBJECT_NOT_FOUND"}`))
		}
	}))
	defer hubspot.Close()
	box, _, err := secret.LoadOrCreate(filepath.Join(t.TempDir(), "secret-key"))
	is.NoErr(err)
	e := newEnv(t, func(c *server.Config) { c.HubSpotURL, c.Secrets = hubspot.URL, box })
	_, err = e.db.Import(t.Context(), strings.NewReader(`{"type":"person","network_url":"https://www.linkedin.com/in/jane-doe",`+
		`"full_name":"Jane Doe","first_name":"Jane","last_name":"Doe","city":"Berlin","country_code":"DE",`+
		`"positions":[{"title":"CTO","company_name":"Acme","is_current":true}],"emails":["jane@acme.com"],`+
		`"last_enriched_at":"`+e.clock.Now().Add(-time.Hour).Format(time.RFC3339)+`"}`), enrich.Normalizer{})
	is.NoErr(err)
	e.startWorkers()
	ctx := t.Context()
	l, err := e.c.CreateLoop(ctx, NewLoop{Name: "HubSpot people", ObjectType: "person", Destination: &NewDestination{Kind: "hubspot", Token: token}})
	is.NoErr(err)
	q, err := e.c.RunLoop(ctx, l.ID, RunInput{Email: "jane@acme.com"})
	is.NoErr(err)
	_, err = e.c.WaitTask(ctx, q.Task.ID)
	is.NoErr(err)
	var ds *DeliveryList
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ds, err = e.c.Deliveries(ctx, l.ID, DeliveryListOptions{}); err == nil && len(ds.Data) == 1 && ds.Data[0].Status == "succeeded" {
			break
		}
	}
	is.Equal(ds.Data[0].Status, "succeeded")

	x, err := e.c.ExportPerson(ctx, PersonRef{Email: "jane@acme.com"})
	is.NoErr(err)
	is.Equal(len(x.Loops), 1)
	is.Equal(len(x.Loops[0].HubSpot), 1)
	o := x.Loops[0].HubSpot[0]
	is.Equal(o.ObjectType, "contacts")
	is.Equal(o.ObjectID, "7301")
	is.True(len(o.PropertiesWritten) > 0)
	is.True(strings.HasPrefix(o.Values, "not kept"))
}
