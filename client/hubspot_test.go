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
