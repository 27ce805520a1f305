package source

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"enrichd/enrich"
)

// Date precisions of a position's start and end.
const (
	PrecisionYear  = "year"
	PrecisionMonth = "month"
	PrecisionDay   = "day"
)

// partialDate turns what a vendor knows of a date into the result's full date and its
// precision: a year alone is January 1 of it ("year"), a year and a month the 1st of
// that month ("month"). Without a valid year there is no date at all; a day without a
// month is dropped rather than guessed at.
func partialDate(year, month, day int) (date, precision *string) {
	if year < 1 || year > 9999 {
		return nil, nil
	}
	if month < 1 || month > 12 {
		return enrich.Ptr(fmt.Sprintf("%04d-01-01", year)), enrich.Ptr(PrecisionYear)
	}
	if day < 1 || day > daysIn(year, month) {
		return enrich.Ptr(fmt.Sprintf("%04d-%02d-01", year, month)), enrich.Ptr(PrecisionMonth)
	}
	return enrich.Ptr(fmt.Sprintf("%04d-%02d-%02d", year, month, day)), enrich.Ptr(PrecisionDay)
}

func daysIn(year, month int) int {
	return time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// isoPartialDate reads "YYYY", "YYYY-MM" or "YYYY-MM-DD"; anything else is no date.
func isoPartialDate(s string) (date, precision *string) {
	parts := strings.Split(strings.TrimSpace(s), "-")
	if len(parts) > 3 || len(parts[0]) != 4 {
		return nil, nil
	}
	nums := make([]int, 3)
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || (i > 0 && len(p) != 2) {
			return nil, nil
		}
		nums[i] = n
	}
	if len(parts) >= 2 && (nums[1] < 1 || nums[1] > 12) {
		return nil, nil
	}
	if len(parts) == 3 && (nums[2] < 1 || nums[2] > daysIn(nums[0], nums[1])) {
		return nil, nil
	}
	return partialDate(nums[0], nums[1], nums[2])
}

// currentFirst orders positions as the Person result wants them: current roles first,
// each group keeping the source's order.
func currentFirst(ps []enrich.Position) []enrich.Position {
	slices.SortStableFunc(ps, func(a, b enrich.Position) int {
		switch {
		case a.IsCurrent == b.IsCurrent:
			return 0
		case a.IsCurrent:
			return -1
		}
		return 1
	})
	return ps
}

// text is a vendor's string as a result field: nil when absent or blank.
func text(s *string) *string {
	if s == nil {
		return nil
	}
	t := strings.TrimSpace(*s)
	if t == "" {
		return nil
	}
	return &t
}

// normalizer is the domain's Normalizer with the readers of what vendors and sites
// write loosely: page URLs without a scheme, websites with a path.
type normalizer struct{ enrich.Normalizer }

func newNormalizer(networkHost string) normalizer {
	return normalizer{enrich.Normalizer{NetworkHost: networkHost}}
}

// companyURLOf normalizes a vendor's company page URL, which may come without a
// scheme ("linkedin.com/company/acme"); nil when it is no company page of the network.
func (n normalizer) companyURLOf(raw *string) *string {
	return n.urlOf(raw, n.CompanyURL)
}

// personURLOf is companyURLOf for profiles.
func (n normalizer) personURLOf(raw *string) *string {
	return n.urlOf(raw, n.PersonURL)
}

func (n normalizer) urlOf(raw *string, norm func(string) (string, error)) *string {
	s := text(raw)
	if s == nil {
		return nil
	}
	u := *s
	if !strings.Contains(u, "://") {
		u = "https://" + u
	}
	out, err := norm(u)
	if err != nil {
		return nil
	}
	return &out
}

// domainOf normalizes a vendor's website ("https://www.acme.com/", "acme.com"); nil
// when it is not a domain.
func (n normalizer) domainOf(raw *string) *string {
	s := text(raw)
	if s == nil {
		return nil
	}
	d, err := n.Domain(*s)
	if err != nil {
		return nil
	}
	return &d
}

// domainRedirect applies the rule for a company found by domain whose record lists
// another website: the result carries the listed one as its canonical domain, and a
// redirect that is not confirmed, since no HTTP redirect was seen.
func domainRedirect(c *enrich.Company, sent string) {
	if c.Domain == nil {
		c.Domain = enrich.Ptr(sent)
		return
	}
	if *c.Domain != sent {
		c.Redirect = &enrich.Redirect{From: sent, To: *c.Domain, Confirmed: false}
	}
}

// organizationTypes are the network's labels for the company types vendors send as
// enums (Enrich Layer) or lower-case words (People Data Labs).
var organizationTypes = map[string]string{
	"PRIVATELY_HELD":    "Privately Held",
	"PUBLIC_COMPANY":    "Public Company",
	"EDUCATIONAL":       "Educational",
	"GOVERNMENT_AGENCY": "Government Agency",
	"NON_PROFIT":        "Nonprofit",
	"PARTNERSHIP":       "Partnership",
	"SELF_EMPLOYED":     "Self-Employed",
	"SELF_OWNED":        "Self-Owned",
	"private":           "Privately Held",
	"public":            "Public Company",
	"public_subsidiary": "Public Company",
	"nonprofit":         "Nonprofit",
	"educational":       "Educational",
	"government":        "Government Agency",
}

// organizationType labels a vendor's company type; a value it does not know is kept as
// sent rather than dropped.
func organizationType(raw *string) *string {
	s := text(raw)
	if s == nil {
		return nil
	}
	if label, ok := organizationTypes[*s]; ok {
		return &label
	}
	return s
}

// sizeRange is the employee range of a [min, max] headcount bucket; an open top
// bucket is "<min>+", as the network and the vendors write it.
func sizeRange(lo, hi *int64) *string {
	switch {
	case lo == nil:
		return nil
	case hi == nil:
		return enrich.Ptr(fmt.Sprintf("%d+", *lo))
	}
	return enrich.Ptr(fmt.Sprintf("%d-%d", *lo, *hi))
}
