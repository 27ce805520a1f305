package client

import (
	"encoding/csv"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestBatches(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t)
	e.src.addCompany("Acme", "acme.com")
	e.startWorkers()
	ctx := t.Context()

	file := []byte("domain,owner\nacme.com,ann\nnowhere.example,bob\n")
	created, err := e.c.CreateBatch(ctx, file, FormatCSV, BatchOptions{Name: "crm.csv", IdempotencyKey: "upload-1"})
	is.NoErr(err)
	is.True(!created.Replayed)
	b := created.Batch
	is.Equal(b.Rows, 2)
	is.Equal(b.ObjectType, ObjectCompany)
	is.Equal(b.CreditsEstimate, int64(2))
	for b.Status != BatchDone {
		time.Sleep(10 * time.Millisecond)
		got, err := e.c.Batch(ctx, b.ID)
		is.NoErr(err)
		b = *got
	}
	is.Equal(b.Counts, BatchCounts{Succeeded: 1, Failed: 1})
	is.Equal(e.balance("acme"), int64(99))

	again, err := e.c.CreateBatch(ctx, file, FormatCSV, BatchOptions{Name: "crm.csv", IdempotencyKey: "upload-1"})
	is.NoErr(err)
	is.True(again.Replayed)
	is.Equal(again.Batch.ID, b.ID)

	list, err := e.c.Batches(ctx, 0, 10)
	is.NoErr(err)
	is.Equal(list.Total, int64(1))

	rd, err := e.c.BatchResults(ctx, b.ID, FormatCSV)
	is.NoErr(err)
	recs, err := csv.NewReader(rd).ReadAll()
	rd.Close()
	is.NoErr(err)
	is.Equal(len(recs), 3)
	is.Equal(recs[1][:4], []string{"acme.com", "ann", "succeeded", ""})
	is.Equal(recs[1][6], "Acme")
	rd, err = e.c.BatchResults(ctx, b.ID, FormatJSONL)
	is.NoErr(err)
	raw, _ := io.ReadAll(rd)
	rd.Close()
	is.Equal(strings.Count(string(raw), "\n"), 2)

	// Refused rows come back listed in the error.
	_, err = e.c.CreateBatch(ctx, []byte("domain\nacme.com\nnot a domain\n"), FormatCSV, BatchOptions{})
	var apiErr *Error
	is.True(errors.As(err, &apiErr))
	is.Equal(apiErr.Status, 400)
	is.Equal(len(apiErr.Rows), 1)
	is.Equal(apiErr.Rows[0].Row, 2)
	is.Equal(apiErr.Rows[0].Line, 3)

	_, err = e.c.BatchResults(ctx, "00000000-0000-0000-0000-000000000000", FormatCSV)
	is.True(IsCode(err, "not_found"))
}

// A contact export: each row decides, or asks for its person and its company; the
// refused rows are skipped and listed.
func TestBatchOfContacts(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t)
	e.src.addCompany("Acme", "acme.com")
	e.startWorkers()
	ctx := t.Context()

	file := []byte("email,domain\n,acme.com\njane@acme.com,acme.com\nnot an email,\n")
	_, err := e.c.CreateBatch(ctx, file, FormatCSV, BatchOptions{})
	var apiErr *Error
	is.True(errors.As(err, &apiErr))
	is.Equal(len(apiErr.Rows), 1)

	created, err := e.c.CreateBatch(ctx, file, FormatCSV, BatchOptions{Enrich: EnrichCompanyAndPerson, SkipRefusedRows: true})
	is.NoErr(err)
	b := created.Batch
	is.Equal(b.ObjectType, ObjectMixed)
	is.Equal(b.Counts, BatchCounts{Pending: 3, Skipped: 1})
	is.Equal(b.CreditsEstimate, int64(1+3+1))
	is.Equal(b.SkippedRows, []RowRefusal{{Row: 3, Line: 4, Message: b.SkippedRows[0].Message}})
	for b.Status != BatchDone {
		time.Sleep(10 * time.Millisecond)
		got, err := e.c.Batch(ctx, b.ID)
		is.NoErr(err)
		b = *got
	}
	is.Equal(b.Counts.Skipped, int64(1))
	is.Equal(len(b.SkippedRows), 1)
	is.Equal(b.Counts.Succeeded+b.Counts.Failed, int64(3))
}
