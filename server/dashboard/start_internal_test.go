package dashboard

import (
	"slices"
	"testing"
)

// A command's words are split where the shell splits them, so that a quoted path with
// a space is one word on the page, and joined again they are the command.
func TestShellWords(t *testing.T) {
	for _, c := range []struct {
		command string
		want    []string
	}{
		{"./enrichd credits grant --org acme --amount 1000", []string{"./enrichd", "credits", "grant", "--org", "acme", "--amount", "1000"}},
		{"./enrichd import --db " + shellQuote("/srv/my data/e.db") + " x.jsonl", []string{"./enrichd", "import", "--db", "'/srv/my data/e.db'", "x.jsonl"}},
		{"./enrichd serve --db " + shellQuote("/srv/it's here/e.db"), []string{"./enrichd", "serve", "--db", `'/srv/it'\''s here/e.db'`}},
		{"  a  b ", []string{"a", "b"}},
	} {
		got := shellWords(c.command)
		if !slices.Equal(got, c.want) {
			t.Errorf("shellWords(%q) = %q, want %q", c.command, got, c.want)
		}
	}
}
