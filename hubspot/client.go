// Package hubspot writes enrichment results into HubSpot's CRM through its CRM v3
// object API (docs/crm.md): a company found by domain and a contact by email, created
// when absent, and otherwise given only the properties that are blank in HubSpot, so a
// value a person typed is never overwritten. It is a destination of the webhook
// sender (webhook.Destination), under the same schedule, history and retries.
package hubspot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"enrichd/webhook"
)

// DefaultURL is HubSpot's API.
const DefaultURL = "https://api.hubapi.com"

// maxAnswer bounds what is read of one HubSpot answer.
const maxAnswer = 1 << 20

// Client calls HubSpot's API with one private app token.
type Client struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
	Now     func() time.Time
}

// APIError is an answer HubSpot gave other than 2xx, with its error body's message
// ({"status": "error", "message", "category", "correlationId"}).
type APIError struct {
	Status   int
	Message  string
	Category string
	// Missing are the properties a 400 said the portal does not have
	// (PROPERTY_DOESNT_EXIST).
	Missing    []string
	RetryAfter time.Duration // what a 429 asked to wait: Retry-After, or the rate limit's interval
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("HubSpot answered %d %s", e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return msg
}

// Refused says HubSpot refused the token: 401, or 403 for a scope it lacks.
func Refused(err error) bool {
	var e *APIError
	return errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden)
}

// StatusOf is the HTTP status of a HubSpot answer, 0 when none came.
func StatusOf(err error) int {
	var e *APIError
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// do sends one request and reads its JSON answer into out (nil: discarded).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	var sent []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd, sent = bytes.NewReader(b), b
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", webhook.UserAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		// The URL is the installation's, never the token: the error may be shown.
		return fmt.Errorf("could not reach HubSpot: %v", unwrap(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("reading HubSpot's answer: %v", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &APIError{Status: resp.StatusCode}
		var b struct {
			Message  string `json:"message"`
			Category string `json:"category"`
		}
		if json.Unmarshal(raw, &b) == nil {
			e.Message, e.Category = truncate(scrub(b.Message, sent), 300), b.Category
			if resp.StatusCode == http.StatusBadRequest {
				e.Missing = missingProperties(b.Message)
			}
		}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			e.RetryAfter = retryAfter(resp.Header, c.now())
		}
		return e
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("HubSpot's answer is not the JSON expected: %v", err)
	}
	return nil
}

// retryAfter is how long a 429 asks to wait: its Retry-After, or, when the rate limit
// it names is spent (X-HubSpot-RateLimit-Remaining 0), that limit's interval
// (X-HubSpot-RateLimit-Interval-Milliseconds); 0 when it says neither.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if d := webhook.ParseRetryAfter(h.Get("Retry-After"), now); d > 0 {
		return d
	}
	if h.Get("X-HubSpot-RateLimit-Remaining") == "0" {
		if ms, err := strconv.ParseInt(h.Get("X-HubSpot-RateLimit-Interval-Milliseconds"), 10, 64); err == nil && ms > 0 && ms <= 86_400_000 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	return 0
}

// missingProperty finds, in a 400's message, the properties HubSpot's validation says
// do not exist: its message embeds the errors as JSON, each {"error":
// "PROPERTY_DOESNT_EXIST", "name": "..."}.
var missingProperty = regexp.MustCompile(`"error"\s*:\s*"PROPERTY_DOESNT_EXIST"\s*,\s*"name"\s*:\s*"([a-z0-9_]+)"`)

func missingProperties(msg string) []string {
	var out []string
	for _, m := range missingProperty.FindAllStringSubmatch(msg, 20) {
		out = append(out, m[1])
	}
	return out
}

// scrub is what of HubSpot's error message may be logged and kept in the delivery
// history and the Loop: HubSpot's validation errors quote the values sent ("Email
// address jane@acme.com is invalid"), and neither the log nor the Loop is reached by
// an erasure. A validation error is told by each property's name and error code
// alone; any other message keeps its words, with every value of the request sent
// (request, its JSON), every address, URL and quoted text replaced by "…".
func scrub(msg string, request []byte) string {
	if i := strings.Index(msg, "[{"); i >= 0 {
		var invalid []struct {
			Name  string `json:"name"`
			Error string `json:"error"`
		}
		if json.Unmarshal([]byte(msg[i:]), &invalid) == nil && len(invalid) > 0 {
			var each []string
			for _, v := range invalid {
				if hubspotName.MatchString(v.Name) && errorCode.MatchString(v.Error) {
					each = append(each, v.Name+" "+v.Error)
				}
			}
			return scrub(strings.TrimRight(msg[:i], ": "), request) + ": " + strings.Join(each, ", ")
		}
	}
	for _, v := range sentValues(request) {
		msg = replaceFold(msg, v, "…")
	}
	for _, re := range []*regexp.Regexp{quoted, anURL, address} {
		msg = re.ReplaceAllString(msg, "…")
	}
	return msg
}

var (
	hubspotName = regexp.MustCompile(`^[a-z0-9_]{1,100}$`)
	errorCode   = regexp.MustCompile(`^[A-Z0-9_]{1,60}$`)
	quoted      = regexp.MustCompile(`\\?"[^"]*\\?"|\B'[^']+'|“[^”]*”`)
	anURL       = regexp.MustCompile(`(?i)\b(?:https?://|www\.)\S+`)
	address     = regexp.MustCompile(`\S+@\S+`)
)

// sentValues are the strings of a request's JSON, longest first, so that a value that
// holds another is replaced whole.
func sentValues(request []byte) []string {
	var v any
	if json.Unmarshal(request, &v) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if len(strings.TrimSpace(v)) >= 2 {
				out = append(out, strings.TrimSpace(v))
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// replaceFold replaces every occurrence of old in s, whatever its case (HubSpot may
// quote an address lowercased), with new.
func replaceFold(s, old, new string) string {
	re, err := regexp.Compile(`(?i)` + regexp.QuoteMeta(old))
	if err != nil {
		return s
	}
	return re.ReplaceAllLiteralString(s, new)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func unwrap(err error) error {
	var u interface{ Unwrap() error }
	if errors.As(err, &u) && u.Unwrap() != nil {
		return u.Unwrap()
	}
	return err
}

// ObjectPath is HubSpot's name of an enrichd object type's CRM objects.
func ObjectPath(objectType string) string {
	if objectType == "person" {
		return "contacts"
	}
	return "companies"
}

// Object is a CRM object as HubSpot answers it.
type Object struct {
	ID         string             `json:"id"`
	Properties map[string]*string `json:"properties"`
	// ObjectWriteTraceID is, in a batch create's or update's answer, the trace id the
	// input that made the object was sent with.
	ObjectWriteTraceID string `json:"objectWriteTraceId,omitempty"`
}

// CheckToken makes the cheapest call the token must be allowed: a page of one object of
// the type the Loop writes (GET /crm/v3/objects/{objects}?limit=1).
func (c *Client) CheckToken(ctx context.Context, objectType string) error {
	return c.do(ctx, http.MethodGet, "/crm/v3/objects/"+ObjectPath(objectType)+"?limit=1", nil, nil)
}

// Search finds the objects whose property equals value, reading props of each
// (POST /crm/v3/objects/{objects}/search).
func (c *Client) Search(ctx context.Context, objects, property, value string, props []string) ([]Object, error) {
	body := map[string]any{
		"filterGroups": []any{map[string]any{"filters": []any{map[string]string{"propertyName": property, "operator": "EQ", "value": value}}}},
		"properties":   props,
		"limit":        2,
	}
	var out struct {
		Results []Object `json:"results"`
	}
	err := c.do(ctx, http.MethodPost, "/crm/v3/objects/"+objects+"/search", body, &out)
	return out.Results, err
}

// Get reads one object by id with props (GET /crm/v3/objects/{objects}/{id}); nil when
// HubSpot has no such object (deleted or merged since).
func (c *Client) Get(ctx context.Context, objects, id string, props []string) (*Object, error) {
	var o Object
	err := c.do(ctx, http.MethodGet, "/crm/v3/objects/"+objects+"/"+id+"?properties="+strings.Join(props, ","), nil, &o)
	if StatusOf(err) == http.StatusNotFound {
		return nil, nil
	}
	return &o, err
}

// GetBy reads one object by the value of a property whose values are unique in the
// portal (GET /crm/v3/objects/{objects}/{value}?idProperty=...); unlike a search, it
// finds an object the moment it is created. nil when none holds the value.
func (c *Client) GetBy(ctx context.Context, objects, property, value string, props []string) (*Object, error) {
	var o Object
	err := c.do(ctx, http.MethodGet, "/crm/v3/objects/"+objects+"/"+url.PathEscape(value)+"?idProperty="+url.QueryEscape(property)+
		"&properties="+strings.Join(props, ","), nil, &o)
	if StatusOf(err) == http.StatusNotFound {
		return nil, nil
	}
	return &o, err
}

// MaxBatch is how many inputs HubSpot takes in one call of its batch endpoints
// (batch/read, batch/create, batch/update).
const MaxBatch = 100

// batchAnswer is a batch endpoint's answer: 200 or 201 with every input's result, or
// 207 (multi-status) with the results of some and the errors of others, each error's
// context naming the inputs it is about (ids, objectWriteTraceId).
type batchAnswer struct {
	Status  string       `json:"status"`
	Results []Object     `json:"results"`
	Errors  []batchError `json:"errors"`
}

type batchError struct {
	Status   string              `json:"status"`
	Category string              `json:"category"`
	Message  string              `json:"message"`
	Context  map[string][]string `json:"context"`
}

// BatchRead reads the objects whose idProperty holds each of values, with props
// (POST /crm/v3/objects/{objects}/batch/read; idProperty "" reads by HubSpot's ids,
// otherwise it must be a property with unique values, as contacts' email is). The
// objects found are returned by the value they were read by, lower case; a value
// HubSpot holds no object for (a 207's OBJECT_NOT_FOUND) is absent.
func (c *Client) BatchRead(ctx context.Context, objects, idProperty string, values, props []string) (map[string]*Object, error) {
	out := map[string]*Object{}
	if idProperty != "" && !slices.Contains(props, idProperty) {
		props = append(slices.Clone(props), idProperty)
	}
	for chunk := range slices.Chunk(values, MaxBatch) {
		inputs := make([]map[string]string, len(chunk))
		for i, v := range chunk {
			inputs[i] = map[string]string{"id": v}
		}
		body := map[string]any{"inputs": inputs, "properties": props}
		if idProperty != "" {
			body["idProperty"] = idProperty
		}
		var ans batchAnswer
		if err := c.do(ctx, http.MethodPost, "/crm/v3/objects/"+objects+"/batch/read", body, &ans); err != nil {
			return nil, err
		}
		for i := range ans.Results {
			o := &ans.Results[i]
			by := o.ID
			if idProperty != "" {
				by = strings.ToLower(str(o.Properties[idProperty]))
			}
			if by != "" && out[by] == nil {
				out[by] = o
			}
		}
	}
	return out, nil
}

// BatchInput is one input of a batch create or update: the object's id (update), its
// properties, and the trace id HubSpot names it by in its answer.
type BatchInput struct {
	ID                 string            `json:"id,omitempty"`
	Properties         map[string]string `json:"properties"`
	ObjectWriteTraceID string            `json:"objectWriteTraceId"`
}

// BatchCreate creates an object of each input (POST
// /crm/v3/objects/{objects}/batch/create). BatchUpdate writes each input's properties
// into its object (POST /crm/v3/objects/{objects}/batch/update). Each answers, by
// trace id, the object written or why that input alone failed; an error of a call
// (HubSpot refusing the whole batch, as it does one that names a property it lacks or
// a contact it holds) fails every input neither map names: those of that call and of
// the calls after it, while what the calls before it wrote is still answered.
// A created object whose answer carries no trace id is matched to its input by the
// value of keyProperty, which every input holds.
func (c *Client) BatchCreate(ctx context.Context, objects, keyProperty string, inputs []BatchInput) (map[string]*Object, map[string]error, error) {
	return c.batchWrite(ctx, objects, "create", keyProperty, inputs)
}

// BatchUpdate: see BatchCreate.
func (c *Client) BatchUpdate(ctx context.Context, objects string, inputs []BatchInput) (map[string]*Object, map[string]error, error) {
	return c.batchWrite(ctx, objects, "update", "", inputs)
}

func (c *Client) batchWrite(ctx context.Context, objects, verb, keyProperty string, inputs []BatchInput) (map[string]*Object, map[string]error, error) {
	done, failed := map[string]*Object{}, map[string]error{}
	for chunk := range slices.Chunk(inputs, MaxBatch) {
		body := map[string]any{"inputs": chunk}
		sent, _ := json.Marshal(body)
		var ans batchAnswer
		if err := c.do(ctx, http.MethodPost, "/crm/v3/objects/"+objects+"/batch/"+verb, body, &ans); err != nil {
			return done, failed, err
		}
		byID, byKey, inChunk := map[string]string{}, map[string]string{}, map[string]bool{}
		for _, in := range chunk {
			inChunk[in.ObjectWriteTraceID] = true
			if in.ID != "" {
				byID[in.ID] = in.ObjectWriteTraceID
			}
			if k := strings.ToLower(strings.TrimSpace(in.Properties[keyProperty])); keyProperty != "" && k != "" {
				byKey[k] = in.ObjectWriteTraceID
			}
		}
		for i := range ans.Results {
			o := &ans.Results[i]
			trace := o.ObjectWriteTraceID
			if trace == "" {
				trace = byID[o.ID]
			}
			if trace == "" && keyProperty != "" {
				trace = byKey[strings.ToLower(str(o.Properties[keyProperty]))]
			}
			if inChunk[trace] {
				done[trace] = o
			}
		}
		for _, e := range ans.Errors {
			traces := e.Context["objectWriteTraceId"]
			for _, id := range e.Context["ids"] {
				if t := byID[id]; t != "" {
					traces = append(traces, t)
				}
			}
			for _, t := range traces {
				if !inChunk[t] {
					continue
				}
				failed[t] = &APIError{Status: http.StatusMultiStatus, Category: e.Category,
					Message: truncate(scrub(e.Message, sent), 300)}
			}
		}
		for _, in := range chunk {
			if done[in.ObjectWriteTraceID] == nil && failed[in.ObjectWriteTraceID] == nil {
				failed[in.ObjectWriteTraceID] = &APIError{Status: http.StatusMultiStatus,
					Message: "HubSpot's answer to the batch " + verb + " did not say what became of this input"}
			}
		}
	}
	return done, failed, nil
}

// Create creates an object with props (POST /crm/v3/objects/{objects}).
func (c *Client) Create(ctx context.Context, objects string, props map[string]string) (*Object, error) {
	var o Object
	err := c.do(ctx, http.MethodPost, "/crm/v3/objects/"+objects, map[string]any{"properties": props}, &o)
	return &o, err
}

// Update writes props into an object (PATCH /crm/v3/objects/{objects}/{id}).
func (c *Client) Update(ctx context.Context, objects, id string, props map[string]string) error {
	return c.do(ctx, http.MethodPatch, "/crm/v3/objects/"+objects+"/"+id, map[string]any{"properties": props}, nil)
}

// GDPRDelete permanently deletes a contact by its id (POST
// /crm/v3/objects/contacts/gdpr-delete). By id, never by email: HubSpot blocklists an
// address it has no contact for.
func (c *Client) GDPRDelete(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/crm/v3/objects/contacts/gdpr-delete", map[string]string{"objectId": id}, nil)
}

// ProvenanceProperty is the property that says which source gave each field enrichd
// wrote.
const ProvenanceProperty = "enrichd_provenance"

// EnsureProvenanceProperty creates the provenance property on the object type
// (POST /crm/v3/properties/{objects}); one that exists already (409) is kept.
func (c *Client) EnsureProvenanceProperty(ctx context.Context, objectType string) error {
	group := "companyinformation"
	if objectType == "person" {
		group = "contactinformation"
	}
	err := c.do(ctx, http.MethodPost, "/crm/v3/properties/"+ObjectPath(objectType), map[string]string{
		"name": ProvenanceProperty, "label": "enrichd provenance", "type": "string", "fieldType": "textarea", "groupName": group,
		"description": "Which source gave each field enrichd wrote, as field: source",
	}, nil)
	if StatusOf(err) == http.StatusConflict {
		return nil
	}
	return err
}

// CompanyKeyProperty is the property, its values unique in the portal, that enrichd
// sets to the domain of every company it creates: HubSpot keeps companies' domains
// unique by convention alone, and its search shows a new company only seconds later,
// so a create whose answer was lost is found again by it (GetBy), and a second create
// of the same domain is refused.
const CompanyKeyProperty = "enrichd_domain"

// EnsureCompanyKeyProperty creates CompanyKeyProperty on companies, with unique values
// (POST /crm/v3/properties/companies, hasUniqueValue); one that exists already (409)
// is kept.
func (c *Client) EnsureCompanyKeyProperty(ctx context.Context) error {
	err := c.do(ctx, http.MethodPost, "/crm/v3/properties/companies", map[string]any{
		"name": CompanyKeyProperty, "label": "enrichd domain", "type": "string", "fieldType": "text", "groupName": "companyinformation",
		"hasUniqueValue": true, "description": "The domain of a company enrichd created, which it finds the company by",
	}, nil)
	if StatusOf(err) == http.StatusConflict {
		return nil
	}
	return err
}

// HTTPClient is the HTTP client of HubSpot's API: the installation's address (not a
// user's), so not held to the webhooks' policy; each request within the attempt's
// timeout.
func HTTPClient(timeout time.Duration) *http.Client {
	if timeout <= 0 {
		timeout = webhook.DefaultAttemptTimeout
	}
	return &http.Client{Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
