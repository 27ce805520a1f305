package sqlite

import "testing"

func TestUnlockedDropsRowLocksOnly(t *testing.T) {
	for query, want := range map[string]string{
		`SELECT a FROM t WHERE x = ? FOR UPDATE`:                                    `SELECT a FROM t WHERE x = ?`,
		`SELECT id FROM t WHERE a = (SELECT id FROM u FOR UPDATE OF u SKIP LOCKED)`: `SELECT id FROM t WHERE a = (SELECT id FROM u)`,
		`SELECT 1 FROM t FOR NO KEY UPDATE NOWAIT`:                                  `SELECT 1 FROM t`,
		`SELECT 1 FROM t JOIN u ON true FOR UPDATE OF t, u`:                         `SELECT 1 FROM t JOIN u ON true`,
		`UPDATE t SET a = 'FOR UPDATE' WHERE b = ?`:                                 `UPDATE t SET a = 'FOR UPDATE' WHERE b = ?`,
		`SELECT EXISTS (SELECT 1 FROM t WHERE id = ? FOR KEY SHARE)`:                `SELECT EXISTS (SELECT 1 FROM t WHERE id = ?)`,
		`SELECT a FROM t FOR SHARE`:                                                 `SELECT a FROM t`,
		`UPDATE t SET a = 1`:                                                        `UPDATE t SET a = 1`,
		`SELECT EXISTS (SELECT 1 FROM loops WHERE id = ? FOR KEY SHARE)`:            `SELECT EXISTS (SELECT 1 FROM loops WHERE id = ?)`,
		`SELECT a FROM t WHERE id = ? FOR SHARE`:                                    `SELECT a FROM t WHERE id = ?`,
	} {
		if got := unlocked(query); got != want {
			t.Errorf("unlocked(%q) = %q, want %q", query, got, want)
		}
	}
}
