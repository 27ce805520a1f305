package sqlite_test

import (
	"database/sql"
	"strings"
	"testing"
)

// rawDB opens the file beside the store, to look at what no method returns.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

// TestUserQueriesUseIndexes checks the plans of the queries behind the users' lists
// and lookups, sessions and the purge.
func TestUserQueriesUseIndexes(t *testing.T) {
	_, path, _ := openDB(t)
	raw := rawDB(t, path)
	const cols = `u.id, u.org_id, o.name, u.email, u.role, u.password_hash IS NOT NULL, u.created_at, u.disabled_at, u.last_login_at`
	queries := map[string]string{
		"list one org":   `SELECT ` + cols + ` FROM users u JOIN orgs o ON o.id = u.org_id WHERE u.org_id = 'o' ORDER BY u.email`,
		"list all":       `SELECT ` + cols + ` FROM orgs o JOIN users u ON u.org_id = o.id ORDER BY o.name, u.email`,
		"by email":       `SELECT ` + cols + ` FROM users u JOIN orgs o ON o.id = u.org_id WHERE u.email = 'a@b.c'`,
		"link":           `SELECT ` + cols + `, l.hash, l.expires_at FROM user_links l JOIN users u ON u.id = l.user_id JOIN orgs o ON o.id = u.org_id WHERE l.hash = x'00'`,
		"session":        `SELECT ` + cols + `, s.hash, s.last_seen_at, s.expires_at FROM sessions s JOIN users u ON u.id = s.user_id JOIN orgs o ON o.id = u.org_id WHERE s.hash = x'00'`,
		"user's links":   `DELETE FROM user_links WHERE user_id = 'u'`,
		"user's session": `DELETE FROM sessions WHERE user_id = 'u'`,
		"purge: ended":   `DELETE FROM sessions WHERE expires_at <= 5`,
		"purge: idle":    `DELETE FROM sessions WHERE last_seen_at < 5`,
	}
	for name, q := range queries {
		plan := explain(t, raw, q)
		joined := strings.Join(plan, "; ")
		for _, step := range plan {
			// Every step is a search by key, or a walk of an index in the order asked for.
			if !strings.Contains(step, "USING") || strings.Contains(step, "TEMP B-TREE") {
				t.Errorf("%s: plan %q has a step without an index: %q", name, joined, step)
			}
		}
	}
}
