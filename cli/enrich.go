package cli

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"enrichd/client"
	"enrichd/enrich"
	"enrichd/flatten"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Values of enrich --column: the API field each row's value is sent as.
const (
	columnDomain     = "domain"
	columnNetworkURL = "networkUrl"
	columnEmail      = "email"
)

// Row statuses written to the output besides the task statuses.
const (
	rowInterrupted = "interrupted" // the run ended before the row was settled; run again
)

// maxGenerations bounds the keys of one row's series: each rerun after a failure
// worth retrying moves to the next key, and earlier keys are only replayed, free.
const maxGenerations = 1000

func newEnrichCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "enrich --csv IN.csv --out OUT.csv --column domain|networkUrl|email",
		Short: "Enrich every row of a CSV file through a running enrichd and write the results to another CSV",
		Long: `Enrich every row of a CSV file through a running enrichd server and write the
input columns plus result columns to --out, in input order.

Each row is sent with an idempotency key made from --batch (by default the absolute
path of --out), the column and the value, so running the same command again after an
interruption resumes: rows already enriched come back as replays of their tasks and
are not charged again. Identical values share one task and one charge.`,
		Annotations: map[string]string{noDB: "yes"},
		Args:        cobra.NoArgs,
		RunE:        runEnrich,
	}
	f := cmd.Flags()
	f.String("csv", "", "input CSV file with a header row (required)")
	f.String("out", "", "output CSV file; written when the run ends, replacing the file (required)")
	f.String("column", "", "what the values are: domain, networkUrl (company page or profile) or email (required)")
	f.String("header", "", "the input column holding the values, when its header is not the --column name")
	f.String("url", "http://127.0.0.1:8080", "base URL of the enrichd server")
	f.String("key", "", "API key (or ENRICHD_KEY)")
	f.Int("concurrency", 8, "rows enriched at once (1-64)")
	f.String("network-host", enrich.DefaultNetworkHost, "host of the professional network whose URLs the file holds, as serve's --network-host")
	f.String("batch", "", "name of this batch in the idempotency keys; a rerun with the same batch is not charged again (default: the absolute path of --out)")
	return cmd
}

// enrichJob is one distinct value of the input and the rows that carry it.
type enrichJob struct {
	value string
	rows  []int
}

// rowResult is what became of one value.
type rowResult struct {
	status   string // a task status, or rowInterrupted
	code     string // the task's or the API's error code
	message  string
	taskID   string
	data     json.RawMessage // the result, once succeeded
	charged  int64           // credits this run spent on it, once settled
	held     int64           // credits charged for a task still in flight when the run ended
	replayed bool            // settled by an earlier run
}

type enrichRun struct {
	c        *client.Client
	column   string
	object   string // company or person
	batch    string
	norm     enrich.Normalizer
	progress *progress
}

func runEnrich(cmd *cobra.Command, args []string) error {
	f := cmd.Flags()
	in, _ := f.GetString("csv")
	out, _ := f.GetString("out")
	column, _ := f.GetString("column")
	header, _ := f.GetString("header")
	base, _ := f.GetString("url")
	key, _ := f.GetString("key")
	concurrency, _ := f.GetInt("concurrency")
	batch, _ := f.GetString("batch")
	host, _ := f.GetString("network-host")
	switch {
	case in == "":
		return errors.New("--csv is required: the CSV file to enrich")
	case out == "":
		return errors.New("--out is required: where to write the enriched CSV")
	case column != columnDomain && column != columnNetworkURL && column != columnEmail:
		return fmt.Errorf("--column must be domain, networkUrl or email, not %q", column)
	case concurrency < 1 || concurrency > 64:
		return fmt.Errorf("--concurrency must be from 1 to 64, not %d", concurrency)
	case strings.TrimSpace(key) == "":
		return errors.New("no API key: pass --key or set ENRICHD_KEY (create one with `enrichd keys create --org ORG`)")
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--url %q: want the server's base URL, such as http://127.0.0.1:8080", base)
	}
	absIn, err := filepath.Abs(in)
	if err != nil {
		return err
	}
	absOut, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if absIn == absOut {
		return errors.New("--out must not be the --csv file: the input is read again by a rerun")
	}
	if batch == "" {
		batch = absOut
	}
	if header == "" {
		header = column
	}

	head, records, err := readCSV(in)
	if err != nil {
		return err
	}
	col := -1
	for i, h := range head {
		if strings.EqualFold(strings.TrimSpace(h), header) {
			col = i
			break
		}
	}
	if col < 0 {
		return fmt.Errorf("%s has no column %q (its columns: %s); name the column holding the values with --header", in, header, strings.Join(head, ", "))
	}

	r := &enrichRun{
		// A bulk run waits out rate limits and a full backlog for longer than a single
		// call would: the rows are waiting anyway.
		c:      client.New(base, key, client.WithMaxRetries(30), client.WithUserAgent("enrichd-csv/1")),
		column: column, batch: batch,
		norm: enrich.Normalizer{NetworkHost: host},
	}
	r.object = objectOf(column, records, col)
	ctx := cmd.Context()
	// Asking once before the rows finds a wrong URL or key before anything is sent.
	if _, err := r.c.Status(ctx); err != nil {
		return fmt.Errorf("cannot use the server at %s: %w", base, err)
	}

	jobs, results := distinctValues(records, col, r.normalize)
	r.progress = newProgress(cmd.ErrOrStderr(), len(records))
	if empty := len(records) - rowsIn(jobs); empty > 0 {
		r.progress.done(empty, false)
	}
	fatal := r.process(ctx, jobs, results, concurrency)
	r.progress.finish()

	if err := writeOutput(absOut, head, records, results, r.object); err != nil {
		return err
	}
	r.summary(cmd.OutOrStdout(), results, len(records), out)
	undone := 0
	for _, res := range results {
		if res.status == rowInterrupted {
			undone++
		}
	}
	switch {
	case fatal != nil:
		return fmt.Errorf("stopped with %d of %d rows not enriched: %w; fix that and run the same command again: rows already done are not charged again", undone, len(records), fatal)
	case undone > 0:
		return fmt.Errorf("interrupted with %d of %d rows not enriched; run the same command again to finish: rows already done are not charged again", undone, len(records))
	}
	return nil
}

// readCSV reads the whole input: a rerun needs it again, and the output is written
// in input order once every row is settled.
func readCSV(path string) (head []string, records [][]string, err error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	rd := csv.NewReader(fh)
	head, err = rd.Read()
	if err == io.EOF {
		return nil, nil, fmt.Errorf("%s is empty: want a header row and one row per value", path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(head) > 0 {
		head[0] = strings.TrimPrefix(head[0], "\ufeff") // a spreadsheet's byte order mark
	}
	records, err = rd.ReadAll()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return head, records, nil
}

// normalize is the value as sent and as named in the idempotency key: the server's own
// normalization, so "Acme.com" and "https://www.acme.com/" share one task and one
// charge. A value that normalization refuses is sent as written (trimmed, and
// lower-cased unless an email), for the server to answer with its reason.
func (r *enrichRun) normalize(v string) string {
	var (
		n   string
		err error
	)
	switch {
	case r.column == columnDomain:
		n, err = r.norm.Domain(v)
	case r.column == columnEmail:
		n, err = r.norm.Email(v)
	case r.object == client.ObjectPerson:
		n, err = r.norm.PersonURL(v)
	default:
		n, err = r.norm.CompanyURL(v)
	}
	if err != nil {
		return normalize(r.column, v)
	}
	return n
}

// normalize trims a value, and lower-cases it unless it is an email, whose local part
// is kept as written.
func normalize(column, v string) string {
	v = strings.TrimSpace(v)
	if column != columnEmail {
		v = strings.ToLower(v)
	}
	return v
}

// objectOf says whether the file holds companies or people: by the column, and for
// network URLs by the first one (a /in/ profile or a /company/ page).
func objectOf(column string, records [][]string, col int) string {
	switch column {
	case columnDomain:
		return client.ObjectCompany
	case columnEmail:
		return client.ObjectPerson
	}
	for _, rec := range records {
		if v := normalize(column, rec[col]); v != "" {
			if strings.Contains(v, "/in/") {
				return client.ObjectPerson
			}
			return client.ObjectCompany
		}
	}
	return client.ObjectCompany
}

// distinctValues groups the rows by value; rows without a value are failed at once.
func distinctValues(records [][]string, col int, normalize func(string) string) ([]*enrichJob, []*rowResult) {
	results := make([]*rowResult, len(records))
	byValue := map[string]*enrichJob{}
	var jobs []*enrichJob
	for i, rec := range records {
		v := normalize(rec[col])
		if v == "" {
			results[i] = &rowResult{status: client.StatusFailed, code: client.CodeInvalidInput, message: "the value is empty"}
			continue
		}
		j := byValue[v]
		if j == nil {
			j = &enrichJob{value: v}
			byValue[v] = j
			jobs = append(jobs, j)
		}
		j.rows = append(j.rows, i)
	}
	return jobs, results
}

func rowsIn(jobs []*enrichJob) int {
	n := 0
	for _, j := range jobs {
		n += len(j.rows)
	}
	return n
}

// idempotencyKey names one value of one batch; gen moves on when an earlier run's
// task for it failed in a way worth retrying.
func (r *enrichRun) idempotencyKey(value string, gen int) string {
	sum := sha256.Sum256([]byte(r.batch + "\n" + r.column + "\n" + value + "\n" + strconv.Itoa(gen)))
	return "enrichd-csv-" + hex.EncodeToString(sum[:20])
}

// process enriches the jobs with bounded concurrency and fills results. It returns
// the error that made it stop early (a key refused, credits run out); rows it did not
// finish are left interrupted.
func (r *enrichRun) process(ctx context.Context, jobs []*enrichJob, results []*rowResult, concurrency int) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	queue := make(chan *enrichJob)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range concurrency {
		wg.Go(func() {
			for j := range queue {
				res, err := r.enrichOne(ctx, j.value)
				if err != nil {
					cancel(err)
					if res != nil { // sent, and still in flight
						mu.Lock()
						for _, i := range j.rows {
							results[i] = res
						}
						mu.Unlock()
					}
					continue
				}
				mu.Lock()
				for _, i := range j.rows {
					results[i] = res
				}
				mu.Unlock()
				r.progress.done(len(j.rows), res.status == client.StatusSucceeded)
			}
		})
	}
dispatch:
	for _, j := range jobs {
		select {
		case queue <- j:
		case <-ctx.Done():
			break dispatch
		}
	}
	close(queue)
	wg.Wait()
	for i, res := range results {
		if res == nil {
			results[i] = &rowResult{status: rowInterrupted}
		}
	}
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// enrichOne enqueues one value and waits for its task to settle. It returns an error
// only for what stops the whole run: the run's context ending, a key the server
// refuses, credits run out.
func (r *enrichRun) enrichOne(ctx context.Context, value string) (*rowResult, error) {
	var res *rowResult
	for gen := range maxGenerations {
		q, err := r.enqueue(ctx, value, gen)
		if err != nil {
			var apiErr *client.Error
			switch {
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case errors.As(err, &apiErr) && (apiErr.Status == http.StatusUnauthorized || apiErr.Status == http.StatusPaymentRequired):
				return nil, apiErr
			case errors.As(err, &apiErr):
				code := apiErr.Code
				if code == "" && apiErr.Status == http.StatusBadRequest {
					code = client.CodeInvalidInput
				} else if code == "" {
					code = "http_" + strconv.Itoa(apiErr.Status)
				}
				return &rowResult{status: client.StatusFailed, code: code, message: apiErr.Message}, nil
			}
			return &rowResult{status: client.StatusFailed, code: "request_failed", message: err.Error()}, nil
		}
		// A replay of an earlier run charged nothing now; the server says which it is.
		replay := q.Replayed
		if q.Task.Settled() && q.StatusCode == http.StatusOK && retryable(q.Task.Status, q.Error) {
			// An earlier run's attempt failed in a way that may not last: this run
			// tries again under the next key. Failed tasks were refunded.
			continue
		}
		tr, err := r.c.WaitTask(ctx, q.Task.ID)
		if err != nil {
			if ctx.Err() != nil {
				// The task goes on without this run: its charge is not spent yet (a
				// failure refunds it), and a rerun waits for it instead of paying again.
				res := &rowResult{status: rowInterrupted, taskID: q.Task.ID}
				if !replay {
					res.held = q.Task.CreditsCharged
				}
				return res, ctx.Err()
			}
			return &rowResult{status: client.StatusFailed, code: "request_failed", message: err.Error(), taskID: q.Task.ID}, nil
		}
		res = &rowResult{status: tr.Task.Status, taskID: tr.Task.ID, replayed: replay}
		switch {
		case tr.Error != nil:
			res.code, res.message = tr.Error.Code, tr.Error.Message
		case tr.Task.Status == client.StatusCanceled:
			res.code, res.message = client.StatusCanceled, "the task was canceled"
		case tr.Task.Status == client.StatusSucceeded:
			if !replay {
				res.charged = tr.Task.CreditsCharged
			}
			// Decoding checks that the result is the API's, before it is flattened.
			if tr.Task.ObjectType == client.ObjectCompany {
				_, err = tr.Company()
			} else {
				_, err = tr.Person()
			}
			if err != nil {
				return nil, err
			}
			res.data = tr.Data
		}
		return res, nil
	}
	return &rowResult{status: client.StatusFailed, code: "retries_exhausted",
		message: fmt.Sprintf("%d attempts over earlier runs failed as provider_unavailable, timed_out or internal_error; use a new --batch", maxGenerations)}, nil
}

func (r *enrichRun) enqueue(ctx context.Context, value string, gen int) (*client.Enqueued, error) {
	key := client.IdempotencyKey(r.idempotencyKey(value, gen))
	switch {
	case r.column == columnDomain:
		return r.c.EnrichCompany(ctx, client.CompanyInput{Domain: value}, key)
	case r.column == columnEmail:
		return r.c.EnrichPerson(ctx, client.PersonInput{Email: value}, key)
	case r.object == client.ObjectPerson:
		return r.c.EnrichPerson(ctx, client.PersonInput{NetworkURL: value}, key)
	}
	return r.c.EnrichCompany(ctx, client.CompanyInput{NetworkURL: value}, key)
}

// retryable reports whether a settled task failed in a way another attempt may fix.
func retryable(status string, e *client.TaskError) bool {
	if status == client.StatusCanceled {
		return true
	}
	if status != client.StatusFailed || e == nil {
		return false
	}
	switch e.Code {
	case client.CodeProviderUnavailable, client.CodeTimedOut, client.CodeInternalError:
		return true
	}
	return false
}

// resultColumns is the row's outcome in the columns every enriched CSV has.
func resultColumns(res *rowResult, object string) []string {
	return flatten.Row(flatten.Outcome{Status: res.status, Code: res.code, Message: res.message, TaskID: res.taskID,
		Data: res.data}, object)
}

// writeOutput writes the whole output next to its final place and renames it there,
// so --out is never half-written, even by a run that is killed.
func writeOutput(path string, head []string, records [][]string, results []*rowResult, object string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	w := csv.NewWriter(tmp)
	cols := append(append([]string{}, head...), flatten.Columns(object)...)
	// A cell a spreadsheet would run as a formula is defused, as in a batch's results.
	w.Write(flatten.SpreadsheetSafeRow(cols))
	for i, rec := range records {
		w.Write(flatten.SpreadsheetSafeRow(append(append([]string{}, rec...), resultColumns(results[i], object)...)))
	}
	w.Flush()
	if err := errors.Join(w.Error(), tmp.Close()); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// summary prints what the run did: rows succeeded, failed by code, credits spent.
func (r *enrichRun) summary(w io.Writer, results []*rowResult, total int, out string) {
	var succeeded, failed, interrupted, replayed int
	var credits, held int64
	var inFlight int
	codes := map[string]int{}
	counted := map[*rowResult]bool{} // identical values share a result and a charge
	for _, res := range results {
		switch res.status {
		case client.StatusSucceeded:
			succeeded++
		case rowInterrupted:
			interrupted++
		default:
			failed++
			codes[res.code]++
		}
		if !counted[res] {
			counted[res] = true
			credits += res.charged
			if res.held > 0 {
				held += res.held
				inFlight++
			}
			if res.replayed && res.status == client.StatusSucceeded {
				replayed++
			}
		}
	}
	fmt.Fprintf(w, "%d rows: %d succeeded, %d failed", total, succeeded, failed)
	if failed > 0 {
		names := make([]string, 0, len(codes))
		for c := range codes {
			names = append(names, c)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, c := range names {
			parts[i] = fmt.Sprintf("%s %d", c, codes[c])
		}
		fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
	}
	if interrupted > 0 {
		fmt.Fprintf(w, ", %d not done", interrupted)
	}
	fmt.Fprintf(w, "\ncredits spent: %d", credits)
	if replayed > 0 {
		fmt.Fprintf(w, " (%d results were paid for by an earlier run and cost nothing now)", replayed)
	}
	if inFlight > 0 {
		fmt.Fprintf(w, "\n%d tasks still in flight hold %d credits more, refunded if they fail; running the same command again waits for them without paying again", inFlight, held)
	}
	fmt.Fprintf(w, "\nwrote %s\n", out)
}

// progress shows rows done, the rate and the time left: a bar redrawn in place on a
// terminal, otherwise a line now and then (about a hundred lines for the whole file).
type progress struct {
	mu        sync.Mutex
	w         io.Writer
	tty       bool
	total     int
	finished  int
	ok        int
	every     int
	lastPrint int
	now       func() time.Time
	start     time.Time
}

func newProgress(w io.Writer, total int) *progress {
	p := &progress{w: w, total: total, every: max(1, total/100), now: time.Now}
	p.start = p.now()
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

func (p *progress) done(rows int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished += rows
	if ok {
		p.ok += rows
	}
	if p.tty {
		const width = 30
		filled := width * p.finished / max(1, p.total)
		fmt.Fprintf(p.w, "\r[%s%s] %d/%d rows, %d failed%s ", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
			p.finished, p.total, p.finished-p.ok, p.speed())
		return
	}
	if p.finished-p.lastPrint >= p.every || p.finished == p.total {
		p.lastPrint = p.finished
		fmt.Fprintf(p.w, "enriched %d/%d rows (%d failed)%s\n", p.finished, p.total, p.finished-p.ok, p.speed())
	}
}

// speed is ", R rows/s, about T left" over the run so far; the time left is the rows
// not done at that rate. Empty before the first row or the clock has moved.
func (p *progress) speed() string {
	elapsed := p.now().Sub(p.start)
	if p.finished == 0 || elapsed <= 0 {
		return ""
	}
	rate := float64(p.finished) / elapsed.Seconds()
	s := ", " + strconv.FormatFloat(rate, 'f', 1, 64) + " rows/s"
	if left := p.total - p.finished; left > 0 {
		s += ", about " + (time.Duration(float64(left) / rate * float64(time.Second))).Round(time.Second).String() + " left"
	}
	return s
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
