package sqlite

import (
	"database/sql"
	"testing"
)

// TestAnswerAheadOnlyForTheSameRecord: a result worked out before the transaction is
// used only when the transaction reads the same record, bytes and redirect mark alike.
func TestAnswerAheadOnlyForTheSameRecord(t *testing.T) {
	seen := &record{id: 7, objectType: "company", data: []byte(`{"name":"Acme"}`)}
	ahead := &storedAnswer{rec: seen, result: []byte(`{"name":"Acme","x":1}`)}
	for _, c := range []struct {
		name string
		rec  record
		want bool
	}{
		{"the same", *seen, true},
		{"refreshed since", record{id: 7, objectType: "company", data: []byte(`{"name":"Acme Inc"}`)}, false},
		{"another record under the key", record{id: 8, objectType: "company", data: seen.data}, false},
		{"now an alias", record{id: 7, objectType: "company", data: seen.data, redirect: sql.NullInt64{Int64: 1, Valid: true}}, false},
	} {
		got := ahead.answer(&c.rec)
		if (got != nil) != c.want {
			t.Errorf("%s: answer %q, want one: %v", c.name, got, c.want)
		}
	}
	var none *storedAnswer
	if none.answer(seen) != nil {
		t.Error("no answer ahead gave one")
	}
}
