package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"
)

// Formats of a batch's file and of its results.
const (
	FormatCSV   = "text/csv"
	FormatJSONL = "application/x-ndjson" // JSON Lines: one object per line
)

// Batch statuses.
const (
	BatchRunning = "running"
	BatchDone    = "done"
)

// ObjectMixed is the object type of a batch of people and companies, or of one that
// looked up a person row's company too: its results have both kinds' columns.
const ObjectMixed = "mixed"

// What a batch's rows enrich (BatchOptions.Enrich); EnrichEachRow lets each row decide.
const (
	EnrichEachRow          = ""
	EnrichCompany          = "company"
	EnrichPerson           = "person"
	EnrichCompanyAndPerson = "company,person"
)

// Batch is an uploaded list: one task per lookup, a row's own, and its company's too
// when the batch asked for both.
type Batch struct {
	ID              string      `json:"id"`
	ObjectType      string      `json:"object_type"` // ObjectCompany, ObjectPerson or ObjectMixed
	Name            string      `json:"name"`
	Status          string      `json:"status"` // running, or done once every lookup's task has settled
	Rows            int         `json:"rows"`
	Columns         []string    `json:"columns"`
	Counts          BatchCounts `json:"counts"`
	CreditsEstimate int64       `json:"credits_estimate"` // the most it costs: every lookup's charge
	CreditsSpent    int64       `json:"credits_spent"`    // charged and not refunded so far
	IdempotencyKey  *string     `json:"idempotency_key"`
	CreatedAt       time.Time   `json:"created_at"`
	// SkippedRows are the rows refused at the upload with SkipRefusedRows, the first
	// 1,000 (Counts.Skipped counts them all); Batches does not list them.
	SkippedRows []RowRefusal `json:"skipped_rows,omitempty"`
}

// BatchCounts are a batch's lookups by status: Pending ones have no task yet; Skipped
// counts the rows refused at the upload, which have none.
type BatchCounts struct {
	Pending   int64 `json:"pending"`
	Queued    int64 `json:"queued"`
	Running   int64 `json:"running"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Canceled  int64 `json:"canceled"`
	Purged    int64 `json:"purged,omitempty"` // tasks deleted by retention
	Skipped   int64 `json:"skipped,omitempty"`
}

// BatchList is a page of GET /v1/batches.
type BatchList struct {
	Data  []Batch `json:"data"`
	Total int64   `json:"total"`
}

// RowRefusal is why a row of an upload was refused (Error.Rows of a 400).
type RowRefusal struct {
	Row     int    `json:"row"`  // the data row, from 1
	Line    int    `json:"line"` // the line of the file it starts on
	Message string `json:"error"`
}

// BatchOptions are the optional parameters of an upload.
type BatchOptions struct {
	ObjectType string // company or person: every row of that kind; as Enrich with one kind
	// Enrich is what the rows enrich: EnrichCompany, EnrichPerson, or
	// EnrichCompanyAndPerson (a row's person and its company); EnrichEachRow lets each
	// row decide: an email or a profile makes a person, a domain or a company page a
	// company.
	Enrich string
	// SkipRefusedRows makes a batch of the rows that pass: the refused ones are kept as
	// skipped, uncharged, and listed in Batch.SkippedRows. Without it a refused row
	// refuses the file.
	SkipRefusedRows bool
	Name            string // shown with the batch, such as the file's name
	IdempotencyKey  string // sending the same file again with it gives the same batch, charged once
}

// BatchCreated is the answer to CreateBatch.
type BatchCreated struct {
	Batch Batch
	// Replayed is true when the Idempotency-Key named a batch made before: nothing was
	// made or charged now.
	Replayed bool
}

// CreateBatch uploads a file of inputs (format FormatCSV or FormatJSONL; at most
// 10,000 rows and 5 MiB) and answers with the batch before its rows' tasks are made:
// poll Batch until it is done, then read BatchResults. A file with refused rows is an
// *Error whose Rows lists them, nothing made or charged, unless o.SkipRefusedRows.
func (c *Client) CreateBatch(ctx context.Context, file []byte, format string, o BatchOptions) (*BatchCreated, error) {
	if n := utf8.RuneCountInString(o.IdempotencyKey); n > MaxIdempotencyKey {
		return nil, &usageError{fmt.Sprintf("the idempotency key is %d characters long; the server takes at most %d", n, MaxIdempotencyKey)}
	}
	if format != FormatCSV && format != FormatJSONL {
		return nil, &usageError{"the format of a batch is client.FormatCSV or client.FormatJSONL, not " + format}
	}
	q := url.Values{}
	if o.ObjectType != "" {
		q.Set("object_type", o.ObjectType)
	}
	if o.Enrich != "" {
		q.Set("enrich", o.Enrich)
	}
	if o.SkipRefusedRows {
		q.Set("on_error", "skip")
	}
	if o.Name != "" {
		q.Set("name", o.Name)
	}
	var out struct {
		Data Batch `json:"data"`
	}
	res, err := c.doRaw(ctx, http.MethodPost, "/v1/batches", q, file, &out, "Content-Type", format, "Idempotency-Key", o.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	return &BatchCreated{Batch: out.Data, Replayed: res.header.Get("Idempotent-Replayed") == "true"}, nil
}

// Batch reads a batch: its rows counted by status, and its credits.
func (c *Client) Batch(ctx context.Context, id string) (*Batch, error) {
	var out struct {
		Data Batch `json:"data"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/v1/batches/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Data, nil
}

// Batches lists the organization's batches, newest first; page from 0, pageSize 1 to
// 100 (0 for the server's default).
func (c *Client) Batches(ctx context.Context, page, pageSize int) (*BatchList, error) {
	var out BatchList
	if _, err := c.do(ctx, http.MethodGet, "/v1/batches", pageQuery(page, pageSize), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// BatchResults streams a batch's results in format (FormatCSV or FormatJSONL): every
// row in upload order, its columns as uploaded, then the result columns. The caller
// closes the reader.
func (c *Client) BatchResults(ctx context.Context, id, format string) (io.ReadCloser, error) {
	if format != FormatCSV && format != FormatJSONL {
		return nil, &usageError{"the format of a batch's results is client.FormatCSV or client.FormatJSONL, not " + format}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/batches/"+url.PathEscape(id)+"/results", nil)
	if err != nil {
		return nil, fmt.Errorf("enrichd: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", format)
	req.Header.Set("User-Agent", c.userAgent)
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("enrichd: GET %s: %w", req.URL, err)
	}
	if res.StatusCode >= 400 {
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		return nil, apiError(&response{status: res.StatusCode, header: res.Header, body: b, retryAfter: parseRetryAfter(res.Header.Get("Retry-After"))})
	}
	return res.Body, nil
}
