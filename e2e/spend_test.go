package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// `sources budget` sets, replaces, clears and prints the monthly budgets of an
// organization and of the installation; refused arguments change nothing and name
// what to fix.
func TestSourcesBudgetCommand(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db := newDB(t)
	mustCLI(t, "orgs", "create", "acme", "--db", db)

	mustCLI(t, "sources", "budget", "--org", "acme", "pdl", "5000", "--db", db)
	mustCLI(t, "sources", "budget", "--org", "acme", "apollo", "200", "--db", db)
	mustCLI(t, "sources", "budget", "--org", "acme", "pdl", "4000", "--db", db) // replaced
	mustCLI(t, "sources", "budget", "enrichlayer", "20000", "--db", db)         // the installation's
	is.Equal(tableRows(t, mustCLI(t, "sources", "budget", "--org", "acme", "--db", db)), []string{
		"acme\tapollo\t200", "acme\tpdl\t4000", "installation\tenrichlayer\t20000",
	})
	is.Equal(tableRows(t, mustCLI(t, "sources", "budget", "--db", db)), []string{"installation\tenrichlayer\t20000"})

	before := mustCLI(t, "sources", "budget", "--org", "acme", "--json", "--db", db)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--org", "acme", "crm", "10"}, `unknown source "crm"`},
		{[]string{"--org", "acme", "dataset", "10"}, "dataset costs no vendor credits"},
		{[]string{"--org", "acme", "--", "pdl", "-1"}, "CREDITS"},
		{[]string{"--org", "acme", "pdl", "lots"}, "CREDITS"},
		{[]string{"--org", "acme", "pdl", "99999999999999999999"}, "CREDITS"},
		{[]string{"--org", "acme", "pdl"}, "give a source and its monthly credits"},
		{[]string{"--org", "nobody", "pdl", "10"}, "nobody"},
	} {
		msg := failCLI(t, append([]string{"sources", "budget", "--db", db}, c.args...)...)
		contains(t, msg, c.want)
	}
	is.Equal(mustCLI(t, "sources", "budget", "--org", "acme", "--json", "--db", db), before) // nothing changed

	mustCLI(t, "sources", "budget", "--org", "acme", "apollo", "none", "--db", db)
	mustCLI(t, "sources", "budget", "--org", "acme", "pdl", "0", "--db", db)
	var rows []struct {
		Scope          string `json:"scope"`
		Source         string `json:"source"`
		MonthlyCredits int64  `json:"monthly_credits"`
	}
	is.NoErr(json.Unmarshal([]byte(mustCLI(t, "sources", "budget", "--org", "acme", "--json", "--db", db)), &rows))
	is.Equal(len(rows), 1)
	is.Equal(rows[0].Scope, "installation")

	// A budget command on a database that does not exist creates none.
	missing := newDBPath(t)
	failCLI(t, "sources", "budget", "pdl", "10", "--db", missing)
	_, err := os.Stat(missing)
	is.True(os.IsNotExist(err))
}

// serve's budgets, credit prices and sim's price reach GET /v1/sources; bad ones stop
// it before it opens the database.
func TestServeSourceEconomicsFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ args, want []string }{
		{[]string{"--pdl-monthly-budget", "-1"}, []string{"--pdl-monthly-budget"}},
		{[]string{"--apollo-credit-usd", "-0.1"}, []string{"--apollo-credit-usd"}},
		{[]string{"--enrichlayer-credit-usd", "NaN"}, []string{"--enrichlayer-credit-usd"}},
		{[]string{"--sources", "sim", "--sim-credits", "-2"}, []string{"--sim-credits"}},
		{[]string{"--sources", "sim", "--sim-names", "kings"}, []string{"--sim-names", "lists", "heldout"}},
	} {
		path := newDBPath(t)
		msg := runServeExpectError(t, append([]string{"serve", "--db", path, "--addr", "127.0.0.1:0"}, c.args...)...)
		for _, w := range c.want {
			contains(t, msg, w)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%v: the refused serve left a database behind", c.args)
		}
	}

	is := is.New(t)
	db := newDB(t)
	key := strings.TrimSpace(mustCLI(t, "keys", "create", "--org", "acme", "--db", db))
	mustCLI(t, "sources", "budget", "sim", "500", "--db", db)
	mustCLI(t, "credits", "grant", "--org", "acme", "--amount", "10", "--db", db)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--sources", "dataset,sim",
			"--sim-credits", "2", "--sim-monthly-budget", "300", "--sim-credit-usd", "0.5"}, &stdout, &stderr)
	}()
	base := waitListening(t, &stderr, done)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/sources", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := client.Do(req)
	is.NoErr(err)
	defer res.Body.Close()
	is.Equal(res.StatusCode, 200)
	var body struct {
		Sources []struct {
			Name      string   `json:"name"`
			CreditUSD *float64 `json:"credit_usd"`
			Budget    struct {
				Installation *int64 `json:"installation"`
				Remaining    *int64 `json:"remaining"`
			} `json:"budget"`
		} `json:"sources"`
	}
	is.NoErr(json.NewDecoder(res.Body).Decode(&body))
	is.Equal(len(body.Sources), 2)
	sim := body.Sources[1]
	is.Equal(sim.Name, "sim")
	is.Equal(*sim.CreditUSD, 0.5)
	is.Equal(*sim.Budget.Installation, int64(300)) // the flag's, lower than the database's 500
	is.Equal(*sim.Budget.Remaining, int64(300))

	// The organization's budget, set with the command beside the running server, binds
	// its next tasks: 2 credits an answer, a cap of 3 admits two asks and skips the third.
	mustCLI(t, "sources", "budget", "--org", "acme", "sim", "3", "--db", db)
	settle := func(domain string) apiResponse {
		status, r, raw := call(t, client, http.MethodPost, base+"/v1/companies/enrich", key, `{"domain":"`+domain+`"}`)
		if status != http.StatusAccepted && status != http.StatusOK {
			t.Fatalf("enrich %s: %d %s", domain, status, raw)
		}
		for deadline := time.Now().Add(patience); ; time.Sleep(20 * time.Millisecond) {
			_, got, raw := call(t, client, http.MethodGet, base+"/v1/tasks/"+r.Task.ID, key, "")
			if got.Task.Status != "queued" && got.Task.Status != "running" {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("task of %s did not settle: %s", domain, raw)
			}
		}
	}
	is.Equal(settle("initech.com").Task.Status, "succeeded")
	is.Equal(settle("globex.com").Task.Status, "succeeded")
	over := settle("hooli.com")
	is.Equal(over.Task.Status, "failed")
	contains(t, string(over.Error), "provider_unavailable")
	contains(t, string(over.Error), "budget")
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}
