package server

import (
	"bytes"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestSettledAnswersKeepOnlyWhatTheyMay: an answer is given back to its organization
// alone, not once a task finished then could have been deleted by retention, not when
// it is too long to keep, and the cache never holds more than its bound.
func TestSettledAnswersKeepOnlyWhatTheyMay(t *testing.T) {
	is := is.New(t)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	retain := 90 * 24 * time.Hour
	var c settledAnswers
	c.put("acme", "t1", now.Add(-time.Hour), []byte(`{"task":1}`))

	body, ok := c.get("acme", "t1", now, retain)
	is.True(ok)
	is.Equal(string(body), `{"task":1}`)
	_, ok = c.get("globex", "t1", now, retain) // another organization's key
	is.True(!ok)
	_, ok = c.get("acme", "t2", now, retain)
	is.True(!ok)
	_, ok = c.get("acme", "t1", now, 0) // no retention: kept for ever
	is.True(ok)

	// Past retention it could have been deleted: read from the database again.
	_, ok = c.get("acme", "t1", now.Add(retain), retain)
	is.True(!ok)
	_, ok = c.get("acme", "t1", now, retain) // and it is no longer kept
	is.True(!ok)

	c.put("acme", "long", now, bytes.Repeat([]byte("x"), settledAnswerMax+1))
	_, ok = c.get("acme", "long", now, retain)
	is.True(!ok)

	for i := range settledAnswersSize + 100 {
		c.put("acme", string(rune('a'+i%26))+time.Duration(i).String(), now, []byte("{}"))
	}
	is.Equal(len(c.m), settledAnswersSize)
}
