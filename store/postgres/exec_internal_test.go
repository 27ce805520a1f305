package postgres

import "testing"

func TestRebindNumbersPlaceholdersOutsideQuotes(t *testing.T) {
	for query, want := range map[string]string{
		`SELECT a FROM t WHERE x = ? AND y = ?`:         `SELECT a FROM t WHERE x = $1 AND y = $2`,
		`UPDATE t SET a = '?' WHERE b = ? AND "c?" = ?`: `UPDATE t SET a = '?' WHERE b = $1 AND "c?" = $2`,
		`SELECT 'it''s ?', ?`:                           `SELECT 'it''s ?', $1`,
		`SELECT 1`:                                      `SELECT 1`,
	} {
		if got := rebind(query); got != want {
			t.Errorf("rebind(%q) = %q, want %q", query, got, want)
		}
	}
}
