package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

// crm is a HubSpot answering, in its published shapes, what a HubSpot Loop asks: a
// page of objects, a search by EQ, a create, a read and an update of one object.
type crm struct {
	mu      sync.Mutex
	token   string
	next    int
	objects map[string]map[string]map[string]string // companies, contacts: id: properties
}

func (c *crm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer "+c.token {
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"status":"error","message":"Authentication credentials not found.","correlationId":"e2e","category":"INVALID_AUTHENTICATION"}`))
		return
	}
	if strings.HasPrefix(r.URL.Path, "/crm/v3/properties/") && r.Method == http.MethodPost {
		w.WriteHeader(http.StatusCreated) // a custom property a Loop makes
		w.Write([]byte(`{}`))
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/crm/v3/objects/"), "/")
	var body struct {
		Properties   json.RawMessage
		FilterGroups []struct {
			Filters []struct{ PropertyName, Value string }
		}
	}
	json.NewDecoder(r.Body).Decode(&body)
	var props map[string]string
	json.Unmarshal(body.Properties, &props)
	objects := c.objects[parts[0]]
	show := func(id string) map[string]any {
		return map[string]any{"id": id, "properties": c.objects[parts[0]][id], "archived": false}
	}
	switch {
	case len(parts) == 1 && r.Method == http.MethodGet:
		w.Write([]byte(`{"results":[]}`))
	case len(parts) == 2 && parts[1] == "search":
		results := []any{}
		for id, p := range objects {
			if f := body.FilterGroups[0].Filters[0]; strings.EqualFold(p[f.PropertyName], f.Value) {
				results = append(results, show(id))
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"total": len(results), "results": results})
	case len(parts) == 1 && r.Method == http.MethodPost:
		c.next++
		id := fmt.Sprint(c.next)
		objects[id] = props
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(show(id))
	case len(parts) == 2 && objects[parts[1]] != nil:
		for k, v := range props {
			objects[parts[1]][k] = v
		}
		json.NewEncoder(w).Encode(show(parts[1]))
	default:
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"status":"error","message":"resource not found","category":"OBJECT_NOT_FOUND"}`))
	}
}

func (c *crm) get(objects, id string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for k, v := range c.objects[objects][id] {
		out[k] = v
	}
	return out
}

// A company Loop and a people Loop deliver into HubSpot through the real serve, at
// the address ENRICHD_HUBSPOT_URL gives: the company a person typed the name of keeps
// it and gets the blanks filled, the contact HubSpot did not have is created once.
func TestHubSpotLoopsDeliverThroughServe(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const token = "pat-na1-e2e-0000-4a2b"
	hubspot := &crm{token: token, next: 700, objects: map[string]map[string]map[string]string{
		"companies": {"700": {"domain": "acme.com", "name": "ACME (typed by sales)"}}, "contacts": {}}}
	srv := httptest.NewServer(hubspot)
	defer srv.Close()

	db := newDB(t)
	key := strings.TrimSpace(mustCLI(t, "keys", "create", "--org", "acme", "--db", db))
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "100", "--db", db)
	mustCLI(t, "import", writeFile(t, `{"type":"company","name":"Acme","domain":"acme.com","employee_count":42,"about":"Rockets."}`+"\n"+goodPerson+"\n"), "--db", db)
	p := startBinaryServe(t, enrichdBinary(t), "serve", []string{"ENRICHD_HUBSPOT_URL=" + srv.URL}, "--db", db, "--sources", "dataset", "--workers", "2")
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	loop := func(name, objectType string) string {
		status, _, raw := call(t, client, http.MethodPost, p.base+"/v1/loops", key,
			`{"name":"`+name+`","object_type":"`+objectType+`","destination":{"kind":"hubspot","token":"`+token+`"}}`)
		is.Equal(status, http.StatusCreated)
		is.True(!strings.Contains(raw, token))
		var l struct{ Data struct{ ID string } }
		is.NoErr(json.Unmarshal([]byte(raw), &l))
		return l.Data.ID
	}
	delivered := func(loopID string) string {
		deadline := time.Now().Add(patience)
		for {
			_, _, raw := call(t, client, http.MethodGet, p.base+"/v1/loops/"+loopID+"/deliveries", key, "")
			var list struct {
				Data []struct {
					Status  string
					Summary *string
				}
			}
			is.NoErr(json.Unmarshal([]byte(raw), &list))
			if len(list.Data) > 0 && list.Data[0].Status == "succeeded" && list.Data[0].Summary != nil {
				return *list.Data[0].Summary
			}
			if time.Now().After(deadline) {
				t.Fatalf("not delivered: %s", raw)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	companies, people := loop("HubSpot companies", "company"), loop("HubSpot people", "person")

	status, _, _ := call(t, client, http.MethodPost, p.base+"/v1/loops/"+companies+"/run", key, `{"domain":"acme.com"}`)
	is.True(status == http.StatusOK || status == http.StatusAccepted)
	contains(t, delivered(companies), "company 700: filled description, numberofemployees; kept the values already there in name")
	is.Equal(hubspot.get("companies", "700"), map[string]string{"domain": "acme.com", "name": "ACME (typed by sales)",
		"description": "Rockets.", "numberofemployees": "42"})

	status, _, _ = call(t, client, http.MethodPost, p.base+"/v1/loops/"+people+"/run", key, `{"email":"jane@acme.com"}`)
	is.True(status == http.StatusOK || status == http.StatusAccepted)
	contains(t, delivered(people), "created contact 701 with ")
	got := hubspot.get("contacts", "701")
	is.Equal(got["email"], "jane@acme.com")
	is.Equal(got["jobtitle"], "CEO")
	is.Equal(got["company"], "Acme")
}
