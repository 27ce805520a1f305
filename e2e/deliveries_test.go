package e2e

import (
	"strings"
	"testing"
)

// TestDeliveriesRetrySendsAPendingDeliveryNow: a pending delivery (its receiver was
// down, or it has not gone out yet) can be retried from the CLI; it is made due now.
func TestDeliveriesRetrySendsAPendingDeliveryNow(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	mustCLI(t, "keys", "create", "--org", "acme", "--db", db)
	mustCLI(t, "loops", "create", "--org", "acme", "--name", "Hooks", "--url", "http://127.0.0.1:9/in", "--allow-private-webhooks", "--db", db)
	id := strings.TrimSpace(mustCLI(t, "loops", "test", "--org", "acme", "hooks", "--db", db))
	contains(t, mustCLI(t, "deliveries", "list", "--org", "acme", "--loop", "hooks", "--db", db), id+"\ttest\tpending\t0\t")
	contains(t, mustCLI(t, "deliveries", "retry", "--org", "acme", id, "--db", db), "delivery "+id+" is due now (attempt 1)")
}
