// Package client is the Go client of the enrichd API. It owns the HTTP side of talking to
// a running enrichd: one typed method per endpoint, the API's JSON as Go types, the
// Idempotency-Key header on enrichment calls, waiting out 429 answers as their
// Retry-After says, polling a task until it settles, and the typed *Error every refusal
// becomes. VerifyWebhook and VerifyWebhookHeaders check the signatures of the
// deliveries a Loop posts (ours, or the Standard Webhooks headers).
//
// The package links nothing of the server (no SQL driver, no sources), so it is cheap
// to import into any program:
//
//	c := client.New("http://127.0.0.1:8080", os.Getenv("ENRICHD_KEY"))
//	q, err := c.EnrichCompany(ctx, client.CompanyInput{Domain: "acme.com"}, client.IdempotencyKey("acme-1"))
//	if err != nil {
//		return err
//	}
//	res, err := c.WaitTask(ctx, q.Task.ID)
//	if err != nil {
//		return err
//	}
//	if res.Error != nil {
//		return fmt.Errorf("%s: %s", res.Error.Code, res.Error.Message)
//	}
//	company, err := res.Company()
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults of a new Client.
const (
	DefaultMaxRetries = 5
	// defaultRetryAfter is how long to wait after a 429 or an unsettled task whose
	// Retry-After is missing or unreadable: the API's own polling hint.
	defaultRetryAfter = 2 * time.Second
)

// Client calls one enrichd server with one API key. It is safe for concurrent use.
type Client struct {
	base       string
	key        string
	hc         *http.Client
	maxRetries int
	userAgent  string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends requests through hc instead of http.DefaultClient (for a
// timeout, a proxy or a custom transport).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// WithMaxRetries sets how many times a request answered 429 is sent again after
// waiting its Retry-After (DefaultMaxRetries; 0 returns the first 429 as an *Error). A
// 429 creates and charges nothing, so sending the request again is always safe.
func WithMaxRetries(n int) Option {
	return func(c *Client) { c.maxRetries = max(0, n) }
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// New returns a client of the enrichd server at baseURL (such as
// "http://127.0.0.1:8080", without /v1) that authenticates with apiKey.
func New(baseURL, apiKey string, opts ...Option) *Client {
	c := &Client{
		base:       strings.TrimRight(baseURL, "/"),
		key:        apiKey,
		hc:         http.DefaultClient,
		maxRetries: DefaultMaxRetries,
		userAgent:  "enrichd-go-client/1",
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Error is a response of the API other than a success: the status and what the JSON
// error body says. The fields a status does not carry are zero (nil for the pointers).
type Error struct {
	Status           int    // HTTP status
	Code             string // the body's code: insufficient_credits, rate_limited, not_found, ...; "" when none
	Message          string // the body's error sentence
	RequestID        string // the body's requestId (500), else the X-Request-Id header
	CreditsRemaining *int64 // 402
	QueuedTasks      *int64 // 429 queue_full
	// Rows are the refused rows of an upload (CreateBatch's 400), each with why.
	Rows []RowRefusal
	// RetryAfter is the Retry-After header (429): how long the server asked to wait.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "enrichd: %d %s", e.Status, http.StatusText(e.Status))
	if e.Message != "" && e.Message != http.StatusText(e.Status) {
		b.WriteString(": " + e.Message)
	}
	if e.Code != "" {
		b.WriteString(" (" + e.Code + ")")
	}
	if e.Status == http.StatusUnauthorized {
		b.WriteString(": the API key is missing, mistyped or revoked; create one with `enrichd keys create`")
	}
	if e.Status >= 500 && e.RequestID != "" {
		b.WriteString("; request id " + e.RequestID)
	}
	return b.String()
}

// IsCode reports whether err is an *Error with the given code ("insufficient_credits",
// "not_found", ...).
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// strictDecoding makes every response fail to decode when it holds a field the types
// of this package do not know. The tests turn it on, so a field the server adds
// without a place here fails them; users get tolerant decoding.
var strictDecoding = false

func decodeJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if strictDecoding {
		dec.DisallowUnknownFields()
	}
	return dec.Decode(v)
}

// response is a successful answer.
type response struct {
	status     int
	header     http.Header
	body       []byte
	retryAfter time.Duration // the Retry-After header, 0 when absent
}

// do sends one API request, and sends it again after each 429 as its Retry-After says,
// up to the client's retries. body is JSON-encoded when not nil; headers are name,
// value pairs. A status of 400 or more is an *Error; into, when not nil, receives the
// decoded body of a success.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body any, into any, headers ...string) (*response, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("enrichd: encoding the %s %s body: %w", method, path, err)
		}
	}
	return c.doRaw(ctx, method, path, query, raw, into, headers...)
}

// doRaw is do with the body as bytes, sent as JSON unless headers name another
// Content-Type.
func (c *Client) doRaw(ctx context.Context, method, path string, query url.Values, raw []byte, into any, headers ...string) (*response, error) {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	for attempt := 0; ; attempt++ {
		res, err := c.send(ctx, method, target, raw, headers)
		if err != nil {
			return nil, err
		}
		if res.status == http.StatusTooManyRequests && attempt < c.maxRetries {
			wait := res.retryAfter
			if wait <= 0 {
				wait = defaultRetryAfter
			}
			if err := sleep(ctx, wait); err != nil {
				return nil, fmt.Errorf("enrichd: %s %s: gave up waiting out a 429: %w", method, path, err)
			}
			continue
		}
		if res.status >= 400 {
			return nil, apiError(res)
		}
		if into != nil && len(res.body) > 0 {
			if err := decodeJSON(res.body, into); err != nil {
				return nil, fmt.Errorf("enrichd: %s %s: the response is not the JSON this client expects (is %s an enrichd server?): %w", method, path, c.base, err)
			}
		}
		return res, nil
	}
}

func (c *Client) send(ctx context.Context, method, target string, raw []byte, headers []string) (*response, error) {
	var rd io.Reader
	if raw != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("enrichd: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("enrichd: %s %s: %w", method, target, err)
	}
	defer res.Body.Close()
	// Responses are small JSON documents; the cap keeps a wrong base URL from
	// reading a download into memory.
	b, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("enrichd: %s %s: reading the response: %w", method, target, err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: b, retryAfter: parseRetryAfter(res.Header.Get("Retry-After"))}, nil
}

// parseRetryAfter reads Retry-After in whole seconds, the form enrichd sends; 0 when
// absent or unreadable.
func parseRetryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

func apiError(res *response) *Error {
	e := &Error{Status: res.status, RequestID: res.header.Get("X-Request-Id"), RetryAfter: res.retryAfter}
	var body struct {
		Error            string       `json:"error"`
		Code             string       `json:"code"`
		RequestID        string       `json:"requestId"`
		CreditsRemaining *int64       `json:"creditsRemaining"`
		QueuedTasks      *int64       `json:"queuedTasks"`
		Rows             []RowRefusal `json:"rows"`
	}
	if strings.HasPrefix(res.header.Get("Content-Type"), "application/json") && json.Unmarshal(res.body, &body) == nil {
		e.Message, e.Code, e.CreditsRemaining, e.QueuedTasks, e.Rows = body.Error, body.Code, body.CreditsRemaining, body.QueuedTasks, body.Rows
		if body.RequestID != "" {
			e.RequestID = body.RequestID
		}
	} else {
		// 401 is plain text; a proxy in front of the server may answer anything.
		e.Message = strings.TrimSpace(string(res.body))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200] + "..."
		}
	}
	return e
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
