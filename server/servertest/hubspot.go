package servertest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"enrichd/secret"
	"enrichd/server"
)

// FakeHubSpot serves the parts of HubSpot's CRM v3 API a HubSpot Loop calls, in its
// published shapes: objects listed, searched (EQ and IN filters, a page of limit
// results, 200 at most, the next by after), read, created and
// updated, one at a time and in batches (batch/read by id or a unique property,
// batch/create and batch/update of 100 inputs at most, a batch refused whole for one
// input as HubSpot does, 207 multi-status with the inputs that failed),
// properties created, contacts deleted under GDPR; its error body ({"status": "error",
// "message", "correlationId", "category"}) with 401 for a token it does not know, 404,
// 409 for a contact whose email is taken, and 429 with Retry-After or its rate-limit
// headers when told to.
type FakeHubSpot struct {
	Srv *httptest.Server
	Mu  sync.Mutex
	// token is the one private app token it accepts.
	token   string
	Objects map[string]map[string]map[string]string // by type (companies, contacts), id: properties
	props   map[string]bool                         // type/name of the custom properties created
	unique  map[string]bool                         // those of them with unique values (hasUniqueValue)
	nextID  int
	// fail answers the next requests with these statuses, in order, instead of serving
	// them; failAfterCreate does a create, then answers 500 (an answer lost).
	fail            []int
	FailAfterCreate bool
	Calls           []string // "METHOD path" of every request served
	// missing are properties the portal does not have: a write naming one is 400.
	Missing map[string]bool
	// searchLags hides the objects created through the API from its search, as
	// HubSpot's search shows a new object only seconds later.
	SearchLags bool
	fresh      map[string]bool
	// Refuse answers the next create or update with a 400 VALIDATION_ERROR of this
	// message, as HubSpot refuses a value it does not take, quoting it.
	Refuse      string
	GdprDeleted []string
	// down answers everything 503 while set.
	down bool
	// InvalidEmails are addresses HubSpot refuses as invalid (400 INVALID_EMAIL), a
	// batch holding one refused whole.
	InvalidEmails map[string]bool
	// FailUpdate are the ids whose update in a batch fails alone (207).
	FailUpdate map[string]bool
}

func (f *FakeHubSpot) SetDown(down bool) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.down = down
	f.Calls = nil
}

func NewFakeHubSpot(t *testing.T, token string) *FakeHubSpot {
	f := &FakeHubSpot{token: token, Objects: map[string]map[string]map[string]string{"companies": {}, "contacts": {}},
		props: map[string]bool{}, unique: map[string]bool{}, nextID: 100}
	f.Srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Srv.Close)
	return f
}

// holding is the id of the object of the type whose property holds value, "" if none.
func (f *FakeHubSpot) holding(objects, property, value string) string {
	for id, props := range f.Objects[objects] {
		if props[property] == value {
			return id
		}
	}
	return ""
}

func hubspotError(w http.ResponseWriter, status int, category, msg string) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"status": "error", "message": msg,
		"correlationId": "b8c1a7b4-5a3e-4a8e-9d55-0c6a3b0a1f00", "category": category})
}

func (f *FakeHubSpot) Put(objects string, props map[string]string) string {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.nextID++
	id := fmt.Sprint(f.nextID)
	f.Objects[objects][id] = props
	return id
}

// Object is a copy of the properties HubSpot holds for an object.
func (f *FakeHubSpot) Object(objects, id string) map[string]string {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	out := map[string]string{}
	for k, v := range f.Objects[objects][id] {
		out[k] = v
	}
	return out
}

func (f *FakeHubSpot) Count(objects string) int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return len(f.Objects[objects])
}

// Only is the id of the one object of the type (the test fails when there is not one).
func (f *FakeHubSpot) Only(t *testing.T, objects string) string {
	t.Helper()
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if len(f.Objects[objects]) != 1 {
		t.Fatalf("HubSpot holds %d %s, not one: %v", len(f.Objects[objects]), objects, f.Objects[objects])
	}
	for id := range f.Objects[objects] {
		return id
	}
	return ""
}

func (f *FakeHubSpot) SetToken(token string) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.token = token
}

func (f *FakeHubSpot) FailNext(statuses ...int) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.fail = append(f.fail, statuses...)
}

func (f *FakeHubSpot) answer(w http.ResponseWriter, status int, o any) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(o)
}

func shown(id string, props map[string]string, want []string) map[string]any {
	p := map[string]any{"hs_object_id": id}
	for _, name := range want {
		if v, ok := props[name]; ok {
			p[name] = v
		} else {
			p[name] = nil
		}
	}
	return map[string]any{"id": id, "properties": p, "createdAt": "2026-11-01T10:00:00.000Z",
		"updatedAt": "2026-11-01T10:00:00.000Z", "archived": false}
}

func (f *FakeHubSpot) serve(w http.ResponseWriter, r *http.Request) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Calls = append(f.Calls, r.Method+" "+r.URL.Path)
	if r.Header.Get("Authorization") != "Bearer "+f.token {
		hubspotError(w, http.StatusUnauthorized, "INVALID_AUTHENTICATION",
			"Authentication credentials not found. This API supports OAuth 2.0 authentication and you can find more details at https://developers.hubspot.com/docs/methods/auth/oauth-overview")
		return
	}
	if f.down {
		hubspotError(w, http.StatusServiceUnavailable, "INTERNAL_ERROR", "down")
		return
	}
	if len(f.fail) > 0 {
		status := f.fail[0]
		f.fail = f.fail[1:]
		switch status {
		case http.StatusTooManyRequests:
			w.Header().Set("X-HubSpot-RateLimit-Interval-Milliseconds", "10000")
			w.Header().Set("X-HubSpot-RateLimit-Max", "100")
			w.Header().Set("X-HubSpot-RateLimit-Remaining", "0")
			w.Header().Set("Retry-After", "30")
			w.Header().Set("Content-Type", "application/json;charset=utf-8")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(map[string]string{"status": "error", "message": "You have reached your secondly limit.",
				"errorType": "RATE_LIMIT", "correlationId": "c033cdaa-2c40-4a64-ae48-b4cec88dad24", "policyName": "SECONDLY"})
		default:
			hubspotError(w, status, "INTERNAL_ERROR", "internal error")
		}
		return
	}
	if f.Refuse != "" && strings.HasPrefix(r.URL.Path, "/crm/v3/objects/") && (r.Method == http.MethodPost || r.Method == http.MethodPatch) &&
		!strings.HasSuffix(r.URL.Path, "/search") && !strings.Contains(r.URL.Path, "/batch/read") {
		hubspotError(w, http.StatusBadRequest, "VALIDATION_ERROR", f.Refuse)
		f.Refuse = ""
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/crm/v3/"), "/")
	if len(parts) == 4 && parts[0] == "objects" && parts[2] == "batch" && r.Method == http.MethodPost {
		f.serveBatch(w, r, parts[1], parts[3])
		return
	}
	var body struct {
		Properties   map[string]string `json:"properties"`
		FilterGroups []struct {
			Filters []struct {
				PropertyName, Operator, Value string
				Values                        []string
			}
		} `json:"filterGroups"`
		Want     []string `json:"properties_"`
		ObjectID string   `json:"objectId"`
		Name     string   `json:"name"`
	}
	raw := map[string]json.RawMessage{}
	json.NewDecoder(r.Body).Decode(&raw)
	json.Unmarshal(raw["filterGroups"], &body.FilterGroups)
	json.Unmarshal(raw["objectId"], &body.ObjectID)
	json.Unmarshal(raw["name"], &body.Name)
	if json.Unmarshal(raw["properties"], &body.Properties) != nil {
		json.Unmarshal(raw["properties"], &body.Want) // a search's properties are a list
	}
	var invalid []string
	for name := range body.Properties {
		if f.Missing[name] {
			invalid = append(invalid, fmt.Sprintf(`{"isValid":false,"message":"Property \"%s\" does not exist","error":"PROPERTY_DOESNT_EXIST","name":"%s","localizedErrorMessage":"Property \"%s\" does not exist"}`, name, name, name))
		}
	}
	if len(invalid) > 0 && (r.Method == http.MethodPost || r.Method == http.MethodPatch) {
		hubspotError(w, http.StatusBadRequest, "VALIDATION_ERROR", "Property values were not valid: ["+strings.Join(invalid, ",")+"]")
		return
	}
	switch {
	case len(parts) == 2 && parts[0] == "properties" && r.Method == http.MethodPost:
		if f.props[parts[1]+"/"+body.Name] {
			hubspotError(w, http.StatusConflict, "OBJECT_ALREADY_EXISTS", "A property named '"+body.Name+"' already exists.")
			return
		}
		f.props[parts[1]+"/"+body.Name] = true
		var unique bool
		json.Unmarshal(raw["hasUniqueValue"], &unique)
		if unique {
			f.unique[parts[1]+"/"+body.Name] = true
		}
		f.answer(w, http.StatusCreated, raw)
	case len(parts) == 3 && parts[1] == "contacts" && parts[2] == "gdpr-delete" && r.Method == http.MethodPost:
		if _, ok := f.Objects["contacts"][body.ObjectID]; !ok {
			hubspotError(w, http.StatusNotFound, "OBJECT_NOT_FOUND", "resource not found")
			return
		}
		delete(f.Objects["contacts"], body.ObjectID)
		f.GdprDeleted = append(f.GdprDeleted, body.ObjectID)
		w.WriteHeader(http.StatusNoContent)
	case len(parts) == 2 && parts[0] == "objects" && r.Method == http.MethodGet:
		f.answer(w, http.StatusOK, map[string]any{"results": []any{}})
	case len(parts) == 3 && parts[0] == "objects" && parts[2] == "search" && r.Method == http.MethodPost:
		var results []any
		for _, id := range slices.SortedFunc(maps.Keys(f.Objects[parts[1]]), byNumber) {
			props := f.Objects[parts[1]][id]
			match := len(body.FilterGroups) > 0 && !(f.SearchLags && f.fresh[id])
			for _, g := range body.FilterGroups {
				for _, flt := range g.Filters {
					switch flt.Operator {
					case "EQ":
						match = match && strings.EqualFold(props[flt.PropertyName], flt.Value)
					case "IN":
						match = match && slices.Contains(flt.Values, strings.ToLower(props[flt.PropertyName]))
					default:
						match = false
					}
				}
			}
			if match {
				results = append(results, shown(id, props, body.Want))
			}
		}
		// A page of limit results (10 unless asked, 200 at most), the next one after.
		limit, after := 10, 0
		json.Unmarshal(raw["limit"], &limit)
		var next string
		if json.Unmarshal(raw["after"], &next) == nil {
			after, _ = strconv.Atoi(next)
		}
		if limit < 1 || limit > 200 {
			hubspotError(w, http.StatusBadRequest, "VALIDATION_ERROR", "limit must be between 1 and 200")
			return
		}
		ans := map[string]any{"total": len(results)}
		page := results[min(after, len(results)):]
		if len(page) > limit {
			page = page[:limit]
			ans["paging"] = map[string]any{"next": map[string]any{"after": strconv.Itoa(after + limit)}}
		}
		ans["results"] = append([]any{}, page...)
		f.answer(w, http.StatusOK, ans)
	case len(parts) == 2 && parts[0] == "objects" && r.Method == http.MethodPost:
		if f.InvalidEmails[body.Properties["email"]] {
			hubspotError(w, http.StatusBadRequest, "VALIDATION_ERROR", invalidEmail(body.Properties["email"]))
			return
		}
		if parts[1] == "contacts" {
			for id, props := range f.Objects["contacts"] {
				if strings.EqualFold(props["email"], body.Properties["email"]) {
					hubspotError(w, http.StatusConflict, "CONFLICT", "Contact already exists. Existing ID: "+id)
					return
				}
			}
		}
		for name, v := range body.Properties {
			if !f.unique[parts[1]+"/"+name] {
				continue
			}
			if id := f.holding(parts[1], name, v); id != "" {
				hubspotError(w, http.StatusConflict, "CONFLICT", "An object with the unique value already exists. Existing ID: "+id)
				return
			}
		}
		f.nextID++
		id := fmt.Sprint(f.nextID)
		f.Objects[parts[1]][id] = body.Properties
		if f.fresh == nil {
			f.fresh = map[string]bool{}
		}
		f.fresh[id] = true
		if f.FailAfterCreate {
			f.FailAfterCreate = false
			hubspotError(w, http.StatusBadGateway, "INTERNAL_ERROR", "the answer was lost")
			return
		}
		f.answer(w, http.StatusCreated, shown(id, body.Properties, nil))
	case len(parts) == 3 && parts[0] == "objects" && (r.Method == http.MethodGet || r.Method == http.MethodPatch):
		id := parts[2]
		if by := r.URL.Query().Get("idProperty"); by != "" {
			if !f.unique[parts[1]+"/"+by] {
				hubspotError(w, http.StatusBadRequest, "VALIDATION_ERROR", "Property "+by+" is not a unique identifier")
				return
			}
			id = f.holding(parts[1], by, parts[2])
		}
		props, ok := f.Objects[parts[1]][id]
		if !ok {
			hubspotError(w, http.StatusNotFound, "OBJECT_NOT_FOUND", "resource not found")
			return
		}
		if r.Method == http.MethodPatch {
			for k, v := range body.Properties {
				props[k] = v
			}
		}
		f.answer(w, http.StatusOK, shown(id, props, strings.Split(r.URL.Query().Get("properties"), ",")))
	default:
		hubspotError(w, http.StatusNotFound, "NOT_FOUND", "no route "+r.Method+" "+r.URL.Path)
	}
}

// byNumber orders HubSpot's ids, which are numbers.
func byNumber(a, b string) int {
	x, _ := strconv.Atoi(a)
	y, _ := strconv.Atoi(b)
	return x - y
}

func invalidEmail(email string) string {
	return `Property values were not valid: [{"isValid":false,"message":"Email address ` + email +
		` is invalid","error":"INVALID_EMAIL","name":"email","localizedErrorMessage":"Email address ` + email + ` is invalid"}]`
}

// serveBatch serves POST /crm/v3/objects/{objects}/batch/{read,create,update}.
func (f *FakeHubSpot) serveBatch(w http.ResponseWriter, r *http.Request, objects, verb string) {
	var body struct {
		Inputs []struct {
			ID                 string            `json:"id"`
			Properties         map[string]string `json:"properties"`
			ObjectWriteTraceID string            `json:"objectWriteTraceId"`
		} `json:"inputs"`
		Properties []string `json:"properties"`
		IDProperty string   `json:"idProperty"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Inputs) == 0 {
		hubspotError(w, http.StatusBadRequest, "VALIDATION_ERROR", "Invalid input JSON")
		return
	}
	if len(body.Inputs) > 100 {
		hubspotError(w, http.StatusBadRequest, "VALIDATION_ERROR", "Batch input size must be less than or equal to 100")
		return
	}
	var results, errs []any
	answer := func(ok int) {
		status := ok
		if len(errs) > 0 {
			status = http.StatusMultiStatus
		}
		f.answer(w, status, map[string]any{"status": "COMPLETE", "results": append([]any{}, results...), "errors": errs,
			"numErrors": len(errs), "startedAt": "2026-11-01T10:00:00.000Z", "completedAt": "2026-11-01T10:00:00.100Z"})
	}
	switch verb {
	case "read":
		if body.IDProperty != "" && !f.unique[objects+"/"+body.IDProperty] && !(objects == "contacts" && body.IDProperty == "email") {
			hubspotError(w, http.StatusBadRequest, "VALIDATION_ERROR", "Property "+body.IDProperty+" is not a unique identifier")
			return
		}
		var missing []string
		for _, in := range body.Inputs {
			id := in.ID
			if body.IDProperty != "" {
				id = ""
				for oid, props := range f.Objects[objects] {
					if strings.EqualFold(props[body.IDProperty], in.ID) {
						id = oid
					}
				}
			}
			if props, ok := f.Objects[objects][id]; ok {
				results = append(results, shown(id, props, body.Properties))
			} else {
				missing = append(missing, in.ID)
			}
		}
		if len(missing) > 0 {
			errs = append(errs, map[string]any{"status": "error", "category": "OBJECT_NOT_FOUND",
				"message": "Could not get some " + strings.ToUpper(objects) + " objects, they may be deleted or not exist. Check that ids are valid.",
				"context": map[string][]string{"ids": missing}})
		}
		answer(http.StatusOK)
	case "create":
		// HubSpot refuses a batch whole for any one of its inputs.
		seen := map[string]bool{}
		for _, in := range body.Inputs {
			if f.InvalidEmails[in.Properties["email"]] {
				hubspotError(w, http.StatusBadRequest, "VALIDATION_ERROR", invalidEmail(in.Properties["email"]))
				return
			}
			for name, v := range in.Properties {
				if f.Missing[name] {
					hubspotError(w, http.StatusBadRequest, "VALIDATION_ERROR", `Property values were not valid: [{"isValid":false,"message":"Property \"`+
						name+`\" does not exist","error":"PROPERTY_DOESNT_EXIST","name":"`+name+`"}]`)
					return
				}
				if !f.unique[objects+"/"+name] && !(objects == "contacts" && name == "email") {
					continue
				}
				if id := f.holding(objects, name, v); id != "" || seen[name+"="+v] {
					msg := "An object with the unique value already exists. Existing ID: " + id
					if name == "email" {
						msg = "Contact already exists. Existing ID: " + id
					}
					hubspotError(w, http.StatusConflict, "CONFLICT", msg)
					return
				}
				seen[name+"="+v] = true
			}
		}
		for _, in := range body.Inputs {
			f.nextID++
			id := fmt.Sprint(f.nextID)
			f.Objects[objects][id] = in.Properties
			if f.fresh == nil {
				f.fresh = map[string]bool{}
			}
			f.fresh[id] = true
			o := shown(id, in.Properties, nil)
			o["objectWriteTraceId"] = in.ObjectWriteTraceID
			results = append(results, o)
		}
		if f.FailAfterCreate {
			f.FailAfterCreate = false
			hubspotError(w, http.StatusBadGateway, "INTERNAL_ERROR", "the answer was lost")
			return
		}
		answer(http.StatusCreated)
	case "update":
		for _, in := range body.Inputs {
			props, ok := f.Objects[objects][in.ID]
			if !ok || f.FailUpdate[in.ID] {
				errs = append(errs, map[string]any{"status": "error", "category": "OBJECT_NOT_FOUND", "message": "resource not found",
					"context": map[string][]string{"ids": {in.ID}}})
				continue
			}
			for k, v := range in.Properties {
				props[k] = v
			}
			o := shown(in.ID, props, nil)
			o["objectWriteTraceId"] = in.ObjectWriteTraceID
			results = append(results, o)
		}
		answer(http.StatusOK)
	default:
		hubspotError(w, http.StatusNotFound, "NOT_FOUND", "no route "+r.Method+" "+r.URL.Path)
	}
}

// CallsTo counts the requests served of method to paths ending in suffix.
func (f *FakeHubSpot) CallsTo(method, suffix string) int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	n := 0
	for _, c := range f.Calls {
		if strings.HasPrefix(c, method+" ") && strings.HasSuffix(c, suffix) {
			n++
		}
	}
	return n
}

// WithHubSpot points the server at the fake and gives it a secret key file, which a
// HubSpot token is sealed under.
func WithHubSpot(t *testing.T, f *FakeHubSpot) func(*server.Config) {
	box, _, err := secret.LoadOrCreate(filepath.Join(t.TempDir(), "secret-key"))
	if err != nil {
		t.Fatal(err)
	}
	return func(c *server.Config) {
		c.HubSpotURL = f.Srv.URL
		c.Secrets = box
	}
}

const HubspotToken = "pat-na1-11111111-2222-3333-4444-55556666abcd"

// CreateHubSpotLoop creates a Loop writing into HubSpot with the options given.
func (e *Env) CreateHubSpotLoop(name, objectType string, options map[string]any) string {
	e.T.Helper()
	dest := map[string]any{"kind": "hubspot", "token": HubspotToken}
	for k, v := range options {
		dest[k] = v
	}
	r := e.Do("POST", "/v1/loops", map[string]any{"name": name, "object_type": objectType, "destination": dest})
	if r.Status != http.StatusCreated {
		e.T.Fatalf("create a HubSpot loop: %d %s", r.Status, r.Raw)
	}
	return r.Str("data.id")
}

func Succeeded(d map[string]any) bool { return d["status"] == "succeeded" }

// JaneOnRecord imports Jane Doe, CTO at Acme, with her address.
func JaneOnRecord(e *Env) {
	e.ImportJSONL(`{"type":"person","network_url":"https://www.linkedin.com/in/jane-doe","full_name":"Jane Doe","first_name":"Jane","last_name":"Doe",` +
		`"city":"Berlin","country_code":"DE","positions":[{"title":"CTO","company_name":"Acme","is_current":true}],"emails":["jane@acme.com"],` +
		`"last_enriched_at":"` + e.Clock.Now().Add(-24*time.Hour).Format(time.RFC3339) + `"}`)
}
