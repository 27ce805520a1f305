package dashboard_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"enrichd/server/servertest"
	"enrichd/store"

	"github.com/matryer/is"
)

// newestFirst is the ids of ledger rows, newest first.
func newestFirst(entries []store.LedgerEntry) []int64 {
	ids := make([]int64, len(entries))
	for i, en := range entries {
		ids[len(entries)-1-i] = en.ID
	}
	return ids
}

var ledgerRowPattern = regexp.MustCompile(`<tr class="ledger" id="ledger-(\d+)">`)

// ledgerIDs are the ids of the ledger rows a credits page shows, in its order.
func ledgerIDs(t *testing.T, p *servertest.WebPage) []int64 {
	t.Helper()
	var ids []int64
	for _, m := range ledgerRowPattern.FindAllStringSubmatch(p.Body, -1) {
		id, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// ledgerRowHTML is the HTML of one ledger row of a credits page.
func ledgerRowHTML(p *servertest.WebPage, id int64) string {
	_, after, ok := strings.Cut(p.Body, fmt.Sprintf(`<tr class="ledger" id="ledger-%d">`, id))
	if !ok {
		return ""
	}
	row, _, _ := strings.Cut(after, "</tr>")
	return row
}

var olderPattern = regexp.MustCompile(`<a href="(/dashboard/credits\?before=\d+)" rel="next">Older →</a>`)

// olderLink is the page's "Older →" link, "" on the last page.
func olderLink(p *servertest.WebPage) string {
	m := olderPattern.FindStringSubmatch(p.Body)
	if m == nil {
		return ""
	}
	return m[1]
}

func TestDashboardCreditsPageForBothRoles(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	taskID := e.EveryKind()
	admin, viewer := e.SignIn("acme", "admin"), e.SignIn("acme", "viewer")

	for _, b := range []*servertest.Browser{admin, viewer} {
		p := b.Get("/dashboard/credits")
		is.Equal(p.Status, http.StatusOK)
		is.True(p.Has(`id="balance">100<`)) // 100 + 5 - charge + refund - 5
		is.True(p.Has(`<a id="export-csv" href="/dashboard/credits.csv">`))
		is.True(p.Has(`<span class="status failed">expired</span>`)) // the 5 in the grants
		ledger := e.LedgerOf("acme")
		is.Equal(ledgerIDs(t, p), newestFirst(ledger))
		kinds := map[string]int{}
		for _, en := range ledger {
			row := ledgerRowHTML(p, en.ID)
			kinds[en.Kind]++
			sign := "+"
			if en.Kind == store.LedgerCharge || en.Kind == store.LedgerExpiry {
				sign = "−"
			}
			is.True(strings.Contains(row, `<td class="lead">`+en.Kind+"</td>"))
			is.True(strings.Contains(row, `<td class="amount st">`+sign+strconv.FormatInt(en.Amount, 10)+"</td>"))
			hasLink := strings.Contains(row, `<a href="/dashboard/tasks/`+taskID+`">`)
			is.Equal(hasLink, en.TaskID != nil) // charges and refunds lead to their task
		}
		is.Equal(kinds, map[string]int{"grant": 2, "charge": 1, "refund": 1, "expiry": 1})
		is.True(olderLink(p) == "") // one page
		is.True(!p.Has("← Newest"))
	}
}

func TestDashboardLedgerIsPagedByIndex(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	ctx := context.Background()
	for i := range 60 {
		if _, err := e.DB.GrantCredits(ctx, "acme", int64(i+1), nil); err != nil {
			t.Fatal(err)
		}
	}
	want := newestFirst(e.LedgerOf("acme")) // 61 rows
	b := e.SignIn("acme", "viewer")

	p := b.Get("/dashboard/credits")
	is.Equal(p.Status, http.StatusOK)
	is.Equal(ledgerIDs(t, p), want[:50])
	older := olderLink(p)
	is.Equal(older, fmt.Sprintf("/dashboard/credits?before=%d", want[49]))

	p = b.Get(older)
	is.Equal(p.Status, http.StatusOK)
	is.Equal(ledgerIDs(t, p), want[50:]) // the rest, none twice, none missed
	is.Equal(olderLink(p), "")
	is.True(p.Has(`<a href="/dashboard/credits">← Newest</a>`))
	is.True(p.Has(`id="balance">1930<`)) // every page shows the whole balance: 100 + 1 + … + 60

	// Past the oldest row there is nothing, said so.
	p = b.Get(fmt.Sprintf("/dashboard/credits?before=%d", want[len(want)-1]))
	is.Equal(p.Status, http.StatusOK)
	is.Equal(len(ledgerIDs(t, p)), 0)
	is.True(p.Has("No older rows."))

	for _, bad := range []string{"abc", "-1", "0", "1.5", "99999999999999999999"} {
		p = b.Get("/dashboard/credits?before=" + url.QueryEscape(bad))
		is.Equal(p.Status, http.StatusBadRequest)
	}

	// Exactly a page of rows: no link to an empty older page.
	e.NewOrg("even", 1)
	for range 49 {
		if _, err := e.DB.GrantCredits(ctx, "even", 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	p = e.SignIn("even", "admin").Get("/dashboard/credits")
	is.Equal(len(ledgerIDs(t, p)), 50)
	is.Equal(olderLink(p), "")
}

func TestDashboardLedgerPagesStayInTheirOrganization(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	e.NewOrg("other", 7)
	acmeIDs := newestFirst(e.LedgerOf("acme"))
	otherIDs := newestFirst(e.LedgerOf("other"))

	// A cursor is only a position: before another org's row, acme still sees acme's.
	p := e.SignIn("acme", "admin").Get(fmt.Sprintf("/dashboard/credits?before=%d", otherIDs[0]+1))
	is.Equal(p.Status, http.StatusOK)
	is.Equal(ledgerIDs(t, p), acmeIDs)
	p = e.SignIn("other", "viewer").Get("/dashboard/credits")
	is.Equal(ledgerIDs(t, p), otherIDs)
	is.True(p.Has(`id="balance">7<`))
}

// csvExport downloads a browser's ledger export and checks what every export must be.
func csvExport(t *testing.T, e *servertest.Env, b *servertest.Browser, org string) [][]string {
	t.Helper()
	is := is.New(t)
	p := b.Get("/dashboard/credits.csv")
	is.Equal(p.Status, http.StatusOK)
	is.Equal(p.Header.Get("Content-Type"), "text/csv; charset=utf-8")
	is.Equal(p.Header.Get("Content-Disposition"),
		`attachment; filename="enrichd-credits-`+org+`-`+e.Clock.Now().UTC().Format("2006-01-02")+`.csv"`)
	records, err := csv.NewReader(strings.NewReader(p.Body)).ReadAll()
	is.NoErr(err)
	is.True(len(records) > 0)
	is.Equal(records[0], []string{"id", "created_at", "kind", "amount", "signed_amount", "grant_id", "task_id"})
	return records[1:]
}

func TestDashboardCreditsCSVExport(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	taskID := e.EveryKind()
	ctx := context.Background()
	// More rows than the export reads at a time, so it goes on past its first page.
	for range store.MaxLedgerPage + 100 {
		if _, err := e.DB.GrantCredits(ctx, "acme", 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	e.NewOrg("other", 7)
	viewer := e.SignIn("acme", "viewer") // reading is enough to export

	rows := csvExport(t, e, viewer, "acme")
	ledger := e.LedgerOf("acme") // read after the export, which wrote off the expired grant
	is.Equal(len(rows), len(ledger))
	byID := map[int64]store.LedgerEntry{}
	for _, en := range ledger {
		byID[en.ID] = en
	}
	var sum int64
	var ids []int64
	for _, row := range rows {
		is.Equal(len(row), 7)
		id, err := strconv.ParseInt(row[0], 10, 64)
		is.NoErr(err)
		en, ok := byID[id]
		is.True(ok) // acme's row, no one else's
		ids = append(ids, id)
		at, err := time.Parse(time.RFC3339, row[1])
		is.NoErr(err)
		is.True(strings.HasSuffix(row[1], "Z")) // UTC
		is.True(at.Equal(en.CreatedAt))
		is.Equal(row[2], en.Kind)
		is.Equal(row[3], strconv.FormatInt(en.Amount, 10))
		signed, err := strconv.ParseInt(row[4], 10, 64)
		is.NoErr(err)
		if en.Kind == store.LedgerCharge || en.Kind == store.LedgerExpiry {
			is.Equal(signed, -en.Amount)
		} else {
			is.Equal(signed, en.Amount)
		}
		sum += signed
		is.Equal(row[5], strconv.FormatInt(en.GrantID, 10))
		if en.TaskID != nil {
			is.Equal(row[6], taskID)
		} else {
			is.Equal(row[6], "")
		}
	}
	is.Equal(ids, newestFirst(ledger)) // newest first, each row once
	is.Equal(sum, e.Balance("acme").Balance)
	is.Equal(sum, int64(100+2*(store.MaxLedgerPage+100)))

	// Another organization's export holds its own rows only.
	other := csvExport(t, e, e.SignIn("other", "admin"), "other")
	is.Equal(len(other), 1)
	is.Equal(other[0][2], "grant")
	is.Equal(other[0][4], "7")
	otherID, _ := strconv.ParseInt(other[0][0], 10, 64)
	is.Equal(otherID, e.LedgerOf("other")[0].ID)
	is.True(!slices.Contains(ids, otherID))
}

func TestDashboardCreditsNeedASession(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := servertest.NewEnv(t)
	b := e.NewBrowser()
	for _, path := range []string{"/dashboard/credits", "/dashboard/credits.csv"} {
		p := b.Get(path, "Authorization", "Bearer "+e.Key) // an API key is no session
		is.Equal(p.Status, http.StatusSeeOther)
		is.True(strings.HasPrefix(p.Location, "/dashboard/login"))
		is.True(!p.Has("grant"))
	}
}
