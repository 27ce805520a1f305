package client

import (
	"errors"
	"testing"

	"github.com/matryer/is"
)

func TestErasuresAndExports(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t)
	e.src.addPerson("jane-doe", "Jane", "Doe", "CTO", "Acme")
	e.startWorkers()
	ctx := t.Context()

	q, err := e.c.EnrichPerson(ctx, PersonInput{NetworkURL: "https://linkedin.com/in/jane-doe"})
	is.NoErr(err)
	_, err = e.c.WaitTask(ctx, q.Task.ID)
	is.NoErr(err)
	x, err := e.c.ExportPerson(ctx, PersonRef{NetworkURL: "https://www.linkedin.com/in/jane-doe"})
	is.NoErr(err)
	is.Equal(len(x.Records), 1)
	is.Equal(len(x.Tasks), 1)
	is.Equal(string(x.Tasks[0]["via"]), `"request"`)
	is.True(!x.Suppressed)

	er, err := e.c.Erase(ctx, PersonRef{NetworkURL: "https://www.linkedin.com/in/jane-doe"})
	is.NoErr(err)
	is.Equal(er.Kind, SuppressProfile)
	is.Equal(er.Removed["tasks"], int64(1))
	is.Equal(len(er.Loops), 0)
	got, err := e.c.Erasure(ctx, er.ID)
	is.NoErr(err)
	is.Equal(got.Hint, er.Hint)
	list, err := e.c.Erasures(ctx, 0, 10)
	is.NoErr(err)
	is.Equal(list.Total, int64(1))
	task, err := e.c.Task(ctx, q.Task.ID)
	is.NoErr(err)
	is.Equal(task.Task.Target, ErasedMarker)
	is.True(task.Task.ErasedAt != nil)
	is.Equal(len(task.Data), 0)

	var ce *Error
	_, err = e.c.Erase(ctx, PersonRef{Email: "jane@acme.com", NetworkURL: "https://www.linkedin.com/in/jane-doe"})
	is.True(errors.As(err, &ce))
	is.Equal(ce.Status, 400)
	_, err = e.c.ExportPerson(ctx, PersonRef{})
	is.True(errors.As(err, &ce))
	is.Equal(ce.Status, 400)
	_, err = e.c.Erasure(ctx, "00000000-0000-0000-0000-000000000000")
	is.True(errors.As(err, &ce))
	is.Equal(ce.Status, 404)
}
