package hubspot

import (
	"net/http"
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
