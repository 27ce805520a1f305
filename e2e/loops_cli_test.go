package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// loops rotate prints the Loop with its new secret, which the Standard Webhooks
// libraries decode, and when the old one stops signing; a grace period out of bounds
// is refused. The destination is disabled and enabled again by name.
func TestLoopsRotateAndDestinationCommands(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	var created struct {
		Destination struct{ Secret string } `json:"destination"`
	}
	is.NoErr(json.Unmarshal([]byte(mustCLI(t, "loops", "create", "--org", "acme", "--name", "Hooks", "--url", "http://127.0.0.1:9/hook",
		"--allow-private-webhooks", "--db", db)), &created))

	before := time.Now()
	var rotated struct {
		Destination struct {
			Secret                  string    `json:"secret"`
			PreviousSecretExpiresAt time.Time `json:"previous_secret_expires_at"`
		} `json:"destination"`
	}
	is.NoErr(json.Unmarshal([]byte(mustCLI(t, "loops", "rotate", "--org", "acme", "hooks", "--grace", "2h", "--db", db)), &rotated))
	is.True(rotated.Destination.Secret != "" && rotated.Destination.Secret != created.Destination.Secret)
	_, err := standardwebhooks.NewWebhook(rotated.Destination.Secret)
	is.NoErr(err)
	is.True(!rotated.Destination.PreviousSecretExpiresAt.Before(before.Add(2 * time.Hour).Truncate(time.Millisecond)))
	is.True(rotated.Destination.PreviousSecretExpiresAt.Before(time.Now().Add(2*time.Hour + time.Second)))
	contains(t, failCLI(t, "loops", "rotate", "--org", "acme", "hooks", "--grace", "169h", "--db", db), "--grace must be from 0 to 168h")
	contains(t, failCLI(t, "loops", "rotate", "--org", "acme", "nope", "--db", db), `has no Loop "nope"`)

	contains(t, mustCLI(t, "loops", "disable-destination", "--org", "acme", "hooks", "--db", db), "disabled the destination of loop hooks")
	got := mustCLI(t, "loops", "get", "--org", "acme", "hooks", "--db", db)
	is.True(strings.Contains(got, `"disabled_reason": "disabled on request"`))
	contains(t, mustCLI(t, "loops", "enable-destination", "--org", "acme", "hooks", "--db", db), "enabled the destination of loop hooks")
	got = mustCLI(t, "loops", "get", "--org", "acme", "hooks", "--db", db)
	is.True(!strings.Contains(got, "disabled_reason"))
	is.True(strings.Contains(got, `"enabled": true`))
}

// loops create --hubspot reads the token from standard input, checks it with HubSpot
// (refused: nothing created) and prints the Loop with the token's last four characters
// alone; set-hubspot-token replaces it, checked the same way; a webhook Loop has no
// token to set.
func TestLoopsCreateHubSpotFromTheCLI(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const token = "pat-na1-cli-token-7e21"
	var checks atomic.Int64
	hubspot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checks.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+token || r.URL.Path != "/crm/v3/objects/contacts" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"status":"error","message":"Authentication credentials not found.","correlationId":"x","category":"INVALID_AUTHENTICATION"}`))
			return
		}
		w.Write([]byte(`{"results":[]}`))
	}))
	defer hubspot.Close()
	db := newDB(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)
	create := []string{"loops", "create", "--org", "acme", "--name", "HubSpot people", "--object-type", "person", "--hubspot", "--gdpr-delete",
		"--hubspot-url", hubspot.URL, "--db", db}

	_, stderr, err := runCLIWithInput(t, "pat-na1-wrong\n", create...)
	is.True(err != nil && strings.Contains(err.Error(), "HubSpot refused the token, so the Loop was not saved"))
	is.True(!strings.Contains(stderr+err.Error(), "pat-na1-wrong"))
	is.True(!strings.Contains(mustCLI(t, "loops", "list", "--org", "acme", "--db", db), "hubspot-people")) // nothing created

	out, _, err := runCLIWithInput(t, token+"\n", create...)
	is.NoErr(err)
	var l struct {
		Slug        string `json:"slug"`
		Destination struct {
			Kind       string `json:"kind"`
			TokenLast4 string `json:"token_last4"`
			GDPRDelete bool   `json:"gdpr_delete"`
		} `json:"destination"`
	}
	is.NoErr(json.Unmarshal([]byte(out), &l))
	is.Equal(l.Slug, "hubspot-people")
	is.Equal(l.Destination.Kind, "hubspot")
	is.Equal(l.Destination.TokenLast4, "…7e21")
	is.True(l.Destination.GDPRDelete)
	is.True(!strings.Contains(out, token))

	_, _, err = runCLIWithInput(t, "pat-na1-other\n", "loops", "set-hubspot-token", "--org", "acme", "hubspot-people", "--hubspot-url", hubspot.URL, "--db", db)
	is.True(err != nil && strings.Contains(err.Error(), "HubSpot refused the token"))
	out, _, err = runCLIWithInput(t, token+"\n", "loops", "set-hubspot-token", "--org", "acme", "hubspot-people", "--hubspot-url", hubspot.URL, "--db", db)
	is.NoErr(err)
	is.True(strings.Contains(out, "now writes into HubSpot with the token …7e21"))
	is.Equal(checks.Load(), int64(4))

	contains(t, failCLI(t, "loops", "create", "--org", "acme", "--name", "Both", "--hubspot", "--url", "https://hooks.example/", "--db", db), "--url is a webhook's")
	contains(t, failCLI(t, "loops", "create", "--org", "acme", "--name", "Neither", "--db", db), "--url is required")
	contains(t, failCLI(t, "loops", "create", "--org", "acme", "--name", "Companies", "--hubspot", "--gdpr-delete", "--db", db), "--gdpr-delete deletes contacts")
}
