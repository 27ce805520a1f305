package dashboard

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// A task's result is shown as a card people read, the JSON the API gives staying one
// click away: the card is made here from that JSON, so it shows nothing the API does
// not.

// resultCard is the card of a succeeded task: a company or a person, never both.
type resultCard struct {
	Company *companyCard
	Person  *personCard
}

// companyCard is a company as the task page shows it; an empty field is not known.
type companyCard struct {
	Name, Domain, Industry, Size, Headquarters, Founded, About string
	Redirect                                                   string // "" unless the domain sent stands for another
	Links                                                      []cardLink
}

// personCard is a person as the task page shows it: who, where, what now, what before,
// and for an email lookup how the address led to them.
type personCard struct {
	Name, Headline, Location string
	Links                    []cardLink
	Current, History         []roleCard
	EmailMatch               *emailMatchCard
}

type cardLink struct{ Label, URL string }

type roleCard struct {
	Title, Company, CompanyDomain, Location, EmploymentType string
	From, To                                                string // "" when unknown; To is "now" for a current role
}

type emailMatchCard struct {
	Email, Method, Pattern, Explained string
	Source                            string // the source that found the person, "" when what is held did
	MatchedBy                         string // the vendor whose match by the address answered, "" when the name did
}

// newResultCard makes the card of a succeeded task's result, or nil when the result is
// not one the card can read (then the JSON alone is shown).
func newResultCard(t *store.Task) *resultCard {
	if t.Status != store.StatusSucceeded || len(t.Data) == 0 {
		return nil
	}
	switch t.ObjectType {
	case enrich.ObjectCompany:
		var c enrich.Company
		if json.Unmarshal(t.Data, &c) != nil {
			return nil
		}
		return &resultCard{Company: newCompanyCard(&c)}
	case enrich.ObjectPerson:
		var p enrich.Person
		if json.Unmarshal(t.Data, &p) != nil {
			return nil
		}
		return &resultCard{Person: newPersonCard(&p)}
	}
	return nil
}

func newCompanyCard(c *enrich.Company) *companyCard {
	card := &companyCard{Name: c.Name, Domain: str(c.Domain), Industry: str(c.PrimaryIndustry), About: str(c.About),
		Headquarters: address(c.Headquarters)}
	switch {
	case c.EmployeeCount != nil && c.EmployeeRange != nil:
		card.Size = fmt.Sprintf("%s employees (%s)", groupDigits(*c.EmployeeCount), *c.EmployeeRange)
	case c.EmployeeCount != nil:
		card.Size = groupDigits(*c.EmployeeCount) + " employees"
	case c.EmployeeRange != nil:
		card.Size = *c.EmployeeRange + " employees"
	}
	if c.YearFounded != nil {
		card.Founded = strconv.Itoa(*c.YearFounded)
	}
	if card.Domain != "" {
		card.Links = appendLink(card.Links, "Website", "https://"+card.Domain)
	}
	card.Links = appendLink(card.Links, "Company page", str(c.NetworkURL))
	if r := c.Redirect; r != nil {
		card.Redirect = fmt.Sprintf("%s stands for %s", r.From, r.To)
		if !r.Confirmed {
			card.Redirect += " (not confirmed)"
		}
	}
	return card
}

func newPersonCard(p *enrich.Person) *personCard {
	card := &personCard{Name: str(p.FullName), Headline: str(p.Headline)}
	if card.Name == "" {
		card.Name = strings.TrimSpace(str(p.FirstName) + " " + str(p.LastName))
	}
	var where []string
	for _, s := range []string{str(p.City), str(p.CountryCode)} {
		if s != "" {
			where = append(where, s)
		}
	}
	card.Location = strings.Join(where, ", ")
	card.Links = appendLink(card.Links, "Profile", str(p.NetworkURL))
	// The timeline reads from the latest role back; a role without a start goes last.
	// The dates are YYYY-MM-DD, so their text sorts as they do.
	positions := slices.Clone(p.Positions)
	slices.SortStableFunc(positions, func(a, b enrich.Position) int { return strings.Compare(str(b.StartDate), str(a.StartDate)) })
	for _, pos := range positions {
		r := roleCard{Title: str(pos.Title), Company: str(pos.CompanyName), Location: str(pos.Location),
			EmploymentType: str(pos.EmploymentType), From: cardDate(pos.StartDate, pos.StartDatePrecision)}
		if pos.Company != nil {
			if r.Company == "" {
				r.Company = str(pos.Company.Name)
			}
			r.CompanyDomain = str(pos.Company.Domain)
		}
		if pos.IsCurrent {
			r.To = "now"
			card.Current = append(card.Current, r)
			continue
		}
		r.To = cardDate(pos.EndDate, pos.EndDatePrecision)
		card.History = append(card.History, r)
	}
	if m := p.EmailMatch; m != nil {
		card.EmailMatch = &emailMatchCard{Email: m.Email, Method: m.Method, Pattern: str(m.Pattern), Source: str(m.Source),
			MatchedBy: str(m.MatchedBy), Explained: emailMatchWords[m.Method]}
		if card.EmailMatch.MatchedBy != "" {
			card.EmailMatch.Explained = "The answer rests on " + card.EmailMatch.MatchedBy + "'s own match by the address, " +
				"the name only confirming it: it stands where the address fits several people by name alone."
		}
	}
	return card
}

// emailMatchWords say what each email_match method means, as the API reference does.
var emailMatchWords = map[string]string{
	"exact":    "The address was already on record for this person.",
	"resolved": "The address was confirmed against a profile retrieved for this request.",
	"inferred": "The person was recognized among people already held, from the address's name and domain.",
}

// cardDate words a position's date as precisely as it is known: "2020" for a year,
// "Mar 2015" for a month, "Mar 4, 2015" for a day.
func cardDate(date, precision *string) string {
	d := str(date)
	t, err := time.Parse("2006-01-02", d)
	if err != nil {
		return d
	}
	switch str(precision) {
	case "year":
		return t.Format("2006")
	case "month":
		return t.Format("Jan 2006")
	}
	return t.Format("Jan 2, 2006")
}

// address joins a headquarters' parts: the known ones in the order an address is
// read, then any others the record holds, in a stable order.
func address(hq map[string]any) string {
	order := []string{"street", "line1", "line2", "postal_code", "city", "region", "state", "country"}
	var parts []string
	seen := map[string]bool{}
	add := func(k string) {
		seen[k] = true
		if v, ok := hq[k].(string); ok && strings.TrimSpace(v) != "" {
			parts = append(parts, strings.TrimSpace(v))
		}
	}
	for _, k := range order {
		add(k)
	}
	var rest []string
	for k := range hq {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		add(k)
	}
	return strings.Join(parts, ", ")
}

// appendLink adds a link to an http(s) address only: a record's URL is the network's
// word, and a link of any other scheme is not one to offer.
func appendLink(links []cardLink, label, raw string) []cardLink {
	u, err := url.Parse(raw)
	if raw == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return links
	}
	return append(links, cardLink{Label: label, URL: u.String()})
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// groupDigits writes 2400 as "2,400".
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + groupDigits(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
