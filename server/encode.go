package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"enrichd/enrich"
	"enrichd/store"
)

// maxBody is the largest request body accepted.
const maxBody = 64 << 10

func encode(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// encodeTask writes {"task": ..., "data": ..., "error": ...}, data and error left out
// when empty, as encode writes it, without reflection: the answer to every enqueue
// (see store.Task.AppendJSON).
func encodeTask(w http.ResponseWriter, status int, t *store.Task, data json.RawMessage, taskErr *enrich.TaskError) {
	b := appendTaskStart(make([]byte, 0, 512+len(t.Input)+len(data)), t, data)
	writeJSON(w, status, appendTaskEnd(b, taskErr))
}

// taskAnswer is the body of GET /v1/tasks/:id for t: its data once it succeeded, with
// where each field came from and what each source was asked beside it, and its error
// once it failed. The dashboard's task page shows the same two from the task itself.
func taskAnswer(t *store.Task) []byte {
	var data json.RawMessage
	if t.Status == store.StatusSucceeded {
		data = t.Data
	}
	prov, sources := taskTrace(t)
	b := appendTaskStart(make([]byte, 0, 512+len(t.Input)+len(data)+len(prov)+len(sources)), t, data)
	b = append(b, `,"provenance":`...)
	b = append(b, prov...)
	b = append(b, `,"sources":`...)
	b = append(b, sources...)
	return appendTaskEnd(b, t.Error)
}

// taskTrace is a task's provenance and sources as the API shows them: {} when it has
// no data, [] when no source was asked (a store hit, a task not run yet).
func taskTrace(t *store.Task) (provenance, sources json.RawMessage) {
	provenance, sources = json.RawMessage(`{}`), json.RawMessage(`[]`)
	if t.Status == store.StatusSucceeded && len(t.Provenance) > 0 {
		provenance = t.Provenance
	}
	if len(t.Sources) > 0 {
		sources = t.Sources
	}
	return provenance, sources
}

// appendTaskStart appends a task's body up to its data.
func appendTaskStart(b []byte, t *store.Task, data json.RawMessage) []byte {
	b = append(b, `{"task":`...)
	b = t.AppendJSON(b)
	if len(data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, data...)
	}
	return b
}

// appendTaskEnd ends a task's body with its error, if any.
func appendTaskEnd(b []byte, taskErr *enrich.TaskError) []byte {
	if taskErr != nil {
		raw, _ := json.Marshal(taskErr) // strings and numbers: it always marshals
		b = append(b, `,"error":`...)
		b = append(b, raw...)
	}
	return append(b, "}\n"...)
}

// encodeTaskList writes {"data": [tasks...], "total": total} as encode writes it.
func encodeTaskList(w http.ResponseWriter, tasks []*store.Task, total int64) {
	b := make([]byte, 0, 64+400*len(tasks))
	b = append(b, `{"data":[`...)
	for i, t := range tasks {
		if i > 0 {
			b = append(b, ',')
		}
		b = t.AppendJSON(b)
	}
	b = append(b, `],"total":`...)
	b = strconv.AppendInt(b, total, 10)
	writeJSON(w, http.StatusOK, append(b, "}\n"...))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// decode reads a JSON request body into a T: a JSON object of known fields, at most
// 64 KiB, sent as application/json.
func decode[T any](r *http.Request) (T, error) {
	return decodeUpTo[T](r, maxBody)
}

// decodeUpTo is decode with a body of at most limit bytes.
func decodeUpTo[T any](r *http.Request, limit int64) (T, error) {
	var v T
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType != "application/json" || err != nil {
		return v, enrich.Errorf(enrich.KindInvalid, "send the body as JSON with the header Content-Type: application/json (or application/json; charset=utf-8)")
	}
	// JSON is UTF-8 (RFC 8259): a body announced in another charset would be read as
	// something it is not.
	if charset, ok := params["charset"]; ok && !strings.EqualFold(charset, "utf-8") {
		return v, enrich.Errorf(enrich.KindInvalid, "the body must be UTF-8: send Content-Type: application/json or application/json; charset=utf-8, not charset=%s", clip(charset, 40))
	}
	// A declared length over the limit is refused before the body is read, and so
	// before a client that sent Expect: 100-continue is told to send it.
	if r.ContentLength > limit {
		return v, bodyTooLarge(limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return v, bodyTooLarge(limit)
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return v, enrich.Errorf(enrich.KindInvalid, "the request body did not arrive within the server's read timeout; send it at once")
	}
	if err != nil {
		return v, enrich.Errorf(enrich.KindInvalid, "the request body could not be read: %v", err)
	}
	return decodeBody[T](body)
}

// decodeBody reads a JSON text, a request's body or an MCP tool call's arguments,
// into a T as decode does once the body is read: the same refusals, in the same words.
func decodeBody[T any](body []byte) (T, error) {
	var v T
	if len(bytes.TrimSpace(body)) == 0 {
		return v, enrich.Errorf(enrich.KindInvalid, "the request body is empty; send a JSON object")
	}
	// encoding/json would quietly turn invalid bytes inside a string into U+FFFD, so
	// a key or a name would be stored and charged as something never sent.
	if !utf8.Valid(body) {
		return v, enrich.Errorf(enrich.KindInvalid, "the request body is not valid UTF-8 (first bad byte at offset %d); send JSON encoded as UTF-8", invalidUTF8At(body))
	}
	v, err := decodeObject[T](body)
	if err != nil {
		return v, err
	}
	// An escaped half of a surrogate pair names no character; encoding/json would
	// quietly turn it into U+FFFD, as it does invalid bytes.
	if at := loneSurrogateAt(body); at >= 0 {
		return v, enrich.Errorf(enrich.KindInvalid, "the request body is not valid UTF-8: the escape at offset %d is half of a surrogate pair; escape a character outside the BMP as a pair (\\ud83d\\ude00) or send it as UTF-8", at)
	}
	return v, nil
}

func bodyTooLarge(limit int64) error {
	return enrich.Errorf(enrich.KindInvalid, "the request body is larger than %d KiB", limit>>10)
}

// decodeObject reads one JSON object of known fields into a T: the part of decode that
// a row of a bulk request (a watch import) goes through again on its own, so that a
// row is refused for what a single request is refused for.
func decodeObject[T any](body []byte) (T, error) {
	var v T
	if err := exactFieldNames(body, reflect.TypeFor[T]()); err != nil {
		return v, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, enrich.Errorf(enrich.KindInvalid, "%s", jsonProblem(err, reflect.TypeFor[T]()))
	}
	if _, err := dec.Token(); err != io.EOF {
		return v, enrich.Errorf(enrich.KindInvalid, "the request body must hold a single JSON object")
	}
	return v, nil
}

// loneSurrogateAt is the offset of the first \u escape in a JSON text that is a
// surrogate not completed by its other half, or -1. body is valid JSON.
func loneSurrogateAt(body []byte) int {
	inString := false
	for i := 0; i < len(body); i++ {
		if !inString {
			inString = body[i] == '"'
			continue
		}
		switch body[i] {
		case '"':
			inString = false
		case '\\':
			r, ok := hexEscape(body, i)
			if !ok {
				i++ // a one-character escape
				continue
			}
			if utf16.IsSurrogate(r) {
				if low, ok := hexEscape(body, i+6); r < 0xdc00 && ok && low >= 0xdc00 && low <= 0xdfff {
					i += 11
					continue
				}
				return i
			}
			i += 5
		}
	}
	return -1
}

// hexEscape reads the \uXXXX escape at body[i:].
func hexEscape(body []byte, i int) (rune, bool) {
	if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 16)
	return rune(n), err == nil
}

// invalidUTF8At is the offset of the first byte of body that is not part of valid
// UTF-8.
func invalidUTF8At(body []byte) int {
	for i := 0; i < len(body); {
		r, n := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(body)
}

// clip shortens s to at most n bytes for an error message, so a hostile value is not
// echoed back whole.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// exactFieldNames refuses a top-level field whose name is not one of the struct's JSON
// names to the letter, a field whose value is null, and a field sent twice: encoding/json would take "DOMAIN" for
// "domain" and keep the last of two.
func exactFieldNames(body []byte, t reflect.Type) error {
	if t.Kind() != reflect.Struct {
		return nil
	}
	known := map[string]bool{}
	jsonNames(t, known)
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil // not an object: the decoder says what is wrong
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := tok.(string)
		if !known[name] {
			return enrich.Errorf(enrich.KindInvalid, "unknown field %q", clip(name, 64))
		}
		if seen[name] {
			return enrich.Errorf(enrich.KindInvalid, "field %q is sent twice", clip(name, 64))
		}
		seen[name] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil
		}
		// null would decode as "not sent"; a field is either sent with a value or left out.
		if string(value) == "null" {
			return enrich.Errorf(enrich.KindInvalid, "%s must not be null; leave the field out instead", name)
		}
	}
	return nil
}

// jsonNames adds the JSON names of a struct's fields to known, those of an embedded
// struct without a name of its own too, as encoding/json promotes them: a request
// that shares its input fields with others (enrichInput) embeds them.
func jsonNames(t reflect.Type, known map[string]bool) {
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			jsonNames(f.Type, known)
			continue
		}
		known[name] = true
	}
}

// jsonProblem says what is wrong with a body in the API's field names.
func jsonProblem(err error, t reflect.Type) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return "the request body is not valid JSON: " + err.Error()
	case errors.As(err, &typ):
		if typ.Field == "" {
			return "the request body must be a JSON object"
		}
		return fmt.Sprintf("%s must be %s, not a JSON %s", jsonFieldName(t, typ.Field), jsonType(typ.Type.String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return "the request body could not be read: " + err.Error()
}

// jsonFieldName is the field a decoding error names as the sender wrote it:
// encoding/json puts the Go name of each embedded struct it went through in the path
// ("companyRequest.domain"), which no request has.
func jsonFieldName(t reflect.Type, path string) string {
	var names []string
	for _, name := range strings.Split(path, ".") {
		if t != nil && t.Kind() == reflect.Struct {
			if f, ok := t.FieldByName(name); ok && f.Anonymous {
				t = f.Type
				continue
			}
		}
		names = append(names, name)
		t = nil // the requests' fields are plain values: nothing embedded below them
	}
	return strings.Join(names, ".")
}

func jsonType(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64":
		return "an integer"
	case "[]string":
		return "an array of strings"
	}
	return "a value of type " + goType
}

// errorBody is the JSON body of every error but 401.
type errorBody struct {
	Error            string `json:"error"`
	Code             string `json:"code,omitempty"`
	CreditsRemaining *int64 `json:"creditsRemaining,omitempty"`
	QueuedTasks      *int64 `json:"queuedTasks,omitempty"`
	RequestID        string `json:"requestId,omitempty"`
	// Rows are the refused rows of an upload (POST /v1/batches).
	Rows []enrich.RowError `json:"rows,omitempty"`
}

// statusOf is the one place an error kind becomes an HTTP status.
var statusOf = map[enrich.Kind]int{
	enrich.KindInvalid:          http.StatusBadRequest,
	enrich.KindUnauthorized:     http.StatusUnauthorized,
	enrich.KindPaymentRequired:  http.StatusPaymentRequired,
	enrich.KindForbidden:        http.StatusForbidden,
	enrich.KindNotFound:         http.StatusNotFound,
	enrich.KindMethodNotAllowed: http.StatusMethodNotAllowed,
	enrich.KindConflict:         http.StatusConflict,
	enrich.KindUnprocessable:    http.StatusUnprocessableEntity,
	enrich.KindTooManyRequests:  http.StatusTooManyRequests,
	enrich.KindInternal:         http.StatusInternalServerError,
	enrich.KindUnavailable:      http.StatusServiceUnavailable,
}

// error answers with err: an *enrich.Error as its kind says, anything else as a 500
// whose detail goes to the log, never to the client.
func (s *Server) error(w http.ResponseWriter, r *http.Request, err error) {
	var e *enrich.Error
	if !errors.As(err, &e) || e.Kind == enrich.KindInternal {
		ri := info(r)
		ri.err = err
		if clientClosed(r) {
			// No one is left to read an answer, and the failure is the hang-up's doing.
			ri.clientClosed = true
			w.WriteHeader(statusClientClosed)
			return
		}
		encode(w, http.StatusInternalServerError, errorBody{
			Error:     "something went wrong on our side; retrying is safe, and quoting the requestId helps us find it",
			RequestID: ri.id,
		})
		return
	}
	status, body := errorBodyOf(e)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		io.WriteString(w, "Unauthorized")
		return
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	encode(w, status, body)
}

// errorBodyOf is the status and body an API error answers with: the API's responses
// and the MCP tools' errors say the same.
func errorBodyOf(e *enrich.Error) (int, errorBody) {
	status := statusOf[e.Kind]
	code := e.Code
	if code == "" && status == http.StatusBadRequest {
		// Every refused input carries the one code a program can branch on; the
		// sentence says which field or header and which limit.
		code = enrich.CodeInvalidInput
	}
	return status, errorBody{Error: e.Message, Code: code, CreditsRemaining: e.CreditsRemaining, QueuedTasks: e.QueuedTasks, Rows: e.Rows}
}
