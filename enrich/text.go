package enrich

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// CheckText is the one rule for text a client sends that the service keeps or acts
// on (a header value, a name, an address, a decoded URL path, an imported row): it is
// valid UTF-8 and holds no control character (C0, DEL, C1; a tab or a line break
// included). Otherwise it is refused with KindInvalid, naming field, before anything
// is charged or stored: SQLite would keep the bytes as sent and PostgreSQL refuse
// them, so the two engines would answer differently, and a lower-casing or a JSON
// encoding would turn the bytes into U+FFFD, a value never sent.
func CheckText(field, s string) error {
	if !utf8.ValidString(s) {
		return Errorf(KindInvalid, "%s is not valid UTF-8; send text encoded as UTF-8", field)
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return Errorf(KindInvalid, "%s holds a control character; send one line of text", field)
	}
	return nil
}
