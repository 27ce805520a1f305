package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// The audit log's actions (AuditEntry.Action).
const (
	AuditTaskCreated       = "task.created"
	AuditBatchCreated      = "batch.created"
	AuditBatchDownloaded   = "batch.downloaded"
	AuditPersonExported    = "person.exported"
	AuditPersonErased      = "person.erased"
	AuditSuppressionAdded  = "suppression.added"
	AuditSuppressionLifted = "suppression.lifted"
	AuditKeyCreated        = "key.created"
	AuditKeyRevoked        = "key.revoked"
	AuditUserAdded         = "user.added"
	AuditUserSignedIn      = "user.signed_in"
	AuditWatchCreated      = "watch.created"
	AuditPurged            = "audit.purged"
)

// Actor is who did what an audit entry records: Kind is key, user, mcp (an MCP
// client, through its key), batch (a batch's row), watch (a watch's check), cli (the
// operator) or system (enrichd itself); ID the key's, user's, batch's or watch's; Name
// the key's name, the user's email.
type Actor struct {
	Kind string  `json:"kind"`
	ID   *string `json:"id"`
	Name *string `json:"name"`
}

// AuditEntry is one entry of the organization's audit log: an access to people's
// data, or a change to who may access it. Entries are never changed; each carries the
// hash of the one before it (enrichd audit verify walks the chain).
type AuditEntry struct {
	Seq    int64     `json:"seq"` // its place in the organization's chain, from 1
	At     time.Time `json:"at"`
	Actor  Actor     `json:"actor"`
	Action string    `json:"action"`
	// Subject is whom the act is about, as the request sent it; nil when it is about
	// no one, kept by hash alone (a suppression, an erasure), or erased (Erased).
	Subject     *string         `json:"subject"`
	SubjectHash *string         `json:"subject_hash"`
	TaskID      *string         `json:"task_id"`
	BatchID     *string         `json:"batch_id"`
	ObjectID    *string         `json:"object_id"` // a key, a user, a suppression, a watch, an erasure
	Credits     int64           `json:"credits"`
	RequestID   *string         `json:"request_id"`
	Detail      json.RawMessage `json:"detail"`
	Erased      bool            `json:"erased"`
	PrevHash    string          `json:"prev_hash"`
	Hash        string          `json:"hash"`
}

// AuditList is a page of the audit log, newest first, and whether more follow (the
// log is not counted).
type AuditList struct {
	Data    []AuditEntry `json:"data"`
	HasMore bool         `json:"has_more"`
}

// AuditQuery filters the audit log; empty fields do not filter. Subject is an
// address, a profile URL or a domain, matched by its keyed hash (so an erased
// person's entries are found too); Since is included, Until is not.
type AuditQuery struct {
	Action  string
	Subject string
	Since   time.Time
	Until   time.Time
}

func (q AuditQuery) values() url.Values {
	v := url.Values{}
	if q.Action != "" {
		v.Set("action", q.Action)
	}
	if q.Subject != "" {
		v.Set("subject", q.Subject)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	return v
}

// Audit lists a page of the organization's audit log that q selects, newest first;
// page from 0, pageSize 1 to 100 (0 for the server's default).
func (c *Client) Audit(ctx context.Context, q AuditQuery, page, pageSize int) (*AuditList, error) {
	v := q.values()
	for k, vals := range pageQuery(page, pageSize) {
		v[k] = vals
	}
	var out AuditList
	if _, err := c.do(ctx, http.MethodGet, "/v1/audit", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExportAudit streams every entry q selects as JSON Lines, oldest first, at most
// 100,000 (export a longer log window by window, from the last line's At). The caller
// closes the body; a body cut short ends in an error from its Read.
func (c *Client) ExportAudit(ctx context.Context, q AuditQuery) (io.ReadCloser, error) {
	v := q.values()
	v.Set("format", "jsonl")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/audit?"+v.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("enrichd: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
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
