package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestWatchesCommands drives enrichd watches through the real command line on a real
// database: create (checked as the API checks it), list, get, disable, enable,
// delete, and the monthly cap.
func TestWatchesCommands(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "enrichd.db")
	run := func(args ...string) string {
		t.Helper()
		out, errOut, err := runCommand(t, append(args, "--db", db)...)
		if err != nil {
			t.Fatalf("enrichd %s: %v\n%s", strings.Join(args, " "), err, errOut)
		}
		return out
	}
	fails := func(want string, args ...string) {
		t.Helper()
		_, _, err := runCommand(t, append(args, "--db", db)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("enrichd %s: error %v, want one saying %q", strings.Join(args, " "), err, want)
		}
	}
	run("orgs", "create", "acme")
	var loop struct{ ID, Slug string }
	is.NoErr(json.Unmarshal([]byte(run("loops", "create", "--org", "acme", "--name", "Job changes", "--object-type", "person",
		"--url", "http://127.0.0.1:9/hook", "--allow-private-webhooks")), &loop))

	var w struct {
		ID        string
		Input     map[string]string
		EveryDays int `json:"every_days"`
		Fields    []string
		Enabled   bool
		LoopID    string  `json:"loop_id"`
		NextRunAt *string `json:"next_run_at"`
	}
	is.NoErr(json.Unmarshal([]byte(run("watches", "create", "--org", "acme", "--loop", loop.Slug, "--object-type", "person",
		"--network-url", "https://linkedin.com/in/Jane-Doe", "--every-days", "14", "--fields", "positions,headline")), &w))
	is.Equal(w.Input, map[string]string{"networkUrl": "https://www.linkedin.com/in/jane-doe"})
	is.Equal(w.EveryDays, 14)
	is.Equal(w.Fields, []string{"positions", "headline"})
	is.Equal(w.LoopID, loop.ID)
	is.True(w.Enabled && w.NextRunAt != nil)

	// The API's checks, the API's words.
	fails("every_days must be an integer from 7 to 365", "watches", "create", "--org", "acme", "--loop", loop.Slug, "--object-type", "person",
		"--network-url", "https://linkedin.com/in/someone", "--every-days", "3")
	fails("object_type person watches people", "watches", "create", "--org", "acme", "--loop", loop.Slug, "--object-type", "person", "--domain", "acme.com")
	fails("loop_id: the Loop", "watches", "create", "--org", "acme", "--loop", loop.Slug, "--domain", "acme.com")
	fails("already watches", "watches", "create", "--org", "acme", "--loop", loop.ID, "--object-type", "person",
		"--network-url", "https://www.linkedin.com/in/jane-doe")
	fails("no Loop", "watches", "create", "--org", "acme", "--loop", "nope", "--domain", "acme.com")

	list := run("watches", "list", "--org", "acme")
	is.True(strings.HasPrefix(list, "ID\tOBJECT_TYPE\tTARGET"))
	is.True(strings.Contains(list, w.ID+"\tperson\thttps://www.linkedin.com/in/jane-doe\t"+loop.ID+"\t14\tenabled\t"))
	var listed []map[string]any
	is.NoErr(json.Unmarshal([]byte(run("watches", "list", "--org", "acme", "--loop", loop.Slug, "--json")), &listed))
	is.Equal(len(listed), 1)

	is.True(strings.Contains(run("watches", "disable", "--org", "acme", w.ID), "disabled watch "+w.ID))
	is.NoErr(json.Unmarshal([]byte(run("watches", "get", "--org", "acme", w.ID)), &w))
	is.True(!w.Enabled && w.NextRunAt == nil)
	is.True(strings.Contains(run("watches", "enable", "--org", "acme", w.ID), "enabled watch "+w.ID))
	is.NoErr(json.Unmarshal([]byte(run("watches", "get", "--org", "acme", w.ID)), &w))
	is.True(w.Enabled && w.NextRunAt != nil)

	is.True(strings.Contains(run("watches", "cap", "--org", "acme", "--monthly-credits", "500"), "at most 500 credits a month"))
	_, errOut, err := runCommand(t, "watches", "list", "--org", "acme", "--db", db)
	is.NoErr(err)
	is.True(strings.Contains(errOut, "watch credits this month: 0 (cap 500)"))
	is.True(strings.Contains(run("watches", "cap", "--org", "acme", "--none"), "no monthly cap"))
	fails("not both", "watches", "cap", "--org", "acme", "--none", "--monthly-credits", "5")
	fails("--monthly-credits N, or --none", "watches", "cap", "--org", "acme")

	// Another organization's watch is not found.
	run("orgs", "create", "globex")
	fails("watch not found", "watches", "get", "--org", "globex", w.ID)

	is.True(strings.Contains(run("watches", "delete", "--org", "acme", w.ID), "deleted watch "+w.ID))
	fails("watch not found", "watches", "get", "--org", "acme", w.ID)
}
