package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Suppression is a person or a company the organization must not enrich: every
// enrichment that names them, or whose answer would be about them, fails not_found,
// refunded, before any source is asked. It is kept as a keyed hash with a masked Hint,
// never the value.
type Suppression struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"` // SuppressEmail, SuppressProfile or SuppressDomain
	Hint      string    `json:"hint"` // the value masked: j***@acme.com
	Reason    *string   `json:"reason"`
	AddedBy   AddedBy   `json:"added_by"`
	AllOrgs   bool      `json:"all_orgs"` // the installation's, added from the CLI
	CreatedAt time.Time `json:"created_at"`
}

// Kinds of a Suppression.
const (
	SuppressEmail   = "email"
	SuppressProfile = "profile"
	SuppressDomain  = "domain" // the company and every address at it
)

// AddedBy is who added a suppression: Kind "key" (ID and Name the key's), "user" (a
// dashboard user: their id and email) or "cli" (the operator).
type AddedBy struct {
	Kind string  `json:"kind"`
	ID   *string `json:"id"`
	Name *string `json:"name"`
}

// SuppressionInput is what to suppress: exactly one of Email, NetworkURL (a profile)
// or Domain, and an optional Reason of at most 500 characters.
type SuppressionInput struct {
	Email      string `json:"email,omitempty"`
	NetworkURL string `json:"networkUrl,omitempty"`
	Domain     string `json:"domain,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// SuppressionList is a page of the organization's suppressions, newest first, and how
// many it has.
type SuppressionList struct {
	Data  []Suppression `json:"data"`
	Total int64         `json:"total"`
}

// SuppressionImport is what ImportSuppressions did: the entries added, and the rows
// that were suppressed already.
type SuppressionImport struct {
	Added    int `json:"added"`
	Existing int `json:"existing"`
}

// Suppress adds one entry to the organization's suppression list. A subject
// suppressed already is an *Error with code suppression_exists.
func (c *Client) Suppress(ctx context.Context, in SuppressionInput) (*Suppression, error) {
	var out struct {
		Data Suppression `json:"data"`
	}
	if _, err := c.do(ctx, http.MethodPost, "/v1/suppressions", nil, in, &out); err != nil {
		return nil, err
	}
	return &out.Data, nil
}

// ImportSuppressions adds every row of a CSV file (a header with any of the columns
// email, networkUrl, domain, reason; at most 10,000 rows) in one call. A file with a
// refused row adds nothing and is an *Error whose Rows lists every refused row.
func (c *Client) ImportSuppressions(ctx context.Context, csv []byte) (*SuppressionImport, error) {
	var out SuppressionImport
	if _, err := c.doRaw(ctx, http.MethodPost, "/v1/suppressions", nil, csv, &out, "Content-Type", FormatCSV); err != nil {
		return nil, err
	}
	return &out, nil
}

// Suppressions lists the organization's suppressions, newest first; page from 0,
// pageSize 1 to 100 (0 for the server's default).
func (c *Client) Suppressions(ctx context.Context, page, pageSize int) (*SuppressionList, error) {
	var out SuppressionList
	if _, err := c.do(ctx, http.MethodGet, "/v1/suppressions", pageQuery(page, pageSize), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Suppression reads one of the organization's suppressions.
func (c *Client) Suppression(ctx context.Context, id string) (*Suppression, error) {
	var out struct {
		Data Suppression `json:"data"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/v1/suppressions/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Data, nil
}

// LiftSuppression lifts one of the organization's suppressions: its subject may be
// enriched again.
func (c *Client) LiftSuppression(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/suppressions/"+url.PathEscape(id), nil, nil, nil)
	return err
}
