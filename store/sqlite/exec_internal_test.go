package sqlite

import "testing"

func TestUnlockedDropsRowLocksOnly(t *testing.T) {
	for query, want := range map[string]string{
		`SELECT a FROM t WHERE x = ? FOR UPDATE`:                                    `SELECT a FROM t WHERE x = ?`,
		`SELECT id FROM t WHERE a = (SELECT id FROM u FOR UPDATE OF u SKIP LOCKED)`: `SELECT id FROM t WHERE a = (SELECT id FROM u)`,
		`SELECT 1 FROM t FOR NO KEY UPDATE NOWAIT`:                                  `SELECT 1 FROM t`,
		`SELECT 1 FROM t JOIN u ON true FOR UPDATE OF t, u`:                         `SELECT 1 FROM t JOIN u ON true`,
		`UPDATE t SET a = 'FOR UPDATE' WHERE b = ?`:                                 `UPDATE t SET a = 'FOR UPDATE' WHERE b = ?`,
		`UPDATE t SET a = 1`:                                                        `UPDATE t SET a = 1`,
	} {
		if got := unlocked(query); got != want {
			t.Errorf("unlocked(%q) = %q, want %q", query, got, want)
		}
	}
}
