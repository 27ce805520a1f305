package client

import (
	"errors"
	"testing"

	"github.com/matryer/is"
)

func TestSuppressions(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t)
	e.src.addCompany("Acme", "acme.com")
	ctx := t.Context()

	s, err := e.c.Suppress(ctx, SuppressionInput{Domain: "www.acme.com", Reason: "the whole company objected"})
	is.NoErr(err)
	is.Equal(s.Kind, SuppressDomain)
	is.Equal(s.Hint, "a***.com")
	is.Equal(*s.Reason, "the whole company objected")
	is.Equal(s.AddedBy.Kind, "key")
	_, err = e.c.Suppress(ctx, SuppressionInput{Domain: "acme.com"})
	var ce *Error
	is.True(errors.As(err, &ce))
	is.Equal(ce.Status, 409)
	is.Equal(ce.Code, "suppression_exists")
	_, err = e.c.Suppress(ctx, SuppressionInput{Domain: "acme.com", Email: "jane@acme.com"})
	is.True(errors.As(err, &ce))
	is.Equal(ce.Status, 400)

	// An enrichment of it fails at once, refunded.
	q, err := e.c.EnrichCompany(ctx, CompanyInput{Domain: "acme.com"})
	is.NoErr(err)
	is.Equal(q.Task.Status, StatusFailed)
	is.Equal(q.Error.Code, "not_found")
	is.Equal(e.balance("acme"), int64(100))

	imported, err := e.c.ImportSuppressions(ctx, []byte("email,reason\njane@initech.com,asked\njohn@initech.com,\n"))
	is.NoErr(err)
	is.Equal(*imported, SuppressionImport{Added: 2})
	_, err = e.c.ImportSuppressions(ctx, []byte("email\nok@initech.com\nnot-an-address\n"))
	is.True(errors.As(err, &ce))
	is.Equal(len(ce.Rows), 1)
	is.Equal(ce.Rows[0].Row, 2)

	list, err := e.c.Suppressions(ctx, 0, 2)
	is.NoErr(err)
	is.Equal(list.Total, int64(3))
	is.Equal(len(list.Data), 2)
	got, err := e.c.Suppression(ctx, s.ID)
	is.NoErr(err)
	is.Equal(got.Hint, s.Hint)
	is.NoErr(e.c.LiftSuppression(ctx, s.ID))
	_, err = e.c.Suppression(ctx, s.ID)
	is.True(errors.As(err, &ce))
	is.Equal(ce.Status, 404)
}
