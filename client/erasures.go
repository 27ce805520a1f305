package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Erasure is a person erased from everything the organization holds (Erase): what it
// removed, which Loops it told. It names the person by masked hints only.
type Erasure struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // SuppressEmail or SuppressProfile: what was asked
	Hint string `json:"hint"` // what was asked, masked: j***@acme.com
	// Identifiers are every identifier found for the person, masked, the one asked
	// first: each was erased, and is suppressed.
	Identifiers []string `json:"identifiers"`
	RequestedBy AddedBy  `json:"requested_by"`
	AllOrgs     bool     `json:"all_orgs"` // the installation's, from the CLI
	// Removed counts the rows deleted or redacted, by table (tasks, records,
	// deliveries, batch_rows, watches...): docs/privacy.md says what each is.
	Removed map[string]int64 `json:"removed"`
	// Loops are the Loops that were sent the person, each told by a person.erased
	// event.
	Loops     []ErasureLoop `json:"loops"`
	CreatedAt time.Time     `json:"created_at"`
	// CompletedAt is when every person.erased event was delivered or failed for good
	// and the database's files were rid of what was erased; nil until then.
	CompletedAt *time.Time `json:"completed_at"`
}

// ErasureLoop is a Loop an erasure told, with its person.erased event's delivery and
// that delivery's status now (nil once it is gone).
type ErasureLoop struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	DeliveryID string  `json:"delivery_id"`
	Status     *string `json:"status"`
}

// ErasureList is a page of the organization's erasures, newest first, and how many it
// has.
type ErasureList struct {
	Data  []Erasure `json:"data"`
	Total int64     `json:"total"`
}

// PersonRef names a person to erase or export: exactly one of Email or NetworkURL (a
// profile).
type PersonRef struct {
	Email      string `json:"email,omitempty"`
	NetworkURL string `json:"networkUrl,omitempty"`
}

// PersonExport is everything the organization holds on a person (ExportPerson). Each
// list holds rows of one kind, as objects: docs/api.md lists their fields.
type PersonExport struct {
	ExportedAt time.Time         `json:"exported_at"`
	Asked      map[string]string `json:"asked"` // {"email": ...} or {"networkUrl": ...}, normalized
	// Identifiers are every identifier found for the person.
	Identifiers struct {
		Emails      []string `json:"emails"`
		NetworkURLs []string `json:"networkUrls"`
	} `json:"identifiers"`
	Suppressed bool `json:"suppressed"` // the organization may not enrich them
	// Records are the stored and imported records, each with provenance per field
	// ({source, at}) and the keys it is looked up by.
	Records []map[string]json.RawMessage `json:"records"`
	// Tasks are the organization's tasks about them, each with via (request, loop,
	// batch or watch) and by (who made it: an Actor, from the audit log).
	Tasks        []map[string]json.RawMessage `json:"tasks"`
	Loops        []ExportedLoop               `json:"loops"`
	Batches      []map[string]json.RawMessage `json:"batches"`
	Watches      []map[string]json.RawMessage `json:"watches"`
	EmailLookups []map[string]json.RawMessage `json:"email_lookups"`
	Misses       []map[string]json.RawMessage `json:"misses"`
	Suppressions []map[string]json.RawMessage `json:"suppressions"`
	Erasures     []map[string]json.RawMessage `json:"erasures"`
	// Audit are the organization's audit log's entries about the person, oldest
	// first: who looked them up, exported or erased them.
	Audit []map[string]json.RawMessage `json:"audit"`
}

// ExportedLoop is a Loop that was sent the person, its deliveries about them, and the
// HubSpot objects it wrote about them (a HubSpot Loop's).
type ExportedLoop struct {
	ID         string                       `json:"id"`
	Name       *string                      `json:"name"`
	Deliveries []map[string]json.RawMessage `json:"deliveries"`
	HubSpot    []ExportedCRMObject          `json:"hubspot"`
}

// ExportedCRMObject is a HubSpot object a Loop wrote about the person, and which of
// its properties enrichd wrote. enrichd keeps no value it wrote (only keyed hashes of
// them), as Values says: the values are in HubSpot.
type ExportedCRMObject struct {
	ObjectType        string    `json:"object_type"` // contacts or companies
	ObjectID          string    `json:"object_id"`
	PropertiesWritten []string  `json:"properties_written"`
	Values            string    `json:"values"`
	UpdatedAt         time.Time `json:"updated_at"`
}

// EventPersonErased is the event a Loop receives when a person it was sent is erased:
// delete what you hold on them (PersonErasedEvent).
const EventPersonErased = "person.erased"

// PersonErasedEvent is the body of a person.erased event. Person names the identifiers
// the receiver was sent; a delivery read back from the history once it was delivered
// or failed for good has Person nil.
type PersonErasedEvent struct {
	Event     string `json:"event"`
	ErasureID string `json:"erasure_id"`
	Person    *struct {
		Emails      []string `json:"emails"`
		NetworkURLs []string `json:"networkUrls"`
	} `json:"person"`
}

// Erase erases a person from everything the organization holds, tells every Loop that
// was sent them, and suppresses them. Nothing is charged.
func (c *Client) Erase(ctx context.Context, who PersonRef) (*Erasure, error) {
	var out struct {
		Data Erasure `json:"data"`
	}
	if _, err := c.do(ctx, http.MethodPost, "/v1/erasures", nil, who, &out); err != nil {
		return nil, err
	}
	return &out.Data, nil
}

// Erasures lists the organization's erasures, newest first; page from 0, pageSize 1 to
// 100 (0 for the server's default).
func (c *Client) Erasures(ctx context.Context, page, pageSize int) (*ErasureList, error) {
	var out ErasureList
	if _, err := c.do(ctx, http.MethodGet, "/v1/erasures", pageQuery(page, pageSize), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Erasure reads one of the organization's erasures, with the status of its events.
func (c *Client) Erasure(ctx context.Context, id string) (*Erasure, error) {
	var out struct {
		Data Erasure `json:"data"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/v1/erasures/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Data, nil
}

// ExportPerson reads everything the organization holds on a person, as one document.
func (c *Client) ExportPerson(ctx context.Context, who PersonRef) (*PersonExport, error) {
	q := url.Values{}
	if who.Email != "" {
		q.Set("email", who.Email)
	}
	if who.NetworkURL != "" {
		q.Set("networkUrl", who.NetworkURL)
	}
	var out PersonExport
	if _, err := c.do(ctx, http.MethodGet, "/v1/people/export", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
