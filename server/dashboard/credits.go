package dashboard

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
)

// ledgerPageSize is how many ledger rows the credits page shows at a time.
const ledgerPageSize = 50

// exportPageSize is how many ledger rows the CSV export reads at a time: the file is
// written as it is read, so the ledger is never held in memory whole.
const exportPageSize = store.MaxLedgerPage

// ledgerRow is a ledger entry as the page shows it, with the sign of what it did to
// the balance.
type ledgerRow struct {
	store.LedgerEntry
	TakesAway bool
}

// takesAway says whether a ledger row lowers the balance: charges and expiries do,
// grants and refunds add. Ledger amounts themselves are never negative.
func takesAway(e store.LedgerEntry) bool {
	return e.Kind == store.LedgerCharge || e.Kind == store.LedgerExpiry
}

// signedAmount is what a ledger row did to the balance.
func signedAmount(e store.LedgerEntry) int64 {
	if takesAway(e) {
		return -e.Amount
	}
	return e.Amount
}

// parseBefore reads the ledger page's cursor: the id of the row the page starts
// before, 0 when absent (the newest rows).
func parseBefore(r *http.Request) (int64, error) {
	raw := r.URL.Query().Get("before")
	if raw == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, enrich.Errorf(enrich.KindInvalid, "before must be a ledger row id, a positive whole number, not %q", server.Clip(raw, 40))
	}
	return id, nil
}

func handleCredits(s *Dashboard) http.Handler {
	type data struct {
		Balance store.Balance
		Grants  []store.Grant
		Rows    []ledgerRow
		Before  int64 // the cursor of this page, 0 on the newest
		Older   int64 // the cursor of the next page, 0 when this one is the last
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := dashUser(r)
		ctx := r.Context()
		before, err := parseBefore(r)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		d := data{Before: before}
		// The balance first: it writes off grants past their expiry, so the grants and
		// the ledger below show the same state it does.
		if d.Balance, err = s.db.CreditBalance(ctx, u.OrgName); err != nil {
			s.dashError(w, r, err)
			return
		}
		if d.Grants, err = s.db.ListGrants(ctx, u.OrgID); err != nil {
			s.dashError(w, r, err)
			return
		}
		// One row more than the page shows says whether an older page exists.
		entries, err := s.db.LedgerPage(ctx, u.OrgID, before, ledgerPageSize+1)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		if len(entries) > ledgerPageSize {
			entries = entries[:ledgerPageSize]
			d.Older = entries[len(entries)-1].ID
		}
		d.Rows = make([]ledgerRow, len(entries))
		for i, e := range entries {
			d.Rows[i] = ledgerRow{LedgerEntry: e, TakesAway: takesAway(e)}
		}
		s.render(w, r, http.StatusOK, "credits", view{Title: "Credits", Section: "credits", Notice: notice(r), Data: d})
	})
}

// ledgerCSVHeader names the export's columns. amount is as the ledger stores it,
// always positive; signed_amount is what the row did to the balance, so the column
// sums to it.
var ledgerCSVHeader = []string{"id", "created_at", "kind", "amount", "signed_amount", "grant_id", "task_id"}

// handleCreditsCSV exports the organization's whole ledger, newest first, reading and
// writing it a page at a time. Rows added while it runs have higher ids than the first
// page's and are not in the file: it is the ledger as it stood when the export began.
func handleCreditsCSV(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := dashUser(r)
		ctx := r.Context()
		// Writing off expired grants first makes the file add up to the balance the
		// credits page shows now.
		if _, err := s.db.CreditBalance(ctx, u.OrgName); err != nil {
			s.dashError(w, r, err)
			return
		}
		// The first page is read before the answer starts, so that a failure then is
		// still an error page rather than an empty file.
		page, err := s.db.LedgerPage(ctx, u.OrgID, 0, exportPageSize)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		hdr := w.Header()
		hdr.Set("Content-Type", "text/csv; charset=utf-8")
		hdr.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="enrichd-credits-%s-%s.csv"`,
			fileNamePart(u.OrgName), s.db.Now().UTC().Format(time.DateOnly)))
		w.WriteHeader(http.StatusOK)
		out := csv.NewWriter(w)
		out.Write(ledgerCSVHeader)
		for {
			for _, e := range page {
				task := ""
				if e.TaskID != nil {
					task = *e.TaskID
				}
				out.Write([]string{strconv.FormatInt(e.ID, 10), e.CreatedAt.UTC().Format(csvTime), e.Kind,
					strconv.FormatInt(e.Amount, 10), strconv.FormatInt(signedAmount(e), 10),
					strconv.FormatInt(e.GrantID, 10), task})
			}
			out.Flush()
			if err := out.Error(); err != nil {
				return // the client went away: there is no one to tell
			}
			if len(page) < exportPageSize {
				return
			}
			if page, err = s.db.LedgerPage(ctx, u.OrgID, page[len(page)-1].ID, exportPageSize); err != nil {
				s.srv.AbortStream(r, "credits export cut short", err)
			}
		}
	})
}

// csvTime is RFC 3339 in UTC to the millisecond the ledger keeps.
const csvTime = "2006-01-02T15:04:05.000Z"

// fileNamePart keeps what is safe in a quoted Content-Disposition file name. Org
// names are letters, digits, '.', '_' and '-' already; this holds whatever they become.
func fileNamePart(s string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			return c
		}
		return '_'
	}, s)
}
