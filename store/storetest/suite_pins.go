package storetest

import (
	"context"
	"errors"
	"testing"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// testAnIdempotencyKeyReusedWithAnotherBodyIsRefused: a key names one request. Sent
// again with another body, or on another endpoint, it is refused as
// idempotency_key_reused, creates no task and charges nothing; the first request's
// task is untouched and still replays.
func testAnIdempotencyKeyReusedWithAnotherBodyIsRefused(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	org := NewOrg(t, db, "acme")
	_, err := db.GrantCredits(ctx, "acme", 10, nil)
	is.NoErr(err)

	first := NewTask(org, "acme.com")
	first.IdempotencyKey, first.Endpoint, first.BodyHash = "k1", "POST /v1/companies/enrich", HexSum(`{"domain":"acme.com"}`)
	created, err := db.CreateTask(ctx, store.BySystem, first)
	is.NoErr(err)

	otherBody := NewTask(org, "other.com")
	otherBody.IdempotencyKey, otherBody.Endpoint, otherBody.BodyHash = "k1", "POST /v1/companies/enrich", HexSum(`{"domain":"other.com"}`)
	otherEndpoint := first // the hash binds the endpoint too, as the server computes it
	otherEndpoint.Endpoint, otherEndpoint.BodyHash = "POST /v1/people/enrich", HexSum("POST /v1/people/enrich\n"+`{"domain":"acme.com"}`)
	for name, nt := range map[string]store.NewTask{"another body": otherBody, "another endpoint": otherEndpoint} {
		_, err = db.CreateTask(ctx, store.BySystem, nt)
		var e *enrich.Error
		if !errors.As(err, &e) || e.Code != "idempotency_key_reused" {
			t.Fatalf("%s under a used key: got %v, want idempotency_key_reused", name, err)
		}
	}

	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b.Balance, int64(9)) // the first request's charge alone
	_, total, err := db.ListTasks(ctx, org, "", 0, 10)
	is.NoErr(err)
	is.Equal(total, int64(1))
	replay, err := db.CreateTask(ctx, store.BySystem, first)
	is.NoErr(err)
	is.True(replay.Replayed)
	is.Equal(replay.Task.ID, created.Task.ID)
}

// testATaskIsReadOnlyByItsOrganization: another organization's task is not found by
// id, for a read or a cancel, and never listed; the cancel changes nothing.
func testATaskIsReadOnlyByItsOrganization(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	acme := NewOrg(t, db, "acme")
	other := NewOrg(t, db, "other")
	_, err := db.GrantCredits(ctx, "acme", 5, nil)
	is.NoErr(err)
	created, err := db.CreateTask(ctx, store.BySystem, NewTask(acme, "acme.com"))
	is.NoErr(err)

	_, err = db.GetTask(ctx, other, created.Task.ID)
	var e *enrich.Error
	is.True(errors.As(err, &e))
	is.Equal(e.Code, "not_found")
	_, err = db.CancelTask(ctx, other, created.Task.ID)
	is.True(errors.As(err, &e))
	is.Equal(e.Code, "not_found")
	tasks, total, err := db.ListTasks(ctx, other, "", 0, 10)
	is.NoErr(err)
	is.Equal(total, int64(0))
	is.Equal(len(tasks), 0)

	own, err := db.GetTask(ctx, acme, created.Task.ID)
	is.NoErr(err)
	is.Equal(own.Status, store.StatusQueued) // the other organization's cancel did nothing
	b, err := db.CreditBalance(ctx, "acme")
	is.NoErr(err)
	is.Equal(b.Balance, int64(4))
}

// testAKeyNameIsOneLineOfText: a key's name that is not valid UTF-8, or holds a
// control character, is refused before anything is made, whoever creates the key.
func testAKeyNameIsOneLineOfText(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	NewOrg(t, db, "acme")
	for _, name := range []string{"ab\xff\xfe", "two\nlines", "bell\a"} {
		_, _, err := db.CreateKey(ctx, store.BySystem, "acme", name, false)
		var e *enrich.Error
		if !errors.As(err, &e) || e.Kind != enrich.KindInvalid {
			t.Fatalf("key name %q: got %v, want invalid input", name, err)
		}
	}
	keys, err := db.ListKeys(ctx, "acme")
	is.NoErr(err)
	is.Equal(len(keys), 0)
	_, _, err = db.CreateKey(ctx, store.BySystem, "acme", "Zapier · prod ✓", false)
	is.NoErr(err)
}
