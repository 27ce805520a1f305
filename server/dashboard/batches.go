package dashboard

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"path"
	"strings"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
)

// The Upload page: a CSV or JSON Lines file becomes a batch through the checks and the
// store methods POST /v1/batches uses (readUpload's parsing, planBatch, createBatch),
// so a batch uploaded here is exactly one uploaded through the API. The file is read
// twice: once for the preview, which makes nothing, and once more, carried in the
// preview's form, when it is confirmed.

// batchesPerPage is how many batches the page lists.
const batchesPerPage = 20

// previewRows is how many of the file's first rows the preview shows.
const previewRows = 5

// maxUploadForm bounds the multipart upload and the confirm form (the file, base64 in
// a field): the file's own bound, and room for the encoding and the other fields.
const maxUploadForm = store.MaxBatchBytes*4/3 + 64<<10

type batchesPage struct {
	Batches []*store.Batch
	Total   int64
	Error   string
	Refused []enrich.RowError
	Balance int64
}

// batchColumn is a column of the file as the preview shows it.
type batchColumn struct {
	Name, Use string
}

type batchPreview struct {
	Name, ObjectType, Format string
	Columns                  []batchColumn
	Rows                     [][]string
	RowCount                 int
	People, Companies        int // the lookups of each kind
	Skipped                  []enrich.RowError
	Estimate, Balance        int64
	Content, Key             string // the confirm form's fields
	Enrich, OnError          string // what the upload asked, carried to the confirm form
}

// Enriched is the number of rows that go ahead.
func (p batchPreview) Enriched() int { return p.RowCount - len(p.Skipped) }

// failuresShown is how many failed lookups and skipped rows a batch's page lists.
const failuresShown = 100

// batchView is a batch's page: the batch, and its failures so far.
type batchView struct {
	*store.Batch
	Failures []store.BatchFailure
}

// MoreFailures reports whether the batch has failures beyond those listed.
func (b batchView) MoreFailures() bool {
	return int64(len(b.Failures)) < b.Counts.Failed+b.Counts.Skipped
}

func (s *Dashboard) renderBatches(w http.ResponseWriter, r *http.Request, status int, p batchesPage) {
	ctx, u := r.Context(), dashUser(r)
	var err error
	if p.Batches, p.Total, err = s.db.ListBatches(ctx, u.OrgID, 0, batchesPerPage); err != nil {
		s.dashError(w, r, err)
		return
	}
	b, err := s.db.CreditBalance(ctx, u.OrgName)
	if err != nil {
		s.dashError(w, r, err)
		return
	}
	p.Balance = b.Balance
	s.render(w, r, status, "batches", view{Title: "Upload", Section: "batches", Notice: notice(r), Data: p})
}

func handleBatchesPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.renderBatches(w, r, http.StatusOK, batchesPage{})
	})
}

// uploadRefused shows the upload form again with why the file was refused.
func (s *Dashboard) uploadRefused(w http.ResponseWriter, r *http.Request, err error) {
	var e *enrich.Error
	if !errors.As(err, &e) || e.Kind == enrich.KindInternal || e.Kind == enrich.KindUnavailable {
		s.dashError(w, r, err)
		return
	}
	s.renderBatches(w, r, server.StatusOf[e.Kind], batchesPage{Error: e.Message, Refused: e.Rows})
}

// uploadFormatOf is the format of an uploaded file: by its name's extension, then by
// its first byte (a JSON Lines file starts with an object).
func uploadFormatOf(name string, content []byte) server.BatchFormat {
	switch strings.ToLower(path.Ext(name)) {
	case ".csv":
		return server.FormatCSV
	case ".jsonl", ".ndjson":
		return server.FormatJSONL
	}
	if strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(string(content[:min(len(content), 64)]), "\ufeff")), "{") {
		return server.FormatJSONL
	}
	return server.FormatCSV
}

// handleBatchPreview reads the chosen file and shows what the batch would be: the
// columns and what each is read as, the first rows, the rows' count and the credits,
// with a form to confirm. Nothing is made or charged.
func handleBatchPreview(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxUploadForm)
		if err := r.ParseMultipartForm(maxUploadForm); err != nil {
			s.uploadRefused(w, r, enrich.Errorf(enrich.KindInvalid, "Choose a CSV or JSON Lines file of at most %d MiB.", store.MaxBatchBytes>>20))
			return
		}
		defer r.MultipartForm.RemoveAll()
		file, header, err := r.FormFile("file")
		if err != nil {
			s.uploadRefused(w, r, enrich.Errorf(enrich.KindInvalid, "Choose a file to upload."))
			return
		}
		content, err := readFilePart(file)
		if err != nil {
			s.uploadRefused(w, r, err)
			return
		}
		format := uploadFormatOf(header.Filename, content)
		name := strings.ReplaceAll(strings.ToValidUTF8(path.Base(header.Filename), ""), "\x00", "")
		s.previewBatch(w, r, server.Clip(name, server.MaxBatchName-3), r.FormValue("enrich"), r.FormValue("on_error"), format, content)
	})
}

func readFilePart(f multipart.File) ([]byte, error) {
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, store.MaxBatchBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > store.MaxBatchBytes {
		return nil, enrich.Errorf(enrich.KindInvalid, "the file is larger than %d MiB; split it into several batches", store.MaxBatchBytes>>20)
	}
	return b, nil
}

// parseDashUpload parses a file as POST /v1/batches parses its body.
func parseDashUpload(format server.BatchFormat, content []byte) (*server.Upload, error) {
	ct := "text/csv"
	if format == server.FormatJSONL {
		ct = "application/x-ndjson"
	}
	req, _ := http.NewRequest(http.MethodPost, "/", strings.NewReader(string(content)))
	req.Header.Set("Content-Type", ct)
	_, up, err := server.ReadUpload(req, format)
	return up, err
}

func (s *Dashboard) previewBatch(w http.ResponseWriter, r *http.Request, name, enrichAsk, onError string, format server.BatchFormat, content []byte) {
	ask, err := server.ParseBatchAsk("", enrichAsk, onError)
	if err != nil {
		s.uploadRefused(w, r, err)
		return
	}
	up, err := parseDashUpload(format, content)
	if err != nil {
		s.uploadRefused(w, r, err)
		return
	}
	plan, err := s.srv.PlanBatch(up, ask)
	if err != nil {
		s.uploadRefused(w, r, err)
		return
	}
	b, err := s.db.CreditBalance(r.Context(), dashUser(r).OrgName)
	if err != nil {
		s.dashError(w, r, err)
		return
	}
	p := batchPreview{Name: name, ObjectType: plan.ObjectType, RowCount: len(plan.Rows), Estimate: plan.Estimate, Balance: b.Balance,
		People: plan.People, Companies: plan.Companies, Skipped: plan.Skipped, Enrich: enrichAsk, OnError: onError,
		Content: base64.RawURLEncoding.EncodeToString(content), Format: "csv", Key: rand.Text()}
	if format == server.FormatJSONL {
		p.Format = "jsonl"
	}
	for _, c := range up.Columns() {
		use := "kept as it is"
		for _, in := range server.BatchInputColumns {
			if strings.EqualFold(c, in) {
				use = "read as " + in
			}
		}
		p.Columns = append(p.Columns, batchColumn{Name: c, Use: use})
	}
	for _, row := range plan.Rows {
		if len(p.Rows) == previewRows {
			break
		}
		if row.Skipped == "" {
			p.Rows = append(p.Rows, row.Values)
		}
	}
	s.render(w, r, http.StatusOK, "batch_preview", view{Title: "Upload: check and confirm", Section: "batches", Data: p})
}

// handleCreateBatchForm makes the batch the preview showed: the file comes back in the
// confirm form, and the form's key (made for the preview) is the batch's
// Idempotency-Key, so a second click, or the form sent again, gives the same batch.
func handleCreateBatchForm(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxUploadForm)
		if err := r.ParseForm(); err != nil {
			s.uploadRefused(w, r, enrich.Errorf(enrich.KindInvalid, "the form could not be read; upload the file again"))
			return
		}
		content, err := base64.RawURLEncoding.DecodeString(r.PostFormValue("content"))
		if err != nil || len(content) > store.MaxBatchBytes {
			s.uploadRefused(w, r, enrich.Errorf(enrich.KindInvalid, "the form does not hold the file it previewed; upload the file again"))
			return
		}
		format := server.FormatCSV
		if r.PostFormValue("format") == "jsonl" {
			format = server.FormatJSONL
		}
		up, err := parseDashUpload(format, content)
		if err != nil {
			s.uploadRefused(w, r, err)
			return
		}
		key := r.PostFormValue("key")
		if len(key) > 64 {
			key = ""
		}
		if key != "" {
			key = "dashboard-upload-" + key
		}
		ask, err := server.ParseBatchAsk("", r.PostFormValue("enrich"), r.PostFormValue("on_error"))
		if err != nil {
			s.uploadRefused(w, r, err)
			return
		}
		b, _, err := s.srv.CreateBatch(r.Context(), dashUser(r).OrgID, content, up, ask, server.Clip(r.PostFormValue("name"), server.MaxBatchName), key)
		if err != nil {
			s.uploadRefused(w, r, err)
			return
		}
		seeOther(w, r, "/dashboard/batches/"+b.ID, "")
	})
}

func (s *Dashboard) dashBatch(w http.ResponseWriter, r *http.Request) (*store.Batch, bool) {
	b, err := s.srv.BatchOf(r, dashUser(r).OrgID)
	if err != nil {
		s.dashError(w, r, err)
		return nil, false
	}
	return b, true
}

// handleBatchPage shows a batch's progress; htmx polls its progress fragment while it
// runs, and without JavaScript the page has a link to itself.
func handleBatchPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := s.dashBatch(w, r)
		if !ok {
			return
		}
		title := b.Name
		if title == "" {
			title = "Batch"
		}
		v := batchView{Batch: b}
		if b.Counts.Failed+b.Counts.Skipped > 0 {
			var err error
			if v.Failures, err = s.db.BatchFailures(r.Context(), b.OrgID, b.ID, failuresShown); err != nil {
				s.dashError(w, r, err)
				return
			}
		}
		s.render(w, r, http.StatusOK, "batch", view{Title: title, Section: "batches", Notice: notice(r), Data: v})
	})
}

func handleDashBatchResults(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := s.dashBatch(w, r)
		if !ok {
			return
		}
		format := server.FormatCSV
		if r.URL.Query().Get("format") == "jsonl" {
			format = server.FormatJSONL
		}
		s.srv.WriteBatchResults(w, r, b, format, s.dashError)
	})
}
