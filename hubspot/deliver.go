package hubspot

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"enrichd/enrich"
	"enrichd/secret"
	"enrichd/store"
	"enrichd/webhook"
)

// Deliverer writes a HubSpot Loop's events into HubSpot: webhook.Destination.
type Deliverer struct {
	DB      *store.DB
	Box     *secret.Box // opens the Loops' tokens; nil: none can be opened
	BaseURL string      // DefaultURL when ""
	HTTP    *http.Client

	// stripes order the writes of one Loop about one object: two deliveries about a
	// company HubSpot does not have yet, sent at once, would each find none and
	// create one (HubSpot keeps companies' domains unique only by convention). A
	// stripe is picked by hash, so the locks are bounded; replicas on PostgreSQL each
	// have their own, which the next delivery's search then finds.
	stripes [64]sync.Mutex
	// created remembers, for a while, the objects this process created, by Loop and
	// key: HubSpot's search shows a new object only seconds later, and the attempt
	// that created it may not be recorded yet when the next delivery about it comes.
	mu      sync.Mutex
	created map[string]createdObject
	// keyed are the Loops whose portal is known to have CompanyKeyProperty.
	keyed sync.Map
}

type createdObject struct {
	id string
	at time.Time
}

// createdRecently is how long a created object is looked for by its id rather than by
// a search; maxCreated bounds what is remembered.
const (
	createdRecently = 10 * time.Minute
	maxCreated      = 10000
)

func (dl *Deliverer) rememberCreated(loopID, key, id string) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	now := time.Now()
	if dl.created == nil || len(dl.created) >= maxCreated {
		for k, o := range dl.created {
			if now.Sub(o.at) > createdRecently {
				delete(dl.created, k)
			}
		}
		if dl.created == nil || len(dl.created) >= maxCreated {
			dl.created = map[string]createdObject{}
		}
	}
	dl.created[loopID+"\x00"+key] = createdObject{id: id, at: now}
}

// forgetCreated forgets the object created by the Loop under key (a contact deleted).
func (dl *Deliverer) forgetCreated(loopID, key string) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	delete(dl.created, loopID+"\x00"+key)
}

func (dl *Deliverer) recentlyCreated(loopID, key string) string {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if o, ok := dl.created[loopID+"\x00"+key]; ok && time.Since(o.at) <= createdRecently {
		return o.id
	}
	return ""
}

// lock holds the stripe of the Loop's object key until the returned func is called.
func (dl *Deliverer) lock(loopID, key string) func() {
	h := fnv.New32a()
	h.Write([]byte(loopID + "\x00" + key))
	m := &dl.stripes[h.Sum32()%uint32(len(dl.stripes))]
	m.Lock()
	return m.Unlock
}

// ReasonTokenRefused is why a HubSpot destination is disabled when HubSpot answers 401.
const ReasonTokenRefused = "HubSpot refused the Loop's token (401): set a new one (PATCH {\"destination\": {\"token\": \"pat-...\"}})"

// event is what a delivery's payload says, as far as HubSpot is written.
type event struct {
	Event string `json:"event"`
	Task  *struct {
		Input json.RawMessage `json:"input"`
	} `json:"task"`
	Data       json.RawMessage   `json:"data"`
	Provenance map[string]string `json:"provenance"`
	Person     *struct {
		Emails []string `json:"emails"`
	} `json:"person"`
	// Objects are, on a person.erased event, the objects the Loop wrote about the
	// person, as enrichd kept them until the erasure.
	Objects []store.ErasedObject `json:"objects"`
}

// Deliver makes one attempt of the delivery d.
func (dl *Deliverer) Deliver(ctx context.Context, d *store.Dispatch) webhook.Outcome {
	if dl.Box == nil {
		return webhook.Outcome{Err: errors.New("enrichd has no secret key file (--secret-key-file): the Loop's HubSpot token cannot be opened")}
	}
	token, err := dl.Box.Open(d.HubSpot.Sealed, store.HubSpotTokenLabel(d.LoopID))
	if err != nil {
		reason := "the Loop's HubSpot token does not open under this installation's secret key file: set it again (PATCH {\"destination\": {\"token\": \"pat-...\"}})"
		return webhook.Outcome{Err: errors.New(reason), DisableReason: reason}
	}
	opts, err := store.ParseHubSpotOptions(d.HubSpotOptions)
	if err != nil {
		return webhook.Outcome{Err: err}
	}
	base := dl.BaseURL
	if base == "" {
		base = DefaultURL
	}
	c := &Client{BaseURL: base, Token: string(token), HTTP: dl.HTTP, Now: dl.DB.Now}
	var ev event
	if err := json.Unmarshal(d.Payload, &ev); err != nil {
		return webhook.Outcome{Err: fmt.Errorf("the delivery's payload cannot be read: %v", err)}
	}
	w := &writer{dl: dl, db: dl.DB, c: c, d: d, opts: opts, key: dl.valueKey()}
	var out webhook.Outcome
	switch ev.Event {
	case store.EventTest:
		if err = c.CheckToken(ctx, d.ObjectType); err == nil {
			out.Summary = "HubSpot accepted the token (a page of " + ObjectPath(d.ObjectType) + " read)"
		}
	case store.EventTaskFailed:
		out.Summary = "skipped: the task failed, there is nothing to write"
	case store.EventPersonErased:
		out.Summary, err = w.erase(ctx, ev)
	case store.EventTaskSucceeded:
		out.Summary, out.Wrote, err = w.write(ctx, ev)
	default:
		out.Summary = "skipped: HubSpot is not written on " + ev.Event
	}
	if err != nil {
		out = webhook.Outcome{Err: err, Status: StatusOf(err)}
		var e *APIError
		if errors.As(err, &e) {
			out.RetryAfter = e.RetryAfter
			if e.Status == http.StatusUnauthorized {
				out.DisableReason = ReasonTokenRefused
			}
		}
		return out
	}
	out.Status = http.StatusOK
	return out
}

// valueKey is the key of the hashes enrichd keeps of the values it wrote: derived from
// the subject key for this use alone.
func (dl *Deliverer) valueKey() []byte {
	mac := hmac.New(sha256.New, dl.Box.SubjectKey())
	mac.Write([]byte("enrichd hubspot values v1"))
	return mac.Sum(nil)
}

// writer is one delivery's writing into HubSpot.
type writer struct {
	dl   *Deliverer
	db   *store.DB
	c    *Client
	d    *store.Dispatch
	opts *store.HubSpotOptions
	key  []byte
}

// hash is the keyed hash kept of a value enrichd wrote into a property.
func (w *writer) hash(prop, value string) string {
	mac := hmac.New(sha256.New, w.key)
	mac.Write([]byte(w.d.LoopID + "\x00" + prop + "\x00" + strings.TrimSpace(value)))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

func blank(v *string) bool { return v == nil || strings.TrimSpace(*v) == "" }

// write makes the result an object in HubSpot: found by its key (the object written
// before, else a search), created when absent with every mapped property, else given
// the properties blank in HubSpot (and, with refresh, those still holding the value
// enrichd wrote).
func (w *writer) write(ctx context.Context, ev event) (summary string, wrote *store.CRMWrite, err error) {
	objectType := w.d.ObjectType
	objects := ObjectPath(objectType)
	var res enrich.Result
	var input struct {
		Domain string `json:"domain"`
		Email  string `json:"email"`
	}
	if ev.Task != nil {
		_ = json.Unmarshal(ev.Task.Input, &input) // an input that is not an object names no key
	}
	var key string
	if objectType == enrich.ObjectPerson {
		if err := json.Unmarshal(ev.Data, &res.Person); err != nil || res.Person == nil {
			return "skipped: the result holds no person", nil, nil
		}
		key = strings.ToLower(strings.TrimSpace(input.Email))
		if key == "" {
			return "skipped: the lookup was by profile, with no email address, and HubSpot's contacts are found by email", nil, nil
		}
	} else {
		if err := json.Unmarshal(ev.Data, &res.Company); err != nil || res.Company == nil {
			return "skipped: the result holds no company", nil, nil
		}
		key = strings.ToLower(str(res.Company.Domain))
		if key == "" {
			key = strings.ToLower(strings.TrimSpace(input.Domain))
		}
		if key == "" {
			return "skipped: the company has no domain, which HubSpot's companies are found by", nil, nil
		}
	}
	defer w.dl.lock(w.d.LoopID, key)()
	mapping := Mapping(objectType, w.opts.Mapping)
	values, from := Properties(objectType, mapping, res, key)
	values[keyProperty(objectType)], from[keyProperty(objectType)] = key, keyProperty(objectType)
	props := slices.Sorted(maps.Keys(mapping))
	props = append(props, keyProperty(objectType))
	if w.opts.Provenance {
		props = append(props, ProvenanceProperty)
	}
	props = slices.Compact(slices.Sorted(slices.Values(props)))

	prev, err := w.prevWrite(ctx)
	if err != nil {
		return "", nil, err
	}
	// An object found by the id kept is this subject's only while it still holds the
	// key: its address may have been changed in HubSpot since, or the token replaced
	// by another portal's, where the id is another record.
	byID := func(id string) (*Object, error) {
		o, err := w.c.Get(ctx, objects, id, props)
		if err != nil || o == nil || !strings.EqualFold(strings.TrimSpace(str(o.Properties[keyProperty(objectType)])), key) {
			return nil, err
		}
		return o, nil
	}
	var found *Object
	if prev != nil && prev.ObjectType == objects {
		if found, err = byID(prev.ObjectID); err != nil {
			return "", nil, err
		}
	}
	if id := w.dl.recentlyCreated(w.d.LoopID, key); found == nil && id != "" {
		if found, err = byID(id); err != nil {
			return "", nil, err
		}
	}
	if found == nil {
		hits, err := w.c.Search(ctx, objects, keyProperty(objectType), key, props)
		if err != nil {
			return "", nil, err
		}
		if len(hits) > 0 {
			found = &hits[0]
		}
	}
	// A company enrichd created is found by the unique property it set at once, where
	// the search may not show it yet (a create whose answer was lost).
	// A token without the scope to make properties (403) is still served, found by
	// the search alone.
	keyed := false
	if found == nil && objects == "companies" {
		k, ok := w.dl.keyed.Load(w.d.LoopID)
		if !ok {
			err := w.c.EnsureCompanyKeyProperty(ctx)
			if err != nil && StatusOf(err) != http.StatusForbidden {
				return "", nil, err
			}
			k = err == nil
			w.dl.keyed.Store(w.d.LoopID, k)
		}
		if keyed = k.(bool); keyed {
			if found, err = w.c.GetBy(ctx, objects, CompanyKeyProperty, key, props); err != nil {
				return "", nil, err
			}
		}
	}
	noun := map[string]string{"companies": "company", "contacts": "contact"}[objects]
	if found == nil {
		if w.opts.Provenance {
			values[ProvenanceProperty] = provenanceText(nil, values, from, ev.Provenance)
		}
		if keyed {
			values[CompanyKeyProperty] = key
		}
		var o *Object
		left, err := withoutMissing(values, func(props map[string]string) (err error) {
			o, err = w.c.Create(ctx, objects, props)
			return err
		})
		if err != nil {
			return "", nil, err
		}
		delete(values, CompanyKeyProperty)
		w.dl.rememberCreated(w.d.LoopID, key, o.ID)
		written := map[string]string{}
		for p, v := range values {
			written[p] = w.hash(p, v)
		}
		delete(values, ProvenanceProperty)
		return fmt.Sprintf("created %s %s with %s", noun, o.ID, strings.Join(slices.Sorted(maps.Keys(values)), ", ")) + left,
			&store.CRMWrite{ObjectType: objects, ObjectID: o.ID, Written: written}, nil
	}

	// Only what is blank in HubSpot is written; with refresh, also what still holds
	// the value enrichd wrote there. Everything else was typed by someone: kept.
	ours := func(p string) bool {
		cur := found.Properties[p]
		return prev != nil && prev.ObjectType == objects && prev.ObjectID == found.ID && !blank(cur) &&
			prev.Written[p] != "" && hmac.Equal([]byte(prev.Written[p]), []byte(w.hash(p, *cur)))
	}
	written := map[string]string{}
	update := map[string]string{}
	var filled, refreshed, kept []string
	for _, p := range slices.Sorted(maps.Keys(values)) {
		v, cur := values[p], found.Properties[p]
		switch {
		case p == keyProperty(objectType) && !blank(cur):
			// The object was found by it.
		case blank(cur):
			update[p] = v
			filled = append(filled, p)
		case ours(p) && strings.TrimSpace(*cur) != v && w.opts.Refresh:
			update[p] = v
			refreshed = append(refreshed, p)
		case ours(p):
			written[p] = prev.Written[p]
		case strings.TrimSpace(*cur) == v:
			// The value there already: whoever wrote it, nothing to write or keep.
		default:
			kept = append(kept, p)
		}
	}
	summary = fmt.Sprintf("%s %s: ", noun, found.ID)
	left := ""
	if len(update) == 0 {
		summary += "nothing blank to fill"
	} else {
		values := maps.Clone(update)
		if w.opts.Provenance {
			update[ProvenanceProperty] = provenanceText(found.Properties[ProvenanceProperty], values, from, ev.Provenance)
		}
		if left, err = withoutMissing(update, func(props map[string]string) error { return w.c.Update(ctx, objects, found.ID, props) }); err != nil {
			return "", nil, err
		}
		for p, v := range values {
			if _, ok := update[p]; ok {
				written[p] = w.hash(p, v)
			}
		}
		var parts []string
		if filled = kept2(filled, update); len(filled) > 0 {
			parts = append(parts, "filled "+strings.Join(filled, ", "))
		}
		if refreshed = kept2(refreshed, update); len(refreshed) > 0 {
			parts = append(parts, "refreshed "+strings.Join(refreshed, ", "))
		}
		summary += strings.Join(parts, "; ")
	}
	if len(kept) > 0 {
		summary += "; kept the values already there in " + strings.Join(kept, ", ")
	}
	return summary + left, &store.CRMWrite{ObjectType: objects, ObjectID: found.ID, Written: written}, nil
}

// withoutMissing writes props by write; when HubSpot answers that some of them do not
// exist in the portal (a default property it lacks, a mapping's typo), it writes the
// others once more without them, which it deletes from props, and says so.
func withoutMissing(props map[string]string, write func(map[string]string) error) (string, error) {
	err := write(props)
	var e *APIError
	if !errors.As(err, &e) || len(e.Missing) == 0 {
		return "", err
	}
	for _, p := range e.Missing {
		delete(props, p)
	}
	if len(props) == 0 {
		return "", err
	}
	if err := write(props); err != nil {
		return "", err
	}
	return "; left out " + strings.Join(e.Missing, ", ") + ", which HubSpot does not have", nil
}

// kept2 is names less those no longer in props.
func kept2(names []string, props map[string]string) []string {
	var out []string
	for _, n := range names {
		if _, ok := props[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// prevWrite is what the Loop wrote about the delivery's subject before, or nil.
func (w *writer) prevWrite(ctx context.Context) (*store.CRMWrite, error) {
	return w.db.CRMWritten(ctx, w.d.ID)
}

// provenanceText is the provenance property's value: "property: source" a line, the
// lines of the properties written now replacing those of before.
func provenanceText(before *string, written, from, prov map[string]string) string {
	lines := map[string]string{}
	if before != nil {
		for _, l := range strings.Split(*before, "\n") {
			if p, src, ok := strings.Cut(l, ": "); ok {
				lines[p] = src
			}
		}
	}
	for p := range written {
		if p == ProvenanceProperty {
			continue
		}
		if src := prov[from[p]]; src != "" {
			lines[p] = src
		} else {
			lines[p] = "input"
		}
	}
	var out []string
	for _, p := range slices.Sorted(maps.Keys(lines)) {
		out = append(out, p+": "+lines[p])
	}
	return strings.Join(out, "\n")
}

// erase is a person.erased event: nothing by default (the CRM holds the team's own
// relationship with the person); with gdpr_delete, each contact enrichd wrote about
// the person is deleted under HubSpot's GDPR delete, by id: those the event names
// (what enrichd kept of its writes until the erasure), those this process created at
// the person's addresses a moment ago, and those HubSpot's search finds at them. The
// search alone would miss a contact created in the seconds before its index shows it.
func (w *writer) erase(ctx context.Context, ev event) (string, error) {
	if !w.opts.GDPRDelete {
		return "skipped: this Loop keeps its HubSpot contacts on an erasure (gdpr_delete is off)", nil
	}
	var emails []string
	if ev.Person != nil {
		for _, e := range ev.Person.Emails {
			emails = append(emails, strings.ToLower(strings.TrimSpace(e)))
		}
	}
	var ids []string
	for _, o := range ev.Objects {
		if o.Type == "contacts" && o.ID != "" {
			ids = append(ids, o.ID)
		}
	}
	if len(emails) == 0 && len(ids) == 0 {
		return "skipped: the person was sent by no email address, which HubSpot's contacts are found by", nil
	}
	for _, email := range emails {
		if id := w.dl.recentlyCreated(w.d.LoopID, email); id != "" {
			ids = append(ids, id)
		}
		hits, err := w.c.Search(ctx, "contacts", "email", email, []string{"email"})
		if err != nil {
			return "", err
		}
		for _, h := range hits {
			ids = append(ids, h.ID)
		}
	}
	var deleted []string
	for _, id := range ids {
		if slices.Contains(deleted, id) {
			continue
		}
		if err := w.c.GDPRDelete(ctx, id); err != nil && StatusOf(err) != http.StatusNotFound {
			return "", err
		}
		deleted = append(deleted, id)
	}
	for _, email := range emails {
		w.dl.forgetCreated(w.d.LoopID, email)
	}
	if len(deleted) == 0 {
		return "HubSpot has no contact at the person's addresses: nothing to delete", nil
	}
	return fmt.Sprintf("deleted contact %s under HubSpot's GDPR delete", strings.Join(deleted, ", ")), nil
}

var _ webhook.Destination = (*Deliverer)(nil)
