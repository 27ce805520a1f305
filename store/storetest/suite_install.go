package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"strings"
	"sync"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/matryer/is"
)

const installHash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA"

// testFirstStartLink: the first-start link is made only while there is no user, keeps
// only its hash, replaces the one before, lasts an hour, and is used once.
func testFirstStartLink(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db, clk := env.DB, env.Clock

	has, err := db.HasUsers(ctx)
	is.NoErr(err)
	is.True(!has)
	first, err := db.NewInstallLink(ctx)
	is.NoErr(err)
	is.Equal(len(first), 43)
	is.NoErr(db.CheckInstallLink(ctx, first))
	token, err := db.NewInstallLink(ctx) // each start makes a new one; the earlier stops working
	is.NoErr(err)
	is.True(token != first)
	errKind(t, db.CheckInstallLink(ctx, first), enrich.KindNotFound, "link_invalid")
	is.NoErr(db.CheckInstallLink(ctx, token))
	for _, bad := range []string{"", "nope", token + "x", strings.Repeat("a", 1<<20)} {
		errKind(t, db.CheckInstallLink(ctx, bad), enrich.KindNotFound, "link_invalid")
	}

	// Only the token's sha256 is stored.
	var rows int
	var stored []byte
	raw := env.Raw()
	is.NoErr(raw.QueryRow(`SELECT count(*) FROM install_links`).Scan(&rows))
	is.Equal(rows, 1)
	is.NoErr(raw.QueryRow(`SELECT hash FROM install_links`).Scan(&stored))
	sum := sha256.Sum256([]byte(token))
	is.True(bytes.Equal(stored, sum[:]))

	// Refusals change nothing: no organization, no user, the link still good.
	for _, c := range []struct {
		in   store.NewInstall
		kind enrich.Kind
	}{
		{store.NewInstall{OrgName: "", Email: "owner@acme.com", PasswordHash: installHash}, enrich.KindInvalid},
		{store.NewInstall{OrgName: "acme", Email: "not an address", PasswordHash: installHash}, enrich.KindInvalid},
	} {
		_, err := db.Install(ctx, store.BySystem, token, c.in)
		errKind(t, err, c.kind, "")
	}
	_, err = db.Install(ctx, store.BySystem, token, store.NewInstall{OrgName: "acme", Email: "owner@acme.com"})
	is.True(err != nil) // no password hash
	_, err = db.Install(ctx, store.BySystem, first, store.NewInstall{OrgName: "acme", Email: "owner@acme.com", PasswordHash: installHash})
	errKind(t, err, enrich.KindNotFound, "link_invalid")
	orgs, err := db.ListOrgs(ctx)
	is.NoErr(err)
	is.Equal(len(orgs), 0)
	users, err := db.ListUsers(ctx, "")
	is.NoErr(err)
	is.Equal(len(users), 0)
	is.NoErr(db.CheckInstallLink(ctx, token))

	// It works up to the last millisecond of its hour.
	clk.Add(store.InstallLinkTTL - time.Millisecond)
	is.NoErr(db.CheckInstallLink(ctx, token))
	clk.Add(time.Millisecond)
	errKind(t, db.CheckInstallLink(ctx, token), enrich.KindNotFound, "link_invalid")
	_, err = db.Install(ctx, store.BySystem, token, store.NewInstall{OrgName: "acme", Email: "owner@acme.com", PasswordHash: installHash})
	errKind(t, err, enrich.KindNotFound, "link_invalid")

	token, err = db.NewInstallLink(ctx)
	is.NoErr(err)
	u, err := db.Install(ctx, store.BySystem, token, store.NewInstall{OrgName: "acme", Email: " Owner@Acme.com ", PasswordHash: installHash})
	is.NoErr(err)
	is.Equal(u.Email, "owner@acme.com")
	is.Equal(u.Role, store.RoleAdmin)
	is.Equal(u.OrgName, "acme")
	is.True(u.PasswordSet)
	org, err := db.FindOrg(ctx, "acme")
	is.NoErr(err)
	is.Equal(u.OrgID, org.ID)
	got, hash, err := db.UserForLogin(ctx, "owner@acme.com")
	is.NoErr(err)
	is.Equal(hash, installHash)
	is.Equal(*got, *u) // what Install returned is what is stored

	has, err = db.HasUsers(ctx)
	is.NoErr(err)
	is.True(has)

	// Used once: refused, and no new link is made now that a user exists.
	errKind(t, db.CheckInstallLink(ctx, token), enrich.KindNotFound, "link_invalid")
	_, err = db.Install(ctx, store.BySystem, token, store.NewInstall{OrgName: "other", Email: "eve@other.com", PasswordHash: installHash})
	errKind(t, err, enrich.KindNotFound, "link_invalid")
	none, err := db.NewInstallLink(ctx)
	is.NoErr(err)
	is.Equal(none, "")
	is.NoErr(raw.QueryRow(`SELECT count(*) FROM install_links`).Scan(&rows))
	is.Equal(rows, 0)
	users, err = db.ListUsers(ctx, "")
	is.NoErr(err)
	is.Equal(len(users), 1)
}

// testFirstStartJoinsAnExistingOrganization: an organization made with the CLI before
// the first sign-in gets the admin, and a user made with the CLI spends the link.
func testFirstStartJoinsAnExistingOrganization(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	acme := NewOrg(t, db, "acme")
	token, err := db.NewInstallLink(ctx)
	is.NoErr(err)
	u, err := db.Install(ctx, store.BySystem, token, store.NewInstall{OrgName: "acme", Email: "owner@acme.com", PasswordHash: installHash})
	is.NoErr(err)
	is.Equal(u.OrgID, acme)
	orgs, err := db.ListOrgs(ctx)
	is.NoErr(err)
	is.Equal(len(orgs), 1)

	none, err := env.Open().NewInstallLink(ctx) // another process on the same database

	is.NoErr(err)
	is.Equal(none, "")
}

// testFirstStartLinkIsSpentByAnyUser: a user added another way (the CLI) while a link
// is out makes the link useless.
func testFirstStartLinkIsSpentByAnyUser(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	db := env.DB
	token, err := db.NewInstallLink(ctx)
	is.NoErr(err)
	NewOrg(t, db, "acme")
	_, _, err = db.CreateUser(ctx, store.BySystem, "acme", "jane@acme.com", store.RoleViewer)
	is.NoErr(err)
	errKind(t, db.CheckInstallLink(ctx, token), enrich.KindNotFound, "link_invalid")
	_, err = db.Install(ctx, store.BySystem, token, store.NewInstall{OrgName: "acme", Email: "owner@acme.com", PasswordHash: installHash})
	errKind(t, err, enrich.KindNotFound, "link_invalid")
}

// testFirstStartLinkUsedTwiceAtOnce: of two uses of one link at the same moment, from
// two handles (two replicas), one makes the admin and the other is refused.
func testFirstStartLinkUsedTwiceAtOnce(t *testing.T, env *Env) {
	is := is.New(t)
	ctx := context.Background()
	token, err := env.DB.NewInstallLink(ctx)
	is.NoErr(err)
	handles := []*store.DB{env.DB, env.Open()}
	errs := make([]error, len(handles))
	var wg sync.WaitGroup
	for i, h := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = h.Install(ctx, store.BySystem, token, store.NewInstall{OrgName: "org" + string(rune('a'+i)),
				Email: "owner" + string(rune('a'+i)) + "@acme.com", PasswordHash: installHash})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		errKind(t, err, enrich.KindNotFound, "link_invalid")
	}
	is.Equal(ok, 1)
	users, err := env.DB.ListUsers(ctx, "")
	is.NoErr(err)
	is.Equal(len(users), 1)
	orgs, err := env.DB.ListOrgs(ctx)
	is.NoErr(err)
	is.Equal(len(orgs), 1) // the refused one's organization was rolled back
}
