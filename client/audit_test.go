package client

import (
	"bufio"
	"encoding/json"
	"errors"
	"testing"

	"github.com/matryer/is"
)

func TestAudit(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t)
	e.src.addPerson("jane-doe", "Jane", "Doe", "CTO", "Acme")
	e.startWorkers()
	ctx := t.Context()
	jane := "https://www.linkedin.com/in/jane-doe"

	q, err := e.c.EnrichPerson(ctx, PersonInput{NetworkURL: jane})
	is.NoErr(err)
	_, err = e.c.WaitTask(ctx, q.Task.ID)
	is.NoErr(err)
	x, err := e.c.ExportPerson(ctx, PersonRef{NetworkURL: jane})
	is.NoErr(err)
	is.Equal(len(x.Audit), 1) // her lookup
	var by Actor
	is.NoErr(json.Unmarshal(x.Tasks[0]["by"], &by))
	is.Equal(by.Kind, "key")

	about, err := e.c.Audit(ctx, AuditQuery{Subject: jane}, 0, 10)
	is.NoErr(err)
	is.Equal(len(about.Data), 2) // the export, then the lookup
	is.Equal(about.Data[0].Action, AuditPersonExported)
	is.Equal(*about.Data[1].TaskID, q.Task.ID)
	is.Equal(*about.Data[1].Subject, jane)
	is.True(!about.HasMore)

	er, err := e.c.Erase(ctx, PersonRef{NetworkURL: jane})
	is.NoErr(err)
	erased, err := e.c.Audit(ctx, AuditQuery{Action: AuditPersonErased}, 0, 10)
	is.NoErr(err)
	is.Equal(len(erased.Data), 1)
	is.Equal(*erased.Data[0].ObjectID, er.ID)
	about, err = e.c.Audit(ctx, AuditQuery{Subject: jane}, 0, 10)
	is.NoErr(err)
	for _, en := range about.Data {
		is.Equal(en.Subject, nil) // found by her hash alone
	}

	body, err := e.c.ExportAudit(ctx, AuditQuery{})
	is.NoErr(err)
	defer body.Close()
	var seqs []int64
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		var en AuditEntry
		is.NoErr(json.Unmarshal(sc.Bytes(), &en))
		seqs = append(seqs, en.Seq)
	}
	is.NoErr(sc.Err())
	is.True(len(seqs) >= 4) // the key, the lookup, the export, the erasure
	is.Equal(seqs[0], int64(1))

	var ce *Error
	_, err = e.c.Audit(ctx, AuditQuery{Action: "task.deleted"}, 0, 10)
	is.True(errors.As(err, &ce))
	is.Equal(ce.Status, 400)
	_, err = e.c.ExportAudit(ctx, AuditQuery{Subject: "not a subject"})
	is.True(errors.As(err, &ce))
	is.Equal(ce.Status, 400)
}
