package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"enrichd/enrich"
)

// UserAgent is how enrichd names itself to the sites and APIs it calls.
const UserAgent = "enrichd/1 (self-hosted enrichment service)"

// VendorConfig configures a data-vendor adapter. The zero value of every field but
// APIKey takes the adapter's default.
type VendorConfig struct {
	APIKey      string
	BaseURL     string     // the vendor's API root; the public one by default
	Rate        rate.Limit // requests a second to the vendor
	Burst       int
	Concurrency int           // requests in flight at once
	Timeout     time.Duration // of one request
	Attempts    int           // tries of a request that failed transiently (429, 5xx, network)
	Backoff     time.Duration // mean wait before the first retry; doubles for each next one
	NetworkHost string
	Logger      *slog.Logger
	Client      *http.Client // nil: a plain client with Timeout
	// OwnKey says APIKey is an organization's own key (WithAPIKey), not the
	// installation's: errors about it say so rather than naming the environment.
	OwnKey bool
	// OnKeyRefused, when set, is told each refusal of the key or its account
	// (ErrKeyRefused), with the vendor's words and never the key: an organization's
	// key is then marked failing.
	OnKeyRefused func(reason string)
}

// ErrKeyRefused is a vendor's refusal of the API key itself (401), or of the account
// behind it (402, 403: out of credits, or no access): asking again with the same key
// will not help. Errors wrapping it wrap enrich.ErrUnavailable too.
var ErrKeyRefused = errors.New("the vendor refused the API key")

// EnrichLayerDefaults and PDLDefaults are what each vendor adapter runs with where its
// VendorConfig leaves a field zero; serve's flags show them as their defaults.
var (
	EnrichLayerDefaults = VendorConfig{BaseURL: "https://enrichlayer.com", Rate: 5, Burst: 5, Concurrency: 4, Timeout: 60 * time.Second}
	PDLDefaults         = VendorConfig{BaseURL: "https://api.peopledatalabs.com", Rate: 1, Burst: 5, Concurrency: 4, Timeout: 30 * time.Second}
	// ApolloDefaults: 0.8 a second is 48 a minute, under the 50 a minute Apollo gives
	// as an example of a plan's limit.
	ApolloDefaults = VendorConfig{BaseURL: "https://api.apollo.io", Rate: 0.8, Burst: 5, Concurrency: 4, Timeout: 30 * time.Second}
)

// vendorAPI is the discipline every data-vendor adapter keeps: its own rate limit and
// concurrency cap, retries of transient failures with jittered backoff inside the
// caller's deadline, a count of what it sent upstream, and the API key kept out of
// every log line and error.
type vendorAPI struct {
	name    string // the source's name
	keyEnv  string // where the operator puts the key, named in errors about it
	keyDesc string // the key as errors name it: "the key in PDL_API_KEY"
	key     string
	// cfg and def are what the adapter was built from, to build it again with another
	// key (WithAPIKey).
	cfg, def  VendorConfig
	base      *url.URL
	client    *http.Client
	authorize func(*http.Request, string)
	// quotaSpent, when set, reads a 429's headers and says why waiting within a task's
	// lifetime cannot help (an hourly or daily quota used up); "" means try again.
	quotaSpent func(http.Header) string
	limiter    *rate.Limiter
	slots      chan struct{}
	attempts   int
	backoff    time.Duration
	log        *slog.Logger
	meter      meter
}

func newVendorAPI(name, keyEnv string, cfg VendorConfig, def VendorConfig, authorize func(*http.Request, string)) (*vendorAPI, error) {
	if strings.TrimSpace(cfg.APIKey) == "" {
		return nil, fmt.Errorf("%s needs an API key: set %s", name, keyEnv)
	}
	raw := orDefault(cfg.BaseURL, def.BaseURL)
	base, err := url.Parse(raw)
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, fmt.Errorf("%s: the base URL %q is not an http(s) URL", name, raw)
	}
	timeout := orDefault(cfg.Timeout, def.Timeout)
	client := cfg.Client
	if client == nil {
		// No redirects: a custom key header (X-Api-Key) would follow one to another
		// host, and a vendor API does not move its endpoints under our feet.
		client = &http.Client{Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
	}
	v := &vendorAPI{
		name:      name,
		keyEnv:    keyEnv,
		keyDesc:   "the key in " + keyEnv,
		key:       strings.TrimSpace(cfg.APIKey),
		cfg:       cfg,
		def:       def,
		base:      base,
		client:    client,
		authorize: authorize,
		limiter:   rate.NewLimiter(orDefault(cfg.Rate, def.Rate), max(1, orDefault(cfg.Burst, def.Burst))),
		slots:     make(chan struct{}, max(1, orDefault(cfg.Concurrency, def.Concurrency))),
		attempts:  max(1, orDefault(cfg.Attempts, 3)),
		backoff:   orDefault(cfg.Backoff, time.Second),
		log:       cfg.Logger,
	}
	if v.log == nil {
		v.log = slog.Default()
	}
	if cfg.OwnKey {
		v.keyDesc = "the organization's own key"
	}
	return v, nil
}

// orDefault returns v, or def when v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// upstreamError is one failed request: retryable ones are tried again.
type upstreamError struct {
	err        error
	retryable  bool
	retryAfter time.Duration
}

// get sends a GET with the query and decodes a 200's JSON body into out. price is the
// most the request can cost, in the vendor's credits by its published price: each try
// of it is on the ask's books at that price before it is sent (enrich.Tally.Book).
func (v *vendorAPI) get(ctx context.Context, tally *enrich.Tally, path string, q url.Values, price int64, out any) error {
	return v.do(ctx, tally, http.MethodGet, path, q, nil, price, out)
}

// post sends body as JSON and decodes a 200's JSON body into out; price as get's.
func (v *vendorAPI) post(ctx context.Context, tally *enrich.Tally, path string, body any, price int64, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return v.do(ctx, tally, http.MethodPost, path, nil, b, price, out)
}

// do sends the request, retrying transient failures while the context's deadline
// leaves time for the wait. It returns nil, an error wrapping ErrNotFound (404, 410),
// the context's error, or an error wrapping ErrUnavailable.
func (v *vendorAPI) do(ctx context.Context, tally *enrich.Tally, method, path string, q url.Values, body []byte, price int64, out any) error {
	u := v.base.JoinPath(path)
	u.RawQuery = q.Encode()
	var last *upstreamError
	for attempt := 1; ; attempt++ {
		last = v.once(ctx, tally, method, u, body, price, out)
		if last == nil {
			return nil
		}
		if !last.retryable || attempt >= v.attempts || ctx.Err() != nil {
			break
		}
		// Equal jitter: half the exponential step, plus a random part of the other half,
		// so that many workers retrying together spread out.
		step := v.backoff << (attempt - 1)
		wait := step/2 + rand.N(step/2+1)
		if last.retryAfter > wait {
			wait = last.retryAfter
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			break
		}
		v.log.Warn("retrying an upstream request", "source", v.name, "path", path, "attempt", attempt, "wait", wait.String(), "err", last.err.Error())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return last.err
}

// maxVendorBody bounds what is read of one answer; vendors' largest records are far
// smaller.
const maxVendorBody = 8 << 20

func (v *vendorAPI) once(ctx context.Context, tally *enrich.Tally, method string, u *url.URL, body []byte, price int64, out any) *upstreamError {
	// On the books before it can leave: should this process die while the vendor
	// answers, the request still counts, at its full price, in the spend and budgets.
	// Booked before the waits for a slot and the rate limit, whose time it counts too.
	if err := tally.Book(ctx, price); err != nil {
		return &upstreamError{err: err}
	}
	select {
	case v.slots <- struct{}{}:
		defer func() { <-v.slots }()
	case <-ctx.Done():
		return &upstreamError{err: ctx.Err()}
	}
	if err := v.limiter.Wait(ctx); err != nil {
		// Waiting for the rate limit would outlast the deadline: no request was sent.
		return &upstreamError{err: fmt.Errorf("%s: the rate limit allows no request before the deadline: %w", v.name, enrich.ErrUnavailable)}
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return &upstreamError{err: fmt.Errorf("%s: %w: %v", v.name, enrich.ErrUnavailable, err)}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	v.authorize(req, v.key)
	v.meter.call()
	tally.Call()
	resp, err := v.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return &upstreamError{err: ctx.Err()}
		}
		// The URL is left out: its query names the company or person looked up, and
		// last_error is shown to every organization on /v1/status.
		return v.failed(true, 0, "%s could not be reached: %s", v.name, v.redact(withoutURL(err).Error()))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxVendorBody))
	if err != nil {
		if ctx.Err() != nil {
			return &upstreamError{err: ctx.Err()}
		}
		return v.failed(true, 0, "%s: reading the answer: %s", v.name, v.redact(withoutURL(err).Error()))
	}
	switch code := resp.StatusCode; {
	case code == http.StatusOK:
		if err := json.Unmarshal(data, out); err != nil {
			return v.failed(false, 0, "%s answered with JSON it does not document: %s", v.name, v.redact(err.Error()))
		}
		return nil
	case code == http.StatusNotFound || code == http.StatusGone:
		return &upstreamError{err: fmt.Errorf("%s: %w", v.name, enrich.ErrNotFound)}
	case code == http.StatusUnauthorized:
		if v.cfg.OwnKey {
			v.log.Warn("the upstream refused an organization's own API key", "source", v.name, "status", code)
			return v.refused("%s refused %s (401): set a valid one (enrichd sources set-key)", v.name, v.keyDesc)
		}
		v.log.Error("the upstream refused the API key: set a valid one and restart", "source", v.name, "env", v.keyEnv, "status", code)
		return v.refused("%s refused the API key in %s (401): set a valid key and restart enrichd", v.name, v.keyEnv)
	case code == http.StatusPaymentRequired || code == http.StatusForbidden:
		if v.cfg.OwnKey {
			v.log.Warn("the upstream refused a request made with an organization's own API key: its account may be out of credits or lack access", "source", v.name, "status", code)
		} else {
			v.log.Error("the upstream refused the request: the account behind the API key may be out of credits or lack access", "source", v.name, "env", v.keyEnv, "status", code)
		}
		return v.refused("%s refused the request (%d): the account of %s is out of credits or lacks access: %s", v.name, code, v.keyDesc, v.problem(data))
	case code == http.StatusTooManyRequests && v.quotaSpent != nil && v.quotaSpent(resp.Header) != "":
		why := v.quotaSpent(resp.Header)
		v.log.Error("the upstream's request quota for the API key is used up", "source", v.name, "env", v.keyEnv, "status", code, "quota", why)
		return v.failed(false, 0, "%s answered 429: %s", v.name, why)
	case code == http.StatusTooManyRequests || code >= 500:
		return v.failed(true, retryAfter(resp.Header), "%s answered %d: %s", v.name, code, v.problem(data))
	default:
		return v.failed(false, 0, "%s rejected the request (%d): %s", v.name, code, v.problem(data))
	}
}

// charge adds what an answer cost, by the vendor's published price, to the ask's
// Tally: what the organization's spend and budgets count.
func charge(tally *enrich.Tally, credits int64) {
	if credits > 0 {
		tally.Charge(credits)
	}
}

// failed counts a failed request and makes its error, which wraps ErrUnavailable.
func (v *vendorAPI) failed(retryable bool, after time.Duration, format string, args ...any) *upstreamError {
	msg := v.redact(fmt.Sprintf(format, args...))
	v.meter.fail(msg)
	return &upstreamError{err: fmt.Errorf("%s: %w", msg, enrich.ErrUnavailable), retryable: retryable, retryAfter: after}
}

// refused is failed for a refusal of the key or its account: not retried, and
// wrapping ErrKeyRefused.
func (v *vendorAPI) refused(format string, args ...any) *upstreamError {
	u := v.failed(false, 0, format, args...)
	if v.cfg.OnKeyRefused != nil {
		v.cfg.OnKeyRefused(v.redact(fmt.Sprintf(format, args...)))
	}
	u.err = fmt.Errorf("%w (%w)", u.err, ErrKeyRefused)
	return u
}

// problem is the vendor's own words about a failure, short and without the key:
// Enrich Layer sends {"description": ...}, People Data Labs {"error": {"message": ...}},
// Apollo {"error": "..."} or {"message": ...}.
func (v *vendorAPI) problem(body []byte) string {
	var e struct {
		Description string          `json:"description"`
		Detail      string          `json:"detail"`
		Message     string          `json:"message"`
		Error       json.RawMessage `json:"error"`
	}
	msg := ""
	if json.Unmarshal(body, &e) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var plain string
		switch {
		case json.Unmarshal(e.Error, &nested) == nil && nested.Message != "":
			msg = nested.Message
		case json.Unmarshal(e.Error, &plain) == nil && plain != "":
			msg = plain
		}
		msg = orDefault(msg, orDefault(e.Description, orDefault(e.Detail, e.Message)))
	}
	if msg == "" {
		msg = strings.TrimSpace(string(body))
	}
	// The key is taken out before the message is cut: cut first, a key that spans the
	// cut would no longer match whole, and its first part would show.
	msg = v.redact(msg)
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "…"
	}
	return orDefault(msg, "no detail given")
}

// redact takes the API key out of text that came from upstream or from the transport.
func (v *vendorAPI) redact(s string) string {
	if v.key == "" {
		return s
	}
	return strings.ReplaceAll(s, v.key, "[redacted]")
}

// retryAfter reads Retry-After in seconds, at most a minute.
func retryAfter(h http.Header) time.Duration {
	secs, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || secs <= 0 {
		return 0
	}
	return time.Duration(min(secs, 60)) * time.Second
}

// isNotFound says whether err is a miss rather than a failure.
func isNotFound(err error) bool { return errors.Is(err, enrich.ErrNotFound) }

// withoutURL drops the "Get <url>:" a client error starts with.
func withoutURL(err error) error {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Err
	}
	return err
}
