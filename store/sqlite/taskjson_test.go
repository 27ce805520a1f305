package sqlite_test

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"enrichd/store"
)

// TestTaskAppendJSONIsEncodingJSON: the hand-written encoding gives exactly what
// encoding/json gives, for every field and for strings that need escaping.
func TestTaskAppendJSONIsEncodingJSON(t *testing.T) {
	strs := []string{"", "acme.com", "a\"b", `back\slash`, "<script>&", "line\nbreak\t\x01", "ünïcödé", "\u2028\u2029",
		"bad utf8 \xff\xfe", "https://www.linkedin.com/in/jane-doe", "emoji 🎉"}
	at := time.Date(2026, 11, 23, 15, 28, 46, 947_000_000, time.UTC)
	whole := time.Date(2026, 11, 23, 15, 28, 46, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return strs[rng.IntN(len(strs))] }
	ptr := func() *string {
		if rng.IntN(3) == 0 {
			return nil
		}
		s := pick()
		return &s
	}
	tm := func() *time.Time {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return &whole
		}
		return &at
	}
	inputs := []json.RawMessage{nil, json.RawMessage(`{"domain":"acme.com"}`), json.RawMessage(`{"email":"a@b.c","full_name":"J\u00fcrgen"}`)}
	for i := range 2000 {
		task := &store.Task{ID: pick(), ObjectType: pick(), Operation: pick(), Status: pick(), Input: inputs[i%len(inputs)],
			Target: pick(), CreditsCharged: rng.Int64N(5) - 1, LoopID: ptr(), WatchID: ptr(), IdempotencyKey: ptr(),
			CreatedAt: *tm2(tm(), at), QueuedAt: tm(), StartedAt: tm(), FinishedAt: tm(), ExpiresAt: *tm2(tm(), whole), ErasedAt: tm(),
			Data: json.RawMessage(`{"x":1}`)}
		want, err := json.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		if got := task.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("task %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func tm2(t *time.Time, otherwise time.Time) *time.Time {
	if t == nil {
		return &otherwise
	}
	return t
}
