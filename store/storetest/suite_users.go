package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

// errKind checks that err is an *enrich.Error of the kind and code.
func errKind(t *testing.T, err error, kind enrich.Kind, code string) *enrich.Error {
	t.Helper()
	var e *enrich.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T): want an *enrich.Error of kind %s", err, err, kind)
	}
	if e.Kind != kind || e.Code != code {
		t.Fatalf("error %q is %s/%q, want %s/%q", e.Message, e.Kind, e.Code, kind, code)
	}
	return e
}

func testCreateAndListUsers(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	acme := NewOrg(t, db, "acme")
	NewOrg(t, db, "beta")

	u, token, err := db.CreateUser(ctx, store.BySystem, "acme", "  Jane.Doe@Acme.COM ", store.RoleAdmin)
	is.NoErr(err)
	is.Equal(u.Email, "jane.doe@acme.com") // trimmed and lower-cased
	is.Equal(u.OrgID, acme)
	is.Equal(u.OrgName, "acme")
	is.Equal(u.Role, store.RoleAdmin)
	is.True(!u.PasswordSet)
	is.Equal(u.CreatedAt, clk.Now())
	is.True(u.DisabledAt == nil && u.LastLoginAt == nil)
	is.Equal(len(token), 43) // 32 bytes, base64url without padding
	is.True(!strings.ContainsAny(token, "+/="))

	viewer, _, err := db.CreateUser(ctx, store.BySystem, "acme", "bob@acme.com", "")
	is.NoErr(err)
	is.Equal(viewer.Role, store.RoleViewer) // "" is a viewer
	_, _, err = db.CreateUser(ctx, store.BySystem, "beta", "amy@beta.io", store.RoleViewer)
	is.NoErr(err)

	list, err := db.ListUsers(ctx, "acme")
	is.NoErr(err)
	is.Equal(len(list), 2)
	is.Equal(list[0].Email, "bob@acme.com") // by email
	is.Equal(list[1], *u)                   // what CreateUser returned is what is stored
	all, err := db.ListUsers(ctx, "")
	is.NoErr(err)
	var emails []string
	for _, u := range all {
		emails = append(emails, u.OrgName+"/"+u.Email)
	}
	is.Equal(emails, []string{"acme/bob@acme.com", "acme/jane.doe@acme.com", "beta/amy@beta.io"})
	none, err := db.ListUsers(ctx, "beta")
	is.NoErr(err)
	is.Equal(len(none), 1)

	_, err = db.ListUsers(ctx, "nope")
	errKind(t, err, enrich.KindNotFound, "")
}

func testCreateUserRefusals(t *testing.T, env *Env) {
	ctx := context.Background()
	db := env.DB
	NewOrg(t, db, "acme")
	NewOrg(t, db, "beta")
	_, _, err := db.CreateUser(ctx, store.BySystem, "acme", "jane@acme.com", store.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}

	// The same address in any case, in any organization, is taken.
	for _, org := range []string{"acme", "beta"} {
		_, _, err = db.CreateUser(ctx, store.BySystem, org, "JANE@acme.com", store.RoleAdmin)
		errKind(t, err, enrich.KindConflict, "user_exists")
	}
	_, _, err = db.CreateUser(ctx, store.BySystem, "nope", "amy@acme.com", store.RoleViewer)
	errKind(t, err, enrich.KindNotFound, "")
	for _, role := range []string{"owner", "Admin", " admin"} {
		_, _, err = db.CreateUser(ctx, store.BySystem, "acme", "amy@acme.com", role)
		errKind(t, err, enrich.KindInvalid, "")
	}
	long := strings.Repeat("a", 64) + "@" + strings.Repeat("b", 185) + ".com" // 254 bytes
	for _, bad := range []string{"", "jane", "jane@", "@acme.com", "Jane <jane@acme.com>", "jane@acme.com, bob@acme.com", "ja ne@acme.com", "x" + long} {
		_, _, err = db.CreateUser(ctx, store.BySystem, "acme", bad, store.RoleViewer)
		errKind(t, err, enrich.KindInvalid, "")
	}
	_, _, err = db.CreateUser(ctx, store.BySystem, "acme", long, store.RoleViewer)
	if err != nil {
		t.Fatalf("an address of 254 bytes: %v", err)
	}

	list, err := db.ListUsers(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("%d users after the refusals, want 2", len(list))
	}
}

func testSetupLinkIsSingleUseAndExpires(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	NewOrg(t, db, "acme")
	created, token, err := db.CreateUser(ctx, store.BySystem, "acme", "jane@acme.com", store.RoleViewer)
	is.NoErr(err)

	u, err := db.LinkUser(ctx, token)
	is.NoErr(err)
	is.Equal(*u, *created)
	for _, bad := range []string{"", "nope", token + "x", strings.Repeat("a", 1<<20)} {
		_, err = db.LinkUser(ctx, bad)
		errKind(t, err, enrich.KindNotFound, "link_invalid")
	}

	set, err := db.SetPassword(ctx, token, "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA")
	is.NoErr(err)
	is.True(set.PasswordSet)
	_, err = db.LinkUser(ctx, token) // used once: gone
	errKind(t, err, enrich.KindNotFound, "link_invalid")
	_, err = db.SetPassword(ctx, token, "$argon2id$other")
	errKind(t, err, enrich.KindNotFound, "link_invalid")
	_, hash, err := db.UserForLogin(ctx, "jane@acme.com")
	is.NoErr(err)
	is.Equal(hash, "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA") // the second use changed nothing

	// A link works up to the last millisecond of its 24 hours.
	fresh, err := db.NewSetupLink(ctx, "jane@acme.com")
	is.NoErr(err)
	clk.Add(store.SetupLinkTTL - time.Millisecond)
	_, err = db.LinkUser(ctx, fresh)
	is.NoErr(err)
	clk.Add(time.Millisecond)
	_, err = db.LinkUser(ctx, fresh)
	errKind(t, err, enrich.KindNotFound, "link_invalid")
	_, err = db.SetPassword(ctx, fresh, "$argon2id$late")
	errKind(t, err, enrich.KindNotFound, "link_invalid")
}

func testNewSetupLinkVoidsEarlierOnes(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	NewOrg(t, db, "acme")
	_, first, err := db.CreateUser(ctx, store.BySystem, "acme", "jane@acme.com", store.RoleViewer)
	is.NoErr(err)
	second, err := db.NewSetupLink(ctx, " JANE@acme.com")
	is.NoErr(err)
	is.True(second != first)
	_, err = db.LinkUser(ctx, first)
	errKind(t, err, enrich.KindNotFound, "link_invalid")
	_, err = db.LinkUser(ctx, second)
	is.NoErr(err)

	_, err = db.NewSetupLink(ctx, "nobody@acme.com")
	errKind(t, err, enrich.KindNotFound, "")
	_, err = db.DisableUser(ctx, "jane@acme.com")
	is.NoErr(err)
	_, err = db.NewSetupLink(ctx, "jane@acme.com") // a disabled user could not use it
	errKind(t, err, enrich.KindConflict, "user_disabled")
}

func testSetPasswordEndsSessionsAndVoidsLinks(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	NewOrg(t, db, "acme")
	_, token, err := db.CreateUser(ctx, store.BySystem, "acme", "jane@acme.com", store.RoleAdmin)
	is.NoErr(err)
	u, err := db.SetPassword(ctx, token, "$argon2id$one")
	is.NoErr(err)
	session, err := db.CreateSession(ctx, store.BySystem, u.ID, time.Hour)
	is.NoErr(err)
	_, err = db.SessionUser(ctx, session, time.Hour)
	is.NoErr(err)

	// A reset: two links asked for, the older voided by the newer; the newer is used.
	older, err := db.NewSetupLink(ctx, "jane@acme.com")
	is.NoErr(err)
	reset, err := db.NewSetupLink(ctx, "jane@acme.com")
	is.NoErr(err)
	_, err = db.SessionUser(ctx, session, time.Hour) // a new link alone ends nothing
	is.NoErr(err)
	_, err = db.SetPassword(ctx, reset, "$argon2id$two")
	is.NoErr(err)

	_, err = db.SessionUser(ctx, session, time.Hour)
	errKind(t, err, enrich.KindUnauthorized, "") // signed out everywhere
	for _, link := range []string{older, reset} {
		_, err = db.LinkUser(ctx, link)
		errKind(t, err, enrich.KindNotFound, "link_invalid")
	}
	_, hash, err := db.UserForLogin(ctx, "jane@acme.com")
	is.NoErr(err)
	is.Equal(hash, "$argon2id$two")

	_, err = db.SetPassword(ctx, reset, "")
	is.True(err != nil) // an empty hash is refused whatever the link
}

func testUserForLoginFailsTheSameWayForEveryReason(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	NewOrg(t, db, "acme")
	_, token, err := db.CreateUser(ctx, store.BySystem, "acme", "jane@acme.com", store.RoleAdmin)
	is.NoErr(err)
	_, err = db.SetPassword(ctx, token, "$argon2id$jane")
	is.NoErr(err)
	_, _, err = db.CreateUser(ctx, store.BySystem, "acme", "nopass@acme.com", store.RoleViewer)
	is.NoErr(err)
	_, token, err = db.CreateUser(ctx, store.BySystem, "acme", "gone@acme.com", store.RoleViewer)
	is.NoErr(err)
	_, err = db.SetPassword(ctx, token, "$argon2id$gone")
	is.NoErr(err)
	_, err = db.DisableUser(ctx, "gone@acme.com")
	is.NoErr(err)

	u, hash, err := db.UserForLogin(ctx, " Jane@ACME.com ")
	is.NoErr(err)
	is.Equal(u.Email, "jane@acme.com")
	is.Equal(u.OrgName, "acme")
	is.Equal(hash, "$argon2id$jane")

	var first *enrich.Error
	for _, email := range []string{"nobody@acme.com", "nopass@acme.com", "gone@acme.com", "", strings.Repeat("x", 1000)} {
		u, hash, err := db.UserForLogin(ctx, email)
		is.True(u == nil && hash == "")
		e := errKind(t, err, enrich.KindUnauthorized, "")
		is.Equal(e.Message, "email or password is wrong")
		if first == nil {
			first = e
		}
		is.Equal(*e, *first) // nothing tells one reason from another
	}
}

func testDisableUser(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	NewOrg(t, db, "acme")
	_, token, err := db.CreateUser(ctx, store.BySystem, "acme", "jane@acme.com", store.RoleAdmin)
	is.NoErr(err)
	u, err := db.SetPassword(ctx, token, "$argon2id$jane")
	is.NoErr(err)
	session, err := db.CreateSession(ctx, store.BySystem, u.ID, time.Hour)
	is.NoErr(err)
	link, err := db.NewSetupLink(ctx, "jane@acme.com")
	is.NoErr(err)

	disabled, err := db.DisableUser(ctx, "JANE@acme.com")
	is.NoErr(err)
	is.Equal(*disabled.DisabledAt, clk.Now())
	_, err = db.SessionUser(ctx, session, time.Hour)
	errKind(t, err, enrich.KindUnauthorized, "")
	_, err = db.LinkUser(ctx, link)
	errKind(t, err, enrich.KindNotFound, "link_invalid")
	_, err = db.CreateSession(ctx, store.BySystem, u.ID, time.Hour) // a login racing the disable loses
	errKind(t, err, enrich.KindUnauthorized, "")

	clk.Add(time.Hour)
	again, err := db.DisableUser(ctx, "jane@acme.com")
	is.NoErr(err)
	is.Equal(*again.DisabledAt, *disabled.DisabledAt) // the first date stays
	list, err := db.ListUsers(ctx, "acme")
	is.NoErr(err)
	is.Equal(list[0], *again)

	_, err = db.DisableUser(ctx, "nobody@acme.com")
	errKind(t, err, enrich.KindNotFound, "")

	// The session of a user disabled without DisableUser's clean-up (by hand in the
	// file, say) is refused all the same.
	_, other := sessionUser(t, db, "bob@acme.com", time.Hour)
	_, err = env.Raw().Exec(`UPDATE users SET disabled_at = 1 WHERE email = 'bob@acme.com'`)
	is.NoErr(err)
	_, err = db.SessionUser(ctx, other, time.Hour)
	errKind(t, err, enrich.KindUnauthorized, "")
}

// sessionUser makes a user with a password and a session for it.
func sessionUser(t *testing.T, db *store.DB, email string, absolute time.Duration) (*store.User, string) {
	t.Helper()
	ctx := context.Background()
	_, token, err := db.CreateUser(ctx, store.BySystem, "acme", email, store.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	u, err := db.SetPassword(ctx, token, "$argon2id$x")
	if err != nil {
		t.Fatal(err)
	}
	session, err := db.CreateSession(ctx, store.BySystem, u.ID, absolute)
	if err != nil {
		t.Fatal(err)
	}
	return u, session
}

func testSessionsIdleAndAbsoluteExpiry(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	NewOrg(t, db, "acme")
	const idle = 10 * time.Minute
	start := clk.Now()
	u, session := sessionUser(t, db, "jane@acme.com", time.Hour)

	got, err := db.SessionUser(ctx, session, idle)
	is.NoErr(err)
	is.Equal(got.ID, u.ID)
	is.Equal(*got.LastLoginAt, start) // CreateSession recorded the login
	for _, bad := range []string{"", "nope", session + "x", strings.Repeat("a", 1<<20)} {
		_, err = db.SessionUser(ctx, bad, idle)
		errKind(t, err, enrich.KindUnauthorized, "")
	}

	// Used every 9 minutes, it lives until its absolute end, and not a millisecond more.
	for clk.Now().Before(start.Add(time.Hour - 9*time.Minute)) {
		clk.Add(9 * time.Minute)
		_, err = db.SessionUser(ctx, session, idle)
		is.NoErr(err)
	}
	clk.Add(start.Add(time.Hour - time.Millisecond).Sub(clk.Now()))
	_, err = db.SessionUser(ctx, session, idle)
	is.NoErr(err)
	clk.Add(time.Millisecond)
	_, err = db.SessionUser(ctx, session, idle)
	errKind(t, err, enrich.KindUnauthorized, "")

	// Left alone, it ends once idle for longer than idle.
	_, other := sessionUser(t, db, "bob@acme.com", time.Hour)
	clk.Add(idle)
	_, err = db.SessionUser(ctx, other, idle)
	is.NoErr(err) // idle exactly that long: still fine, and seen now
	clk.Add(idle + time.Millisecond)
	_, err = db.SessionUser(ctx, other, idle)
	errKind(t, err, enrich.KindUnauthorized, "")
}

func testSessionLastSeenIsWrittenAtMostOnceAMinute(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	raw := env.Raw()
	NewOrg(t, db, "acme")
	start := clk.Now()
	_, session := sessionUser(t, db, "jane@acme.com", time.Hour)
	lastSeen := func() time.Time {
		t.Helper()
		var v int64
		is.NoErr(raw.QueryRow(`SELECT last_seen_at FROM sessions`).Scan(&v))
		return time.UnixMilli(v).UTC()
	}

	const idle = 90 * time.Second
	clk.Add(59 * time.Second)
	_, err := db.SessionUser(ctx, session, idle)
	is.NoErr(err)
	is.Equal(lastSeen(), start) // under a minute old: not written
	clk.Add(time.Second)
	_, err = db.SessionUser(ctx, session, idle)
	is.NoErr(err)
	is.Equal(lastSeen(), start.Add(time.Minute)) // a minute old: written
	clk.Add(30 * time.Second)
	_, err = db.SessionUser(ctx, session, idle)
	is.NoErr(err)
	is.Equal(lastSeen(), start.Add(time.Minute))

	// What was not written does not count: 90 s after the last write the session is
	// still alive, a millisecond later it has been idle too long, though it was used
	// 60 s before.
	clk.Add(time.Minute)
	_, err = db.SessionUser(ctx, session, idle)
	is.NoErr(err)
	is.Equal(lastSeen(), start.Add(150*time.Second))
	clk.Add(59 * time.Second)
	_, err = db.SessionUser(ctx, session, idle)
	is.NoErr(err)
	clk.Add(31*time.Second + time.Millisecond)
	_, err = db.SessionUser(ctx, session, idle)
	errKind(t, err, enrich.KindUnauthorized, "")
}

func testEndSession(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	NewOrg(t, db, "acme")
	u, session := sessionUser(t, db, "jane@acme.com", time.Hour)
	other, err := db.CreateSession(ctx, store.BySystem, u.ID, time.Hour) // the same user on another device
	is.NoErr(err)

	is.NoErr(db.EndSession(ctx, session))
	_, err = db.SessionUser(ctx, session, time.Hour)
	errKind(t, err, enrich.KindUnauthorized, "")
	_, err = db.SessionUser(ctx, other, time.Hour)
	is.NoErr(err)                         // only that session ended
	is.NoErr(db.EndSession(ctx, session)) // ended twice, or never known: no error
	is.NoErr(db.EndSession(ctx, "nope"))
	is.NoErr(db.EndSession(ctx, ""))
}

func testPurgeSessions(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock
	raw := env.Raw()
	NewOrg(t, db, "acme")
	const idle = time.Hour
	count := func(table string) (n int) {
		t.Helper()
		is.NoErr(raw.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n))
		return n
	}

	_, short := sessionUser(t, db, "short@acme.com", 2*time.Hour) // absolute end first
	_, long := sessionUser(t, db, "long@acme.com", 24*time.Hour)
	_, kept := sessionUser(t, db, "kept@acme.com", 24*time.Hour)
	_, _, err := db.CreateUser(ctx, store.BySystem, "acme", "linked@acme.com", store.RoleViewer) // a link, never used
	is.NoErr(err)

	n, err := db.PurgeSessions(ctx, idle)
	is.NoErr(err)
	is.Equal(n, 0) // nothing is old yet

	clk.Add(50 * time.Minute)
	_, err = db.SessionUser(ctx, short, idle)
	is.NoErr(err)
	_, err = db.SessionUser(ctx, kept, idle)
	is.NoErr(err)
	clk.Add(70 * time.Minute) // 2 h: short is past its end; long idle for 2 h; kept for 70 min
	_, err = db.SessionUser(ctx, kept, idle)
	errKind(t, err, enrich.KindUnauthorized, "") // idle too long, as the purge will judge
	clk.Add(-15 * time.Minute)                   // 1 h 45: kept idle for 55 min
	_, err = db.SessionUser(ctx, kept, idle)
	is.NoErr(err)
	clk.Add(15 * time.Minute)

	n, err = db.PurgeSessions(ctx, idle)
	is.NoErr(err)
	is.Equal(n, 2) // short (past its end) and long (idle)
	is.Equal(count("sessions"), 1)
	_, err = db.SessionUser(ctx, kept, idle)
	is.NoErr(err)
	_, err = db.SessionUser(ctx, long, idle)
	errKind(t, err, enrich.KindUnauthorized, "")
	is.Equal(count("user_links"), 1)

	clk.Add(store.SetupLinkTTL)
	n, err = db.PurgeSessions(ctx, idle)
	is.NoErr(err)
	is.Equal(n, 2) // kept, idle at last, and the expired link
	is.Equal(count("sessions"), 0)
	is.Equal(count("user_links"), 0)
	is.Equal(count("users"), 4) // users stay

	_, err = db.PurgeSessions(ctx, 0)
	is.True(err != nil) // a zero idle timeout would end every session
}
