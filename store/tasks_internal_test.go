package store

import "testing"

// TestAnswerAheadOnlyForTheSameRecord: a result worked out before the transaction is
// used only when the transaction reads the same record, bytes and redirect mark alike.
func TestAnswerAheadOnlyForTheSameRecord(t *testing.T) {
	seen := &StoredRecord{ID: 7, ObjectType: "company", Data: []byte(`{"name":"Acme"}`)}
	ahead := &storedAnswer{rec: seen, result: []byte(`{"name":"Acme","x":1}`)}
	for _, c := range []struct {
		name string
		rec  StoredRecord
		want bool
	}{
		{"the same", *seen, true},
		{"refreshed since", StoredRecord{ID: 7, ObjectType: "company", Data: []byte(`{"name":"Acme Inc"}`)}, false},
		{"another record under the key", StoredRecord{ID: 8, ObjectType: "company", Data: seen.Data}, false},
		{"now an alias", StoredRecord{ID: 7, ObjectType: "company", Data: seen.Data, ConfirmedAlias: true}, false},
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
