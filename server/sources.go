package server

import (
	"context"
	"math"
	"net/http"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// SourcesReport is GET /v1/sources: for one organization, each configured source in
// the order the sources are asked, with what it cost this UTC month, its budgets and
// whose key it uses.
type SourcesReport struct {
	// Month is the UTC month the figures are of, "2026-11".
	Month   string         `json:"month"`
	Sources []SourceReport `json:"sources"`
}

// SourceReport is one source of SourcesReport.
type SourceReport struct {
	Name string `json:"name"`
	store.SourceUse
	// OwnKeyCredits are the vendor credits of the calls made with the organization's own key.
	OwnKeyCredits int64 `json:"own_key_vendor_credits"`
	// CreditUSD is what the operator set one vendor credit of the source to cost, and
	// USD the month's credits in it; both null where it is not set.
	CreditUSD *float64     `json:"credit_usd"`
	USD       *float64     `json:"usd"`
	Budget    SourceBudget `json:"budget"`
	Key       SourceKey    `json:"key"`
	// Days are the month's days the source was asked on, oldest first.
	Days []SourceDay `json:"days"`
}

// SourceBudget is a source's monthly caps of vendor credits for the organization:
// its own, the installation's (the lower of the database's and serve's flag), and
// what the lower of them leaves this month. Each null where no cap is set.
type SourceBudget struct {
	Organization *int64 `json:"organization"`
	Installation *int64 `json:"installation"`
	Remaining    *int64 `json:"remaining"`
}

// SourceKey is whose vendor key the source uses for the organization's tasks:
// "organization" (its own, shown by its last 4 characters), "installation", or
// "none" for a source that takes no key (dataset, web, sim).
type SourceKey struct {
	Owner    string  `json:"owner"`
	Last4    *string `json:"last4"`
	Failing  bool    `json:"failing"`
	Fallback bool    `json:"fallback"`
}

// SourceDay is one day of a source's month.
type SourceDay struct {
	Day string `json:"day"` // 2026-11-05
	store.SourceUse
}

// Key owners (SourceKey.Owner).
const (
	KeyOwnerOrganization = "organization"
	KeyOwnerInstallation = "installation"
	KeyOwnerNone         = "none"
)

// Sources reports, for orgID, each configured source with this UTC month's figures,
// budgets and key. The dashboard's Sources page shows the same.
func (s *Server) Sources(ctx context.Context, orgID string) (*SourcesReport, error) {
	now := s.db.Now()
	month := store.MonthStart(now)
	spend, err := s.db.SourceSpendSince(ctx, orgID, month)
	if err != nil {
		return nil, err
	}
	orgCaps, instCaps, err := s.db.SourceBudgets(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := &SourcesReport{Month: month.Format("2006-01"), Sources: make([]SourceReport, 0, len(s.cfg.Sources))}
	for _, src := range s.cfg.Sources {
		name := src.Name()
		rep := SourceReport{Name: name, Days: []SourceDay{}}
		if sp := spend[name]; sp != nil {
			rep.SourceUse, rep.OwnKeyCredits = sp.Total, sp.OwnKey.Credits
			for _, d := range sp.Days {
				rep.Days = append(rep.Days, SourceDay{Day: d.Day.Format(time.DateOnly), SourceUse: d.SourceUse})
			}
		}
		if price, ok := s.cfg.CreditUSD[name]; ok && price > 0 {
			usd := math.Round(float64(rep.Credits)*price*1e4) / 1e4
			rep.CreditUSD, rep.USD = &price, &usd
		}
		rep.Key, err = s.sourceKey(ctx, orgID, src)
		if err != nil {
			return nil, err
		}
		if c, ok := orgCaps[name]; ok {
			rep.Budget.Organization = &c
		}
		inst, hasInst := instCaps[name]
		if flag := s.cfg.SourceBudgets[name]; flag > 0 && (!hasInst || flag < inst) {
			inst, hasInst = flag, true
		}
		var left []int64
		if rep.Budget.Organization != nil {
			left = append(left, *rep.Budget.Organization-rep.Credits)
		}
		if hasInst {
			rep.Budget.Installation = &inst
			if !rep.Key.ownInUse() {
				st, err := s.db.SourceBudgetState(ctx, orgID, name, month, true)
				if err != nil {
					return nil, err
				}
				left = append(left, inst-st.InstallationSpent)
			}
		}
		if len(left) > 0 {
			r := max(0, left[0])
			for _, l := range left[1:] {
				r = min(r, max(0, l))
			}
			rep.Budget.Remaining = &r
		}
		out.Sources = append(out.Sources, rep)
	}
	return out, nil
}

// ownInUse says the organization's own key answers its tasks, so the installation's
// budget does not bind them.
func (k SourceKey) ownInUse() bool {
	return k.Owner == KeyOwnerOrganization && !(k.Failing && k.Fallback)
}

func (s *Server) sourceKey(ctx context.Context, orgID string, src enrich.Source) (SourceKey, error) {
	if _, keyed := src.(enrich.Keyed); !keyed {
		return SourceKey{Owner: KeyOwnerNone}, nil
	}
	if s.cfg.KeyInfos == nil {
		return SourceKey{Owner: KeyOwnerInstallation}, nil
	}
	info, err := s.cfg.KeyInfos.KeyInfo(ctx, orgID, src.Name())
	if err != nil {
		return SourceKey{}, err
	}
	if !info.Own {
		return SourceKey{Owner: KeyOwnerInstallation}, nil
	}
	k := SourceKey{Owner: KeyOwnerOrganization, Failing: info.Failing, Fallback: info.Fallback}
	if info.Last4 != "" {
		k.Last4 = &info.Last4
	}
	return k, nil
}

// handleSources is GET /v1/sources, for the key's organization.
func handleSources(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep, err := s.Sources(r.Context(), principal(r).OrgID)
		if err != nil {
			s.error(w, r, err)
			return
		}
		encode(w, http.StatusOK, rep)
	})
}
