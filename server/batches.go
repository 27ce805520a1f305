package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"enrichd/enrich"
	"enrichd/flatten"
	"enrichd/store"
)

// Bounds of an upload beyond its rows and bytes (store.MaxBatchRows, MaxBatchBytes).
const (
	maxBatchColumns  = 200
	maxBatchName     = 200
	maxRowRefusals   = 1000 // listed in a 400; the message counts them all
	batchResultsPage = 500
)

// The columns a batch reads, matched without regard to case; any other column is
// kept as it is and written back with the results.
var batchInputColumns = []string{"domain", "networkUrl", "email", "fullName", "title", "location"}

// batchFormat is what an upload or a download is written in.
type batchFormat int

const (
	formatCSV batchFormat = iota
	formatJSONL
)

// uploadFormat reads the Content-Type of an upload: text/csv, or JSON Lines under any
// of its usual names; UTF-8 only.
func uploadFormat(r *http.Request) (batchFormat, error) {
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil {
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			return 0, enrich.Errorf(enrich.KindInvalid, "the upload must be UTF-8, not charset=%s", clip(cs, 40))
		}
		switch mediaType {
		case "text/csv":
			return formatCSV, nil
		case "application/x-ndjson", "application/jsonl", "application/x-jsonlines", "application/json-lines":
			return formatJSONL, nil
		}
	}
	return 0, enrich.Errorf(enrich.KindInvalid, "send the file with Content-Type: text/csv (a header row, then one row per input) or application/x-ndjson (JSON Lines: one object per line)")
}

// uploadRow is one data row: its values by column, and the line it starts on.
type uploadRow struct {
	line   int
	values []string
}

// upload is a parsed file: its columns, in order, and its rows.
type upload struct {
	columns []string
	rows    []uploadRow
	refused []enrich.RowError // rows that could not be read as rows
}

// readUpload reads and parses the body of POST /v1/batches, bounded in bytes and rows.
func readUpload(r *http.Request, format batchFormat) ([]byte, *upload, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, store.MaxBatchBytes))
	var tooLarge *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooLarge):
		return nil, nil, enrich.Errorf(enrich.KindInvalid, "the file is larger than %d MiB; split it into several batches", store.MaxBatchBytes>>20)
	case errors.As(err, &netErr) && netErr.Timeout():
		return nil, nil, enrich.Errorf(enrich.KindInvalid, "the file did not arrive within the server's read timeout")
	case err != nil:
		return nil, nil, enrich.Errorf(enrich.KindInvalid, "the file could not be read: %v", err)
	}
	if !utf8.Valid(body) {
		return nil, nil, enrich.Errorf(enrich.KindInvalid, "the file is not valid UTF-8 (first bad byte at offset %d); save it as UTF-8", invalidUTF8At(body))
	}
	text := bytes.TrimPrefix(body, []byte("\ufeff")) // a spreadsheet's byte order mark
	var up *upload
	if format == formatCSV {
		up, err = parseCSVUpload(text)
	} else {
		up, err = parseJSONLUpload(text)
	}
	if err != nil {
		return nil, nil, err
	}
	return body, up, nil
}

func parseCSVUpload(text []byte) (*upload, error) {
	// A header of a few million commas would otherwise become as many columns (and the
	// csv reader's slices of them) before the bound is checked.
	if n := csvHeaderWidth(text); n > maxBatchColumns {
		return nil, tooManyColumns(n)
	}
	rd := csv.NewReader(bytes.NewReader(text))
	rd.FieldsPerRecord = -1 // a row of another width is that row's refusal
	head, err := rd.Read()
	if err == io.EOF {
		return nil, enrich.Errorf(enrich.KindInvalid, "the file is empty: send a header row, then one row per input")
	}
	if err != nil {
		return nil, enrich.Errorf(enrich.KindInvalid, "the header row: %v", err)
	}
	if len(head) > maxBatchColumns { // csvHeaderWidth and the reader disagree only on a malformed header
		return nil, tooManyColumns(len(head))
	}
	up := &upload{}
	for _, h := range head {
		up.columns = append(up.columns, strings.TrimSpace(h))
	}
	for {
		rec, err := rd.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, enrich.Errorf(enrich.KindInvalid, "the file is not CSV the server can read: %v", err)
		}
		line, _ := rd.FieldPos(0)
		// A refused row is in up.rows too, so that the rows keep their numbers.
		if len(up.rows) >= store.MaxBatchRows {
			return nil, enrich.Errorf(enrich.KindInvalid, "the file has more than %d rows; split it into several batches", store.MaxBatchRows)
		}
		if len(rec) != len(head) {
			up.refused = append(up.refused, enrich.RowError{Row: len(up.rows) + 1, Line: line,
				Message: fmt.Sprintf("has %d fields where the header has %d", len(rec), len(head))})
			up.rows = append(up.rows, uploadRow{line: line, values: rec}) // keeps the numbering
			continue
		}
		up.rows = append(up.rows, uploadRow{line: line, values: rec})
	}
	return up, nil
}

func tooManyColumns(n int) error {
	return enrich.Errorf(enrich.KindInvalid, "the file has %d columns; at most %d", n, maxBatchColumns)
}

// csvHeaderWidth counts the fields of a CSV file's header row, its first line that is
// not blank, as encoding/csv reads it, without building them.
func csvHeaderWidth(text []byte) int {
	for len(text) > 0 && (text[0] == '\n' || text[0] == '\r' && len(text) > 1 && text[1] == '\n') {
		text = text[1:]
	}
	fields, quoted, fieldStart := 1, false, true
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quoted:
			if c == '"' {
				if i+1 < len(text) && text[i+1] == '"' {
					i++
				} else {
					quoted = false
				}
			}
		case c == '"' && fieldStart:
			quoted = true
		case c == ',':
			fields++
			fieldStart = true
			continue
		case c == '\n':
			return fields
		}
		fieldStart = false
	}
	return fields
}

func parseJSONLUpload(text []byte) (*upload, error) {
	up := &upload{}
	index := map[string]int{}
	for n, line := range bytes.Split(text, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(up.rows) >= store.MaxBatchRows {
			return nil, enrich.Errorf(enrich.KindInvalid, "the file has more than %d rows; split it into several batches", store.MaxBatchRows)
		}
		row := uploadRow{line: n + 1}
		fields, err := orderedObject(line)
		if errors.Is(err, errTooManyFields) {
			return nil, enrich.Errorf(enrich.KindInvalid, "the file has more than %d distinct fields", maxBatchColumns)
		}
		if err != nil {
			up.refused = append(up.refused, enrich.RowError{Row: len(up.rows) + 1, Line: n + 1, Message: err.Error()})
			up.rows = append(up.rows, row)
			continue
		}
		for _, f := range fields {
			i, ok := index[f.key]
			if !ok {
				if len(up.columns) >= maxBatchColumns {
					return nil, enrich.Errorf(enrich.KindInvalid, "the file has more than %d distinct fields", maxBatchColumns)
				}
				i = len(up.columns)
				index[f.key] = i
				up.columns = append(up.columns, f.key)
			}
			for len(row.values) <= i {
				row.values = append(row.values, "")
			}
			row.values[i] = f.value
		}
		up.rows = append(up.rows, row)
	}
	// Rows before a field first appeared have it empty.
	for i := range up.rows {
		for len(up.rows[i].values) < len(up.columns) {
			up.rows[i].values = append(up.rows[i].values, "")
		}
	}
	return up, nil
}

type field struct{ key, value string }

// errTooManyFields is a line of more fields than a file may have columns: the file is
// refused as soon as the line's field past the bound is read.
var errTooManyFields = errors.New("more fields than a file may have columns")

// orderedObject reads one JSON object's fields in the order written. A string is its
// text, null is empty, any other value its JSON.
func orderedObject(line []byte) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("is not a JSON object")
	}
	var out []field
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errors.New("is not valid JSON")
		}
		key := tok.(string)
		if seen[key] {
			return nil, fmt.Errorf("has the field %q twice", clip(key, 40))
		}
		seen[key] = true
		if len(seen) > maxBatchColumns {
			return nil, errTooManyFields
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errors.New("is not valid JSON")
		}
		v := string(raw)
		switch {
		case v == "null":
			v = ""
		case strings.HasPrefix(v, `"`):
			json.Unmarshal(raw, &v)
		}
		out = append(out, field{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, errors.New("is not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("holds more than one JSON value; put one object on each line")
	}
	return out, nil
}

// batchAsk is what an upload asks of its rows, from its query: object_type or enrich
// name what every row enriches (company, person, or both), else each row decides;
// on_error=skip makes a batch of the rows that pass.
type batchAsk struct {
	company, person bool
	skip            bool
	// As sent, for the Idempotency-Key's binding.
	objectType, enrich, onError string
}

// parseBatchAsk reads an upload's object_type, enrich and on_error.
func parseBatchAsk(objectType, enrichParam, onError string) (batchAsk, error) {
	ask := batchAsk{objectType: objectType, enrich: enrichParam, onError: onError}
	switch objectType {
	case "":
	case enrich.ObjectCompany, enrich.ObjectPerson:
		ask.company, ask.person = objectType == enrich.ObjectCompany, objectType == enrich.ObjectPerson
	default:
		return ask, enrich.Errorf(enrich.KindInvalid, "object_type must be company or person")
	}
	if enrichParam != "" {
		var company, person bool
		for _, part := range strings.Split(enrichParam, ",") {
			switch strings.TrimSpace(part) {
			case enrich.ObjectCompany:
				if company {
					return ask, enrich.Errorf(enrich.KindInvalid, "enrich names company twice")
				}
				company = true
			case enrich.ObjectPerson:
				if person {
					return ask, enrich.Errorf(enrich.KindInvalid, "enrich names person twice")
				}
				person = true
			default:
				return ask, enrich.Errorf(enrich.KindInvalid, "enrich must be company, person, or company,person")
			}
		}
		if objectType != "" && (company != ask.company || person != ask.person) {
			return ask, enrich.Errorf(enrich.KindInvalid, "object_type=%s and enrich=%s ask for different things; send enrich alone", objectType, clip(enrichParam, 40))
		}
		ask.company, ask.person = company, person
	}
	switch onError {
	case "", "fail":
	case "skip":
		ask.skip = true
	default:
		return ask, enrich.Errorf(enrich.KindInvalid, "on_error must be fail (a refused row refuses the file, the default) or skip (the other rows go ahead)")
	}
	return ask, nil
}

// single is the one kind every row is asked to be, "" when each row decides or both
// are asked.
func (a batchAsk) single() string {
	switch {
	case a.company && !a.person:
		return enrich.ObjectCompany
	case a.person && !a.company:
		return enrich.ObjectPerson
	}
	return ""
}

// batchPlan is an upload checked: what the batch is made of. People and Companies
// count the lookups of each kind, a row that enriches both counting in each.
type batchPlan struct {
	objectType string
	rows       []store.NewBatchRow
	estimate   int64
	skipped    []enrich.RowError
	people     int
	companies  int
}

// rowInputs are a row's input cells, nil when empty.
type rowInputs struct {
	domain, networkURL, email, fullName, title, location *string
}

// isProfile reports whether a networkUrl is a person's profile rather than a company
// page: its path starts with /in/.
func isProfile(u *string) bool {
	return u != nil && strings.Contains(strings.ToLower(*u), "/in/")
}

// personOf is the person request of a row that has an email or a profile: the
// profile, else the email with its hints; ok false when it has neither.
func (in rowInputs) personOf() (personRequest, bool) {
	var pr personRequest
	switch {
	case isProfile(in.networkURL):
		pr.NetworkURL = in.networkURL
	case in.email != nil:
		pr.Email, pr.FullName, pr.Title, pr.Location = in.email, in.fullName, in.title, in.location
	default:
		return pr, false
	}
	return pr, true
}

// companyOf is the company request of a row that has a domain or a company page: the
// domain, else the page; ok false when it has neither.
func (in rowInputs) companyOf() (companyRequest, bool) {
	var cr companyRequest
	switch {
	case in.domain != nil:
		cr.Domain = in.domain
	case in.networkURL != nil && !isProfile(in.networkURL):
		cr.NetworkURL = in.networkURL
	default:
		return cr, false
	}
	return cr, true
}

// rowPart is one lookup a row makes: its kind, its request's fields and the input.
type rowPart struct {
	kind string
	req  any
	in   enrich.Input
}

// planBatch checks every row of an upload as the enrichment endpoint of its kind
// checks a body, and collects every refusal: nothing is made unless every row passes,
// or, with on_error=skip, at least one does (the others are kept as skipped).
//
// What a row enriches: with a single kind asked (object_type, or enrich=company or
// enrich=person), that kind, as it always did: a company row uses its domain, else its
// networkUrl; a person row its networkUrl, else its email with the hints. Otherwise each
// row decides: an email or a profile (a networkUrl under /in/) makes a person, the
// profile first; else a domain or a company page makes a company, the domain first. A
// row of both (an email and a domain) is its person, its domain kept as a column and
// not looked up, unless enrich=company,person asks for both: then it is its person and
// its company, two lookups in one result row.
func (s *Server) planBatch(up *upload, ask batchAsk) (*batchPlan, error) {
	col := map[string]int{}
	seen := map[string]bool{}
	for i, c := range up.columns {
		if seen[c] && c != "" {
			return nil, enrich.Errorf(enrich.KindInvalid, "the column %q appears twice in the header", clip(c, 40))
		}
		seen[c] = true
		for _, name := range batchInputColumns {
			if strings.EqualFold(c, name) {
				if _, dup := col[name]; dup {
					return nil, enrich.Errorf(enrich.KindInvalid, "two columns are %s (the names are read without regard to case)", name)
				}
				col[name] = i
			}
		}
	}
	_, hasDomain := col["domain"]
	_, hasURL := col["networkUrl"]
	_, hasEmail := col["email"]
	if !hasDomain && !hasURL && !hasEmail && len(up.refused) > 0 {
		return nil, refusedRows(up.refused, len(up.rows))
	}
	if !hasDomain && !hasURL && !hasEmail {
		return nil, enrich.Errorf(enrich.KindInvalid, "the file has no domain, networkUrl or email column (its columns: %s)", clip(strings.Join(up.columns, ", "), 200))
	}
	if len(up.rows) == 0 {
		return nil, enrich.Errorf(enrich.KindInvalid, "the file has a header and no rows")
	}
	get := func(row uploadRow, name string) *string {
		i, ok := col[name]
		if !ok || i >= len(row.values) || strings.TrimSpace(row.values[i]) == "" {
			return nil
		}
		v := row.values[i]
		return &v
	}
	// A row with none of the inputs is refused in the words of the file's columns.
	nothing := "has no domain, networkUrl or email"
	switch {
	case !hasEmail:
		nothing = "has neither a domain nor a networkUrl"
	case !hasDomain:
		nothing = "has neither a networkUrl nor an email"
	}
	single := ask.single()

	refused := append([]enrich.RowError{}, up.refused...)
	unreadable := make(map[int]string, len(up.refused))
	for _, r := range up.refused {
		unreadable[r.Row] = r.Message
	}
	plan := &batchPlan{rows: make([]store.NewBatchRow, 0, len(up.rows))}
	var companies, people bool // the kinds of the rows that pass
	for i, row := range up.rows {
		nr := store.NewBatchRow{Values: row.values, Line: row.line}
		if reason, bad := unreadable[i+1]; bad {
			nr.Values, nr.Skipped = fitted(row.values, len(up.columns)), reason
			plan.rows = append(plan.rows, nr)
			continue
		}
		in := rowInputs{domain: get(row, "domain"), networkURL: get(row, "networkUrl"), email: get(row, "email"),
			fullName: get(row, "fullName"), title: get(row, "title"), location: get(row, "location")}
		var parts [2]rowPart // the row's own lookup, and its company's
		n := 0
		var err error
		switch single {
		case enrich.ObjectCompany:
			var cr companyRequest
			if cr.Domain = in.domain; cr.Domain == nil {
				cr.NetworkURL = in.networkURL
			}
			if cr.Domain == nil && cr.NetworkURL == nil {
				err = errors.New("has neither a domain nor a networkUrl")
			}
			parts[0], n = rowPart{kind: enrich.ObjectCompany, req: cr}, 1
		case enrich.ObjectPerson:
			var pr personRequest
			if pr.NetworkURL = in.networkURL; pr.NetworkURL == nil {
				if pr.Email = in.email; pr.Email != nil {
					pr.FullName, pr.Title, pr.Location = in.fullName, in.title, in.location
				}
			}
			if pr.NetworkURL == nil && pr.Email == nil {
				err = errors.New("has neither a networkUrl nor an email")
			}
			parts[0], n = rowPart{kind: enrich.ObjectPerson, req: pr}, 1
		default:
			pr, isPerson := in.personOf()
			cr, isCompany := in.companyOf()
			if isPerson {
				parts[n], n = rowPart{kind: enrich.ObjectPerson, req: pr}, n+1
			}
			if isCompany && (!isPerson || ask.company) {
				parts[n], n = rowPart{kind: enrich.ObjectCompany, req: cr}, n+1
			}
			if n == 0 {
				err = errors.New(nothing)
			}
		}
		for j := 0; err == nil && j < n; j++ {
			p := &parts[j]
			switch req := p.req.(type) {
			case companyRequest:
				p.in, err = req.input(s.norm)
			case personRequest:
				p.in, err = req.input(s.norm)
			}
		}
		if err != nil {
			refused = append(refused, enrich.RowError{Row: i + 1, Line: row.line, Message: err.Error()})
			nr.Values, nr.Skipped = fitted(row.values, len(up.columns)), err.Error()
			plan.rows = append(plan.rows, nr)
			continue
		}
		if len(refused) > 0 && !ask.skip {
			continue // refused whole: the rest are only checked
		}
		for j, p := range parts[:n] {
			raw, err := json.Marshal(p.req)
			if err != nil {
				return nil, err
			}
			if j == 0 {
				nr.Request, nr.Kind = raw, p.kind
				// The row is about whom its own lookup names; its company's is a
				// company's, not a person's.
				nr.Subject, nr.SubjectOK = enrich.InputSubject(p.in)
			} else {
				nr.CompanyRequest = raw
			}
			if p.kind == enrich.ObjectCompany {
				companies = true
				plan.companies++
			} else {
				people = true
				plan.people++
			}
			plan.estimate += p.in.Lookup.Cost()
		}
		plan.rows = append(plan.rows, nr)
	}
	if len(refused) > 0 && (!ask.skip || len(refused) == len(up.rows)) {
		return nil, refusedRows(refused, len(up.rows))
	}
	switch {
	case single != "":
		plan.objectType = single
	case ask.company && ask.person, companies && people:
		plan.objectType = store.ObjectMixed
	case companies:
		plan.objectType = enrich.ObjectCompany
	default:
		plan.objectType = enrich.ObjectPerson
	}
	if plan.objectType != store.ObjectMixed {
		// A batch of one kind says it once, as batches always did.
		for i := range plan.rows {
			plan.rows[i].Kind = ""
		}
	}
	slices.SortFunc(refused, func(a, b enrich.RowError) int { return a.Row - b.Row })
	plan.skipped = refused
	return plan, nil
}

// fitted is a row's values as wide as the header: a row of another width, skipped,
// is kept cut or padded to it, so that the results line up.
func fitted(values []string, width int) []string {
	out := make([]string, width)
	copy(out, values)
	return out
}

// refusedRows is the 400 of an upload with refused rows: every one, in row order, up
// to maxRowRefusals listed.
func refusedRows(refused []enrich.RowError, rows int) error {
	slices.SortFunc(refused, func(a, b enrich.RowError) int { return a.Row - b.Row })
	msg := fmt.Sprintf("%d of %d rows are refused, listed in rows; nothing was created or charged: fix them and upload the file again", len(refused), rows)
	if len(refused) > maxRowRefusals {
		msg = fmt.Sprintf("%d of %d rows are refused, the first %d listed in rows; nothing was created or charged: fix them and upload the file again", len(refused), rows, maxRowRefusals)
		refused = refused[:maxRowRefusals]
	}
	return &enrich.Error{Kind: enrich.KindInvalid, Code: enrich.CodeInvalidInput, Message: msg, Rows: refused}
}

// RowRequest reads a batch row's stored request back into the endpoint's request and
// checks it again, as the endpoint would, with serve's --network-host (the default
// when ""): the batch feeder (package worker) makes the row's task of it.
func RowRequest(networkHost string) func(objectType string, raw json.RawMessage) (enrich.Input, any, error) {
	if networkHost == "" {
		networkHost = DefaultConfig().NetworkHost
	}
	norm := enrich.Normalizer{NetworkHost: networkHost}
	return func(objectType string, raw json.RawMessage) (enrich.Input, any, error) {
		if objectType == enrich.ObjectCompany {
			var cr companyRequest
			if err := json.Unmarshal(raw, &cr); err != nil {
				return enrich.Input{}, nil, err
			}
			in, err := cr.input(norm)
			return in, cr, err
		}
		var pr personRequest
		if err := json.Unmarshal(raw, &pr); err != nil {
			return enrich.Input{}, nil, err
		}
		in, err := pr.input(norm)
		return in, pr, err
	}
}

// createBatch checks an upload and makes the batch, for the API and the dashboard
// alike; the feeder makes the rows' tasks after.
func (s *Server) createBatch(ctx context.Context, orgID string, body []byte, up *upload, ask batchAsk, name, key string) (*store.Batch, bool, error) {
	switch {
	case !utf8.ValidString(name) || strings.ContainsRune(name, 0):
		return nil, false, enrich.Errorf(enrich.KindInvalid, "name must be UTF-8 text without NUL characters")
	case utf8.RuneCountInString(name) > maxBatchName:
		return nil, false, enrich.Errorf(enrich.KindInvalid, "name is longer than %d characters", maxBatchName)
	}
	plan, err := s.planBatch(up, ask)
	if err != nil {
		return nil, false, err
	}
	// The key is bound to the file and the parameters as sent; an upload without the
	// later parameters is bound as it was before them.
	h := sha256.New()
	fmt.Fprintf(h, "batch\n%s\n%s\n", ask.objectType, name)
	if ask.enrich != "" || ask.onError != "" {
		fmt.Fprintf(h, "enrich\n%s\non_error\n%s\n", ask.enrich, ask.onError)
	}
	h.Write(body)
	b, replayed, err := s.db.CreateBatch(ctx, ActingOf(ctx), store.NewBatch{OrgID: orgID, ObjectType: plan.objectType, Name: name,
		Columns: up.columns, Rows: plan.rows, CreditsEstimate: plan.estimate, IdempotencyKey: key, BodyHash: hex.EncodeToString(h.Sum(nil))})
	if err != nil {
		return nil, false, err
	}
	if !replayed {
		s.wakeFeeder()
	}
	return b, replayed, nil
}

// batchOutcome is a lookup of a result row as the flattened columns show it.
func batchOutcome(r store.BatchPart) flatten.Outcome {
	switch {
	case r.Error != nil:
		return flatten.Outcome{Status: store.StatusFailed, Code: r.Error.Code, Message: r.Error.Message}
	case r.Purged:
		return flatten.Outcome{Status: "purged", Message: "the task was deleted by retention (serve --retain)"}
	case r.Task == nil:
		return flatten.Outcome{Status: "pending"}
	}
	t := r.Task
	o := flatten.Outcome{Status: t.Status, TaskID: t.ID}
	switch {
	case t.Error != nil:
		o.Code, o.Message = t.Error.Code, t.Error.Message
	case t.Status == store.StatusCanceled:
		o.Code, o.Message = store.StatusCanceled, "the task was canceled"
	case t.Status == store.StatusSucceeded:
		o.Data = t.Data
	}
	return o
}

// batchRow is a result row's flattened columns, in the layout of objectType: a
// skipped row says so (and why) in each status column it has; a mixed batch's row
// fills the columns of the lookups it made, and leaves the others empty.
func batchRow(r store.BatchResult, objectType string) []string {
	if r.Skipped {
		o := flatten.Outcome{Status: "skipped", Code: enrich.CodeInvalidInput}
		if r.Error != nil {
			o.Message = r.Error.Message
		}
		if objectType == store.ObjectMixed {
			return flatten.MixedRow(o, o)
		}
		return flatten.Row(o, objectType)
	}
	if objectType != store.ObjectMixed {
		return flatten.Row(batchOutcome(r.BatchPart), objectType)
	}
	var person, company flatten.Outcome
	if r.Kind == enrich.ObjectCompany {
		company = batchOutcome(r.BatchPart)
	} else {
		person = batchOutcome(r.BatchPart)
	}
	if r.Company != nil {
		company = batchOutcome(*r.Company)
	}
	return flatten.MixedRow(person, company)
}

// resultsFormat is the download's format: JSON Lines when Accept asks for it (or
// ?format=jsonl), CSV otherwise.
func resultsFormat(r *http.Request) batchFormat {
	if f := r.URL.Query().Get("format"); f != "" {
		if f == "jsonl" {
			return formatJSONL
		}
		return formatCSV
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
		switch mt {
		case "application/x-ndjson", "application/jsonl", "application/x-jsonlines", "application/json-lines":
			return formatJSONL
		case "text/csv":
			return formatCSV
		}
	}
	return formatCSV
}

// writeBatchResults streams a batch's rows, the input columns then the result's
// flattened columns, a page of rows at a time. A failure before the first byte is
// written is answered by fail (the API's or the dashboard's error); after it, the
// connection is dropped, so that the client sees a broken download rather than a file
// that looks complete and is not.
func (s *Server) writeBatchResults(w http.ResponseWriter, r *http.Request, b *store.Batch, format batchFormat, fail func(http.ResponseWriter, *http.Request, error)) {
	ctx := r.Context()
	base := b.Name
	if base == "" {
		base = "batch-" + b.ID
	}
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".csv"), ".jsonl")
	ext := ".csv"
	if format == formatJSONL {
		ext = ".jsonl"
		w.Header().Set("Content-Type", "application/x-ndjson")
	} else {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	}
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": base + "-results" + ext}))
	// The download is an access to the rows' people: recorded before a byte is sent.
	batchID := b.ID
	if err := s.db.RecordAudit(ctx, ActingOf(ctx), store.NewAuditEntry{OrgID: b.OrgID, Action: store.AuditBatchDownloaded, BatchID: &batchID,
		Detail: map[string]any{"format": ext[1:], "rows": b.Rows}}); err != nil {
		w.Header().Del("Content-Disposition")
		fail(w, r, err)
		return
	}
	columns := append(append([]string{}, b.Columns...), flatten.Columns(b.ObjectType)...)
	out := &sentWriter{w: w}
	cw := csv.NewWriter(out)
	if format == formatCSV {
		cw.Write(flatten.SpreadsheetSafeRow(slices.Clone(columns)))
	}
	after := 0
	for {
		page, err := s.db.BatchResults(ctx, b.OrgID, b.ID, after, batchResultsPage)
		if err != nil {
			if !out.sent {
				w.Header().Del("Content-Disposition")
				fail(w, r, err)
				return
			}
			s.abortStream(r, "batch results cut short", err, "batch", b.ID, "after_row", after)
		}
		for _, res := range page {
			values := make([]string, len(b.Columns), len(columns))
			copy(values, res.Values)
			values = append(values, batchRow(res, b.ObjectType)...)
			if format == formatCSV {
				cw.Write(flatten.SpreadsheetSafeRow(values))
				continue
			}
			line := make([]byte, 0, 512)
			line = append(line, '{')
			for i, c := range columns {
				if i > 0 {
					line = append(line, ',')
				}
				k, _ := json.Marshal(c)
				v, _ := json.Marshal(values[i])
				line = append(append(append(line, k...), ':'), v...)
			}
			out.Write(append(line, "}\n"...))
		}
		cw.Flush()
		if len(page) < batchResultsPage {
			break
		}
		after = page[len(page)-1].Row
	}
	cw.Flush()
}

// sentWriter notes whether anything was written to the response: until then a failure
// can still be answered with an error.
type sentWriter struct {
	w    io.Writer
	sent bool
}

func (s *sentWriter) Write(p []byte) (int, error) {
	s.sent = s.sent || len(p) > 0
	return s.w.Write(p)
}
