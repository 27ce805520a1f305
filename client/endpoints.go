package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"
)

// MaxIdempotencyKey is the longest Idempotency-Key the server accepts, in characters.
const MaxIdempotencyKey = 255

// CompanyInput is the body of POST /v1/companies/enrich: Domain or NetworkURL (a
// company page), exactly one.
type CompanyInput struct {
	Domain     string `json:"domain,omitempty"`
	NetworkURL string `json:"networkUrl,omitempty"`
	LoopID     string `json:"loop_id,omitempty"` // also deliver the result to this Loop
}

// PersonInput is the body of POST /v1/people/enrich: NetworkURL (a profile, 1
// credit) or Email (a work address, 3 credits), exactly one. FullName, Title and
// Location are tie-break hints for an email lookup that failed as ambiguous; they are
// refused alongside NetworkURL.
type PersonInput struct {
	NetworkURL string `json:"networkUrl,omitempty"`
	Email      string `json:"email,omitempty"`
	FullName   string `json:"fullName,omitempty"`
	Title      string `json:"title,omitempty"`
	Location   string `json:"location,omitempty"`
	LoopID     string `json:"loop_id,omitempty"`
}

// RunInput is the body of POST /v1/loops/{id}/run: for a company Loop Domain or
// NetworkURL (a company page), for a person Loop NetworkURL (a profile) or Email with
// the optional hints.
type RunInput struct {
	Domain     string `json:"domain,omitempty"`
	NetworkURL string `json:"networkUrl,omitempty"`
	Email      string `json:"email,omitempty"`
	FullName   string `json:"fullName,omitempty"`
	Title      string `json:"title,omitempty"`
	Location   string `json:"location,omitempty"`
}

// EnqueueOption configures one enrichment call.
type EnqueueOption func(*enqueueOptions)

type enqueueOptions struct {
	idempotencyKey string
}

// IdempotencyKey sends key as the Idempotency-Key header (at most 255 characters):
// the server answers a repeat of the same call with the original task and charges
// nothing, so a call that may or may not have reached the server can be sent again.
// The same key with another body is refused with 422 idempotency_key_reused.
func IdempotencyKey(key string) EnqueueOption {
	return func(o *enqueueOptions) { o.idempotencyKey = key }
}

func (c *Client) enqueue(ctx context.Context, path string, body any, opts []EnqueueOption) (*Enqueued, error) {
	var o enqueueOptions
	for _, opt := range opts {
		opt(&o)
	}
	if n := utf8.RuneCountInString(o.idempotencyKey); n > MaxIdempotencyKey {
		return nil, &usageError{fmt.Sprintf("the idempotency key is %d characters long; the server takes at most %d", n, MaxIdempotencyKey)}
	}
	var out Enqueued
	res, err := c.do(ctx, http.MethodPost, path, nil, body, &out, "Idempotency-Key", o.idempotencyKey)
	if err != nil {
		return nil, err
	}
	out.StatusCode = res.status
	out.Replayed = res.header.Get("Idempotent-Replayed") == "true"
	return &out, nil
}

// EnrichCompany asks for a company by domain or network page (1 credit, refunded if
// the task fails). The answer carries the task only; read the result with WaitTask or
// Task once the task has succeeded.
func (c *Client) EnrichCompany(ctx context.Context, in CompanyInput, opts ...EnqueueOption) (*Enqueued, error) {
	return c.enqueue(ctx, "/v1/companies/enrich", in, opts)
}

// EnrichPerson asks for a person by profile URL (1 credit) or work email (3 credits),
// refunded if the task fails. An email lookup that fails as ambiguous can be sent
// again with the hints its TaskError.HintsAccepted names.
func (c *Client) EnrichPerson(ctx context.Context, in PersonInput, opts ...EnqueueOption) (*Enqueued, error) {
	return c.enqueue(ctx, "/v1/people/enrich", in, opts)
}

// RunLoop enriches in as the Loop's object type says and also posts the result to the
// Loop's webhook. It costs what the matching direct call costs.
func (c *Client) RunLoop(ctx context.Context, loopID string, in RunInput, opts ...EnqueueOption) (*Enqueued, error) {
	return c.enqueue(ctx, "/v1/loops/"+url.PathEscape(loopID)+"/run", in, opts)
}

// Task reads a task, with its result once it succeeded and its error once it failed.
func (c *Client) Task(ctx context.Context, id string) (*TaskResult, error) {
	var out TaskResult
	res, err := c.do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id), nil, nil, &out)
	if err != nil {
		return nil, err
	}
	out.RetryAfter = res.retryAfter
	return &out, nil
}

// WaitTask polls a task until it is settled (succeeded, failed or canceled) and
// returns it, waiting between polls as the server's Retry-After says. It returns when
// ctx ends, with ctx's error; the task goes on, and WaitTask can be called again. A
// failed task is not an error here: look at TaskResult.Error.
func (c *Client) WaitTask(ctx context.Context, id string) (*TaskResult, error) {
	for {
		r, err := c.Task(ctx, id)
		if err != nil {
			return nil, err
		}
		if r.Task.Settled() {
			return r, nil
		}
		wait := r.RetryAfter
		if wait <= 0 {
			wait = defaultRetryAfter
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("enrichd: waiting for task %s, still %s: %w", id, r.Task.Status, err)
		}
	}
}

// TaskListOptions filters and pages GET /v1/tasks. Zero values take the server's
// defaults: every status, page 0, 25 a page.
type TaskListOptions struct {
	Status   string // queued, running, succeeded, failed or canceled
	Page     int    // from 0
	PageSize int    // 1 to 100
}

// Tasks lists the organization's tasks, newest first.
func (c *Client) Tasks(ctx context.Context, opts TaskListOptions) (*TaskList, error) {
	q := pageQuery(opts.Page, opts.PageSize)
	if opts.Status != "" {
		q.Set("status", opts.Status)
	}
	var out TaskList
	if _, err := c.do(ctx, http.MethodGet, "/v1/tasks", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func pageQuery(page, size int) url.Values {
	q := url.Values{}
	if page != 0 {
		q.Set("page", strconv.Itoa(page))
	}
	if size != 0 {
		q.Set("pageSize", strconv.Itoa(size))
	}
	return q
}

// CancelTask cancels a queued or running task: it becomes canceled, its credits are
// refunded and a late result is discarded. A settled task gives an *Error with code
// task_settled.
func (c *Client) CancelTask(ctx context.Context, id string) (*Task, error) {
	var out struct {
		Task Task `json:"task"`
	}
	if _, err := c.do(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/cancel", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Task, nil
}

// NewLoop is the body of POST /v1/loops: WebhookURL, or Destination.
type NewLoop struct {
	Name       string `json:"name"`
	WebhookURL string `json:"webhook_url,omitempty"` // https, publicly reachable
	ObjectType string `json:"object_type,omitempty"` // company (the default) or person
	Enabled    *bool  `json:"enabled,omitempty"`     // true when nil
	// Destination is the long form: a webhook's {Kind: "webhook", URL}, or HubSpot's.
	Destination *NewDestination `json:"destination,omitempty"`
}

// NewDestination is a Loop's destination on create. For HubSpot (Kind "hubspot"):
// Token, a private app's access token, checked with HubSpot (a refusal is the error
// hubspot_token_refused) and never shown again; Refresh lets a delivery rewrite the
// values enrichd itself wrote; Provenance writes which source gave each field into
// enrichd_provenance; GDPRDelete (people) deletes the contact on a person.erased;
// Mapping overrides the default mapping (HubSpot property to enrichd field, "" to
// leave one unwritten).
type NewDestination struct {
	Kind       string            `json:"kind"`
	URL        string            `json:"url,omitempty"`
	Token      string            `json:"token,omitempty"`
	Refresh    bool              `json:"refresh,omitempty"`
	Provenance bool              `json:"provenance,omitempty"`
	GDPRDelete bool              `json:"gdpr_delete,omitempty"`
	Mapping    map[string]string `json:"mapping,omitempty"`
}

// CreateLoop creates a Loop. The returned Loop's Destination.Secret, which signs its
// deliveries, is shown this once.
func (c *Client) CreateLoop(ctx context.Context, nl NewLoop) (*Loop, error) {
	return c.loop(ctx, http.MethodPost, "/v1/loops", nl)
}

// Loops lists the organization's Loops, oldest first, without their secrets.
func (c *Client) Loops(ctx context.Context) ([]Loop, error) {
	var out struct {
		Data []Loop `json:"data"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/v1/loops", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// Loop reads one Loop, without its secret.
func (c *Client) Loop(ctx context.Context, id string) (*Loop, error) {
	return c.loop(ctx, http.MethodGet, "/v1/loops/"+url.PathEscape(id), nil)
}

// LoopPatch changes the fields it sets; the object type of a Loop cannot change.
type LoopPatch struct {
	Name        *string           `json:"name,omitempty"`
	WebhookURL  *string           `json:"webhook_url,omitempty"`
	Enabled     *bool             `json:"enabled,omitempty"` // a disabled Loop takes no new runs
	Destination *DestinationPatch `json:"destination,omitempty"`
	// RotateSecret replaces the signing secret: the returned Loop carries the new one,
	// this once. The old one keeps signing beside it for SecretGraceSeconds (24 h when
	// nil, 0 to 604800).
	RotateSecret       bool   `json:"rotate_secret,omitempty"`
	SecretGraceSeconds *int64 `json:"secret_grace_seconds,omitempty"`
}

// DestinationPatch enables a Loop's destination again (after a 410 Gone, or HubSpot's
// 401) or disables it; for a HubSpot destination it also replaces the token (checked
// with HubSpot first) and changes the options it sets (Mapping replaces the override).
type DestinationPatch struct {
	Enabled    *bool             `json:"enabled,omitempty"`
	Token      *string           `json:"token,omitempty"`
	Refresh    *bool             `json:"refresh,omitempty"`
	Provenance *bool             `json:"provenance,omitempty"`
	GDPRDelete *bool             `json:"gdpr_delete,omitempty"`
	Mapping    map[string]string `json:"mapping,omitempty"`
}

// UpdateLoop changes a Loop and returns it as it is now.
func (c *Client) UpdateLoop(ctx context.Context, id string, p LoopPatch) (*Loop, error) {
	return c.loop(ctx, http.MethodPatch, "/v1/loops/"+url.PathEscape(id), p)
}

// RotateLoopSecret gives the Loop a new signing secret, returned this once in
// Destination.Secret; for grace the old one keeps signing every delivery beside it, so
// a receiver holding either verifies it (0 replaces it at once).
func (c *Client) RotateLoopSecret(ctx context.Context, id string, grace time.Duration) (*Loop, error) {
	secs := int64(grace / time.Second)
	return c.UpdateLoop(ctx, id, LoopPatch{RotateSecret: true, SecretGraceSeconds: &secs})
}

// EnableDestination sends a Loop's deliveries again after its receiver answered 410
// Gone; the deliveries failed meanwhile can be retried (RetryDelivery).
func (c *Client) EnableDestination(ctx context.Context, id string) (*Loop, error) {
	enabled := true
	return c.UpdateLoop(ctx, id, LoopPatch{Destination: &DestinationPatch{Enabled: &enabled}})
}

func (c *Client) loop(ctx context.Context, method, path string, body any) (*Loop, error) {
	var out struct {
		Data Loop `json:"data"`
	}
	if _, err := c.do(ctx, method, path, nil, body, &out); err != nil {
		return nil, err
	}
	return &out.Data, nil
}

// DeleteLoop deletes a Loop and its deliveries, sent or pending; tasks keep their
// loop_id. Deleting and creating again is how a lost signing secret is replaced.
func (c *Client) DeleteLoop(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/loops/"+url.PathEscape(id), nil, nil, nil)
	return err
}

// TestLoop queues a test event to the Loop's webhook and returns its delivery.
func (c *Client) TestLoop(ctx context.Context, id string) (*Delivery, error) {
	return c.delivery(ctx, "/v1/loops/"+url.PathEscape(id)+"/test")
}

// DeliveryListOptions pages a Loop's deliveries; zero values take the server's
// defaults (page 0, 25 a page).
type DeliveryListOptions struct {
	Page     int
	PageSize int
}

// Deliveries lists a Loop's deliveries, newest first.
func (c *Client) Deliveries(ctx context.Context, loopID string, opts DeliveryListOptions) (*DeliveryList, error) {
	var out DeliveryList
	if _, err := c.do(ctx, http.MethodGet, "/v1/loops/"+url.PathEscape(loopID)+"/deliveries", pageQuery(opts.Page, opts.PageSize), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RetryDelivery makes a failed or pending delivery due now, with the same delivery id.
// A delivery that already succeeded gives an *Error with code delivery_not_failed.
func (c *Client) RetryDelivery(ctx context.Context, id string) (*Delivery, error) {
	return c.delivery(ctx, "/v1/deliveries/"+url.PathEscape(id)+"/retry")
}

func (c *Client) delivery(ctx context.Context, path string) (*Delivery, error) {
	var out struct {
		Delivery Delivery `json:"delivery"`
	}
	if _, err := c.do(ctx, http.MethodPost, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Delivery, nil
}

// Status reads GET /v1/status: what each of the server's sources has cost upstream
// since it started.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var out Status
	if _, err := c.do(ctx, http.MethodGet, "/v1/status", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Sources reads GET /v1/sources: each source's spend this UTC month for the key's
// organization, its budgets and whose key it uses.
func (c *Client) Sources(ctx context.Context) (*Sources, error) {
	var out Sources
	if _, err := c.do(ctx, http.MethodGet, "/v1/sources", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
