package e2e

import (
	"encoding/json"
	"strings"
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
	db := newDBPath(t)
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
