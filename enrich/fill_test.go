package enrich_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"

	"enrichd/enrich"
)

// The fields a list can name are the results' own, less what says how a record was
// made, in the order the result has them.
func TestFillableFieldsAreTheResultsDataFields(t *testing.T) {
	is := is.New(t)
	is.Equal(enrich.CompanyFields, []string{"name", "domain", "network_url", "network_id", "network_followers",
		"employee_count", "employee_range", "primary_industry", "organization_type", "year_founded", "about",
		"slogan", "headquarters"})
	is.Equal(enrich.PersonFields, []string{"network_url", "full_name", "first_name", "last_name", "headline",
		"about", "avatar_url", "city", "country_code", "network_followers", "network_connections", "memorialized",
		"positions"})
	lists := enrich.FillLists{Company: []string{"slogan"}, Person: []string{"about"}}
	is.Equal(lists.For(enrich.ObjectCompany), []string{"slogan"})
	is.Equal(lists.For(enrich.ObjectPerson), []string{"about"})
	is.Equal(lists.For("robot"), nil)
}

func TestParseFields(t *testing.T) {
	for _, c := range []struct {
		object, list string
		want         []string
	}{
		{enrich.ObjectCompany, "", nil},
		{enrich.ObjectCompany, " , ,", nil},
		{enrich.ObjectCompany, "slogan, employee_count ,slogan,,name", []string{"slogan", "employee_count", "name"}},
		{enrich.ObjectPerson, "positions,about", []string{"positions", "about"}},
	} {
		is := is.New(t)
		got, err := enrich.ParseFields(c.object, c.list)
		is.NoErr(err)
		is.Equal(got, c.want)
	}
}

// An unknown name, a bookkeeping field or another type's field is refused as invalid
// input, and the message names every field that is known.
func TestParseFieldsRefusesUnknownNamingTheKnown(t *testing.T) {
	for _, c := range []struct{ object, list, bad string }{
		{enrich.ObjectCompany, "name,sloagn", "sloagn"},
		{enrich.ObjectCompany, "created_at", "created_at"},
		{enrich.ObjectCompany, "positions", "positions"},
		{enrich.ObjectPerson, "email_match", "email_match"},
		{enrich.ObjectPerson, "Name", "Name"},
	} {
		is := is.New(t)
		_, err := enrich.ParseFields(c.object, c.list)
		var e *enrich.Error
		is.True(errors.As(err, &e))
		is.Equal(e.Kind, enrich.KindInvalid)
		is.Equal(e.Code, enrich.CodeInvalidInput)
		is.True(strings.Contains(e.Message, `"`+c.bad+`"`))
		is.True(strings.Contains(e.Message, strings.Join(enrich.FieldsOf(c.object), ", ")))
	}
	is := is.New(t)
	_, err := enrich.ParseFields("robot", "name")
	is.Equal(enrich.KindOf(err), enrich.KindInvalid)
	_, err = enrich.ParseFields(enrich.ObjectCompany, strings.Repeat("name,", 1000))
	is.Equal(enrich.KindOf(err), enrich.KindInvalid)
}
