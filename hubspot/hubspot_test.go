package hubspot

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestIndustryOptionWritesOnlyHubSpotsOwnOptions(t *testing.T) {
	is := is.New(t)
	for label, want := range map[string]string{
		"Computer Software":                   "COMPUTER_SOFTWARE",
		"computer software":                   "COMPUTER_SOFTWARE",
		"Information Technology & Services":   "INFORMATION_TECHNOLOGY_AND_SERVICES",
		"Information Technology and Services": "INFORMATION_TECHNOLOGY_AND_SERVICES",
		"Food & Beverages":                    "FOOD_BEVERAGES",
		"Hospital & Health Care":              "HOSPITAL_HEALTH_CARE",
		"Rockets":                             "",
		"":                                    "",
	} {
		is.Equal(IndustryOption(label), want) // label
	}
}

// A 429 without Retry-After waits for the interval of the limit it says is spent; one
// whose limit is not spent, or that says nothing, leaves the wait to the schedule.
func TestRetryAfterReadsHubSpotsRateLimitHeaders(t *testing.T) {
	is := is.New(t)
	now := time.Now()
	h := http.Header{}
	h.Set("X-HubSpot-RateLimit-Interval-Milliseconds", "10000")
	h.Set("X-HubSpot-RateLimit-Max", "100")
	h.Set("X-HubSpot-RateLimit-Remaining", "0")
	is.Equal(retryAfter(h, now), 10*time.Second)
	h.Set("Retry-After", "3")
	is.Equal(retryAfter(h, now), 3*time.Second) // Retry-After first
	h.Del("Retry-After")
	h.Set("X-HubSpot-RateLimit-Remaining", "12")
	is.Equal(retryAfter(h, now), time.Duration(0))
	h.Set("X-HubSpot-RateLimit-Remaining", "0")
	h.Set("X-HubSpot-RateLimit-Interval-Milliseconds", "99999999999")
	is.Equal(retryAfter(h, now), time.Duration(0)) // beyond a day: not believed
}

func TestMissingPropertiesAreReadFromHubSpotsValidationError(t *testing.T) {
	is := is.New(t)
	msg := `Property values were not valid: [{"isValid":false,"message":"Property \"hs_linkedin_url\" does not exist","error":"PROPERTY_DOESNT_EXIST","name":"hs_linkedin_url","localizedErrorMessage":"Property \"hs_linkedin_url\" does not exist"},` +
		`{"isValid":false,"message":"x was not a valid number","error":"INVALID_INTEGER","name":"numberofemployees"}]`
	is.Equal(missingProperties(msg), []string{"hs_linkedin_url"})
	is.Equal(len(missingProperties("Property values were not valid")), 0)
}

func TestMappingOverridesAndChecks(t *testing.T) {
	is := is.New(t)
	m := Mapping("person", map[string]string{"jobtitle": "", "hs_persona_headline": "headline"})
	_, has := m["jobtitle"]
	is.True(!has)
	is.Equal(m["hs_persona_headline"], "headline")
	is.Equal(m["firstname"], "first_name")
	is.True(CheckMapping("person", map[string]string{"jobtitle": "salary"}) != nil)
	is.True(CheckMapping("company", map[string]string{"domain": ""}) != nil)
	is.True(CheckMapping("company", map[string]string{"enrichd_provenance": "name"}) != nil)
	is.NoErr(CheckMapping("company", map[string]string{"about_us": "about"}))
}

func TestHubSpotsMessagesKeepNoValueSent(t *testing.T) {
	is := is.New(t)
	sent := []byte(`{"properties":{"email":"jane@acme.com","firstname":"Jane","lastname":"Doe","hs_linkedin_url":"https://www.linkedin.com/in/jane-doe"}}`)
	is.Equal(scrub(`Property values were not valid: [{"isValid":false,"message":"Email address jane@acme.com is invalid","error":"INVALID_EMAIL","name":"email"}]`, sent),
		"Property values were not valid: email INVALID_EMAIL")
	is.Equal(scrub(`Email address JANE@ACME.COM is invalid`, sent), "Email address … is invalid")
	is.Equal(scrub(`firstname Jane and lastname Doe conflict with 'someone' at www.example.com/x, "quoted"`, sent),
		"firstname … and lastname … conflict with … at … …")
	is.Equal(scrub("You have reached your secondly limit.", nil), "You have reached your secondly limit.")
	is.Equal(scrub("You've reached the limit", sent), "You've reached the limit")
}

// A batch answer names each input's fate by trace id, or, where HubSpot leaves the
// trace id out, by the object's id (update) or its key (create); its 207 errors by
// their context's ids or trace ids; an input it says nothing of fails, alone, and a
// batch longer than HubSpot takes is sent in calls of MaxBatch.
func TestBatchAnswersSettleEachInputAlone(t *testing.T) {
	is := is.New(t)
	var calls []int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Inputs []BatchInput }
		is.NoErr(json.NewDecoder(r.Body).Decode(&body))
		calls = append(calls, len(body.Inputs))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMultiStatus)
		if strings.HasSuffix(r.URL.Path, "/batch/update") {
			w.Write([]byte(`{"status":"COMPLETE","results":[{"id":"11","properties":{}}],"errors":[{"status":"error","category":"OBJECT_NOT_FOUND",` +
				`"message":"resource not found","context":{"ids":["12"]}}],"numErrors":1}`))
			return
		}
		var results []string
		for _, in := range body.Inputs {
			if in.Properties["email"] != "" && in.ObjectWriteTraceID != "t-refused" && in.ObjectWriteTraceID != "t-lost" {
				results = append(results, `{"id":"9`+in.ObjectWriteTraceID+`","properties":{"email":"`+strings.ToUpper(in.Properties["email"])+`"}}`)
			}
		}
		w.Write([]byte(`{"status":"COMPLETE","results":[` + strings.Join(results, ",") + `],"errors":[{"status":"error","category":"VALIDATION_ERROR",` +
			`"message":"Email address refused@acme.com is invalid","context":{"objectWriteTraceId":["t-refused"]}}],"numErrors":1}`))
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, Token: "pat-x", HTTP: srv.Client()}

	done, failed, err := c.BatchUpdate(t.Context(), "contacts", []BatchInput{
		{ID: "11", Properties: map[string]string{"city": "Berlin"}, ObjectWriteTraceID: "t-11"},
		{ID: "12", Properties: map[string]string{"city": "Paris"}, ObjectWriteTraceID: "t-12"},
	})
	is.NoErr(err)
	is.Equal(done["t-11"].ID, "11")
	is.Equal(StatusOf(failed["t-12"]), http.StatusMultiStatus)
	is.True(strings.Contains(failed["t-12"].Error(), "resource not found"))
	is.Equal(len(done)+len(failed), 2)

	var inputs []BatchInput
	for i := range MaxBatch + 1 {
		inputs = append(inputs, BatchInput{Properties: map[string]string{"email": fmt.Sprintf("p%d@acme.com", i)}, ObjectWriteTraceID: fmt.Sprintf("t%d", i)})
	}
	inputs[3].ObjectWriteTraceID, inputs[3].Properties["email"] = "t-refused", "refused@acme.com"
	inputs[5].ObjectWriteTraceID = "t-lost"
	calls = nil
	done, failed, err = c.BatchCreate(t.Context(), "contacts", "email", inputs)
	is.NoErr(err)
	is.Equal(calls, []int{MaxBatch, 1})
	is.Equal(done["t0"].ID, "9t0") // matched by its key, case aside
	is.Equal(done["t100"].ID, "9t100")
	is.Equal(len(done), MaxBatch-1)
	is.True(strings.Contains(failed["t-refused"].Error(), "VALIDATION_ERROR") || strings.Contains(failed["t-refused"].Error(), "is invalid"))
	is.True(!strings.Contains(failed["t-refused"].Error(), "refused@acme.com")) // the value is not kept
	is.True(strings.Contains(failed["t-lost"].Error(), "did not say what became of this input"))
}

// A batch longer than HubSpot takes in one call, whose second call fails, still says
// which inputs the first call wrote: those objects exist, and a delivery failed for
// one of them would create it again on its retry.
func TestBatchWriteKeepsWhatEarlierCallsWrote(t *testing.T) {
	is := is.New(t)
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Inputs []BatchInput }
		is.NoErr(json.NewDecoder(r.Body).Decode(&body))
		if calls++; calls > 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"status":"error","message":"You have reached your secondly limit.","category":"RATE_LIMITS"}`))
			return
		}
		var results []string
		for i, in := range body.Inputs {
			results = append(results, fmt.Sprintf(`{"id":"%d","properties":{},"objectWriteTraceId":%q}`, 500+i, in.ObjectWriteTraceID))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"status":"COMPLETE","results":[` + strings.Join(results, ",") + `]}`))
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, Token: "pat-x", HTTP: srv.Client()}
	var inputs []BatchInput
	for i := range MaxBatch + 1 {
		inputs = append(inputs, BatchInput{Properties: map[string]string{"domain": fmt.Sprintf("c%d.com", i)}, ObjectWriteTraceID: fmt.Sprintf("t%d", i)})
	}
	done, failed, err := c.BatchCreate(t.Context(), "companies", "domain", inputs)
	is.Equal(StatusOf(err), http.StatusTooManyRequests) // the last input's call failed
	is.Equal(len(done), MaxBatch)                       // the first call's objects are known
	is.Equal(done["t0"].ID, "500")
	is.Equal(done["t100"], nil)
	is.Equal(len(failed), 0)
}
