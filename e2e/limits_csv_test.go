package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// Bulk CSV goes through the API, so a value over its limit fails its row as
// invalid_input naming the limit, and costs nothing.
func TestEnrichCSVRowsOverTheLimitsChargeNothing(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	db, key := companiesDB(t, "acme.com")
	base := startEnrichServe(t, db)
	long := strings.Repeat("a", 30000)
	cases := []struct {
		column, value, want string
	}{
		{"email", strings.Repeat("j", 65) + "@acme.com", "longer than 64 bytes"},
		{"email", long + "@acme.com", "longer than 64 bytes"},
		{"email", "jane@" + strings.Repeat("a", 64) + ".com", "longer than 63 bytes"},
		{"domain", strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63) + ".com", "longer than 253 bytes"},
		{"domain", long + ".com", "longer than 2048 bytes"},
		{"networkUrl", "https://www.linkedin.com/company/" + long, "longer than 2048 bytes"},
	}
	for _, c := range cases {
		out := filepath.Join(t.TempDir(), "out.csv")
		stdout, _, err := runCLI(t, "enrich", "--csv", writeCSV(t, c.column, c.value), "--out", out, "--column", c.column, "--url", base, "--key", key)
		is.NoErr(err) // a failed row is written, not a failure of the run
		contains(t, stdout, "1 rows: 0 succeeded, 1 failed (invalid_input 1)")
		_, rows := readOut(t, out)
		is.Equal(len(rows), 1)
		is.Equal(rows[0]["enrichd_status"], "failed")
		is.Equal(rows[0]["enrichd_error_code"], "invalid_input")
		is.True(strings.Contains(rows[0]["enrichd_error_message"], c.want)) // the row names the limit
	}
	charged, refunded := charges(t, db)
	is.Equal(charged, 0)
	is.Equal(refunded, 0)
	is.Equal(balance(t, db, "acme"), "100")
}
