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
	w, ev, failed := dl.open(d)
	if failed != nil {
		return *failed
	}
	c := w.c
	var out webhook.Outcome
	var err error
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
		return failure(err)
	}
	out.Status = http.StatusOK
	return out
}

// open makes the delivery's writer: its Loop's token opened, its options and its
// event read; failed says why it cannot be made.
func (dl *Deliverer) open(d *store.Dispatch) (w *writer, ev event, failed *webhook.Outcome) {
	if dl.Box == nil {
		return nil, ev, &webhook.Outcome{Err: errors.New("enrichd has no secret key file (--secret-key-file): the Loop's HubSpot token cannot be opened")}
	}
	token, err := dl.Box.Open(d.HubSpot.Sealed, store.HubSpotTokenLabel(d.LoopID))
	if err != nil {
		reason := "the Loop's HubSpot token does not open under this installation's secret key file: set it again (PATCH {\"destination\": {\"token\": \"pat-...\"}})"
		return nil, ev, &webhook.Outcome{Err: errors.New(reason), DisableReason: reason}
	}
	opts, err := store.ParseHubSpotOptions(d.HubSpotOptions)
	if err != nil {
		return nil, ev, &webhook.Outcome{Err: err}
	}
	base := dl.BaseURL
	if base == "" {
		base = DefaultURL
	}
	c := &Client{BaseURL: base, Token: string(token), HTTP: dl.HTTP, Now: dl.DB.Now}
	if err := json.Unmarshal(d.Payload, &ev); err != nil {
		return nil, ev, &webhook.Outcome{Err: fmt.Errorf("the delivery's payload cannot be read: %v", err)}
	}
	return &writer{dl: dl, db: dl.DB, c: c, d: d, opts: opts, key: dl.valueKey()}, ev, nil
}

// failure is the outcome of an attempt that failed with err: HubSpot's 429 waited
// for, its 401 disabling the destination.
func failure(err error) webhook.Outcome {
	out := webhook.Outcome{Err: err, Status: StatusOf(err)}
	var e *APIError
	if errors.As(err, &e) {
		out.RetryAfter = e.RetryAfter
		if e.Status == http.StatusUnauthorized {
			out.DisableReason = ReasonTokenRefused
		}
	}
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

// job is one result being written into HubSpot: its object's key, the values the
// mapping gives, what the Loop wrote about the subject before, and the object found.
type job struct {
	w             *writer
	ev            event
	objects, noun string
	key, keyProp  string
	values, from  map[string]string
	props         []string // read of an object found
	prev          *store.CRMWrite
	found         *Object
	keyed         bool // the portal has CompanyKeyProperty: a company created sets it
}

// prepare reads the result's key and the values it maps to; skip says why nothing is
// to be written, when nothing is.
func (w *writer) prepare(ctx context.Context, ev event) (j *job, skip string, err error) {
	objectType := w.d.ObjectType
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
			return nil, "skipped: the result holds no person", nil
		}
		key = strings.ToLower(strings.TrimSpace(input.Email))
		if key == "" {
			return nil, "skipped: the lookup was by profile, with no email address, and HubSpot's contacts are found by email", nil
		}
	} else {
		if err := json.Unmarshal(ev.Data, &res.Company); err != nil || res.Company == nil {
			return nil, "skipped: the result holds no company", nil
		}
		key = strings.ToLower(str(res.Company.Domain))
		if key == "" {
			key = strings.ToLower(strings.TrimSpace(input.Domain))
		}
		if key == "" {
			return nil, "skipped: the company has no domain, which HubSpot's companies are found by", nil
		}
	}
	objects := ObjectPath(objectType)
	j = &job{w: w, ev: ev, objects: objects, noun: map[string]string{"companies": "company", "contacts": "contact"}[objects],
		key: key, keyProp: keyProperty(objectType)}
	mapping := Mapping(objectType, w.opts.Mapping)
	j.values, j.from = Properties(objectType, mapping, res, key)
	j.values[j.keyProp], j.from[j.keyProp] = key, j.keyProp
	props := slices.Sorted(maps.Keys(mapping))
	props = append(props, j.keyProp)
	if w.opts.Provenance {
		props = append(props, ProvenanceProperty)
	}
	j.props = slices.Compact(slices.Sorted(slices.Values(props)))
	if j.prev, err = w.prevWrite(ctx); err != nil {
		return nil, "", err
	}
	if j.prev != nil && j.prev.ObjectType != objects {
		j.prev = nil
	}
	return j, "", nil
}

// holdsKey says whether an object read is the subject's: an object found by the id
// kept is this subject's only while it still holds the key, since its address may
// have been changed in HubSpot since, or the token replaced by another portal's, where
// the id is another record.
func (j *job) holdsKey(o *Object) bool {
	return o != nil && strings.EqualFold(strings.TrimSpace(str(o.Properties[j.keyProp])), j.key)
}

// knownID is the id of the object the Loop wrote about the subject before, or created
// a moment ago; "" when none.
func (j *job) knownID() string {
	if j.prev != nil {
		return j.prev.ObjectID
	}
	return j.w.dl.recentlyCreated(j.w.d.LoopID, j.key)
}

// companyKeyed says whether the Loop's portal has CompanyKeyProperty, making it the
// first time it is asked. A token without the scope to make properties (403) is still
// served, its companies found by the search alone.
func (j *job) companyKeyed(ctx context.Context) (bool, error) {
	k, ok := j.w.dl.keyed.Load(j.w.d.LoopID)
	if !ok {
		err := j.w.c.EnsureCompanyKeyProperty(ctx)
		if err != nil && StatusOf(err) != http.StatusForbidden {
			return false, err
		}
		k = err == nil
		j.w.dl.keyed.Store(j.w.d.LoopID, k)
	}
	return k.(bool), nil
}

// find looks for the object one call at a time: by the id kept, by the id of the
// object created a moment ago, by a search, and a company by the unique property
// enrichd set at once, where the search may not show it yet (a create whose answer
// was lost).
func (j *job) find(ctx context.Context) error {
	c := j.w.c
	byID := func(id string) error {
		o, err := c.Get(ctx, j.objects, id, j.props)
		if err == nil && j.holdsKey(o) {
			j.found = o
		}
		return err
	}
	if j.prev != nil {
		if err := byID(j.prev.ObjectID); err != nil {
			return err
		}
	}
	if id := j.w.dl.recentlyCreated(j.w.d.LoopID, j.key); j.found == nil && id != "" {
		if err := byID(id); err != nil {
			return err
		}
	}
	if j.found == nil {
		hits, err := c.Search(ctx, j.objects, j.keyProp, j.key, j.props)
		if err != nil {
			return err
		}
		if len(hits) > 0 {
			j.found = &hits[0]
		}
	}
	if j.found == nil && j.objects == "companies" {
		var err error
		if j.keyed, err = j.companyKeyed(ctx); err != nil {
			return err
		}
		if j.keyed {
			if j.found, err = c.GetBy(ctx, j.objects, CompanyKeyProperty, j.key, j.props); err != nil {
				return err
			}
		}
	}
	return nil
}

// createProps are the properties an absent object is created with: every mapped one
// that has a value, the provenance, and a company's CompanyKeyProperty.
func (j *job) createProps() map[string]string {
	props := maps.Clone(j.values)
	if j.w.opts.Provenance {
		props[ProvenanceProperty] = provenanceText(nil, j.values, j.from, j.ev.Provenance)
	}
	if j.keyed {
		props[CompanyKeyProperty] = j.key
	}
	return props
}

// created is what the delivery says and keeps of the object o created with props.
func (j *job) created(o *Object, props map[string]string, left string) (string, *store.CRMWrite) {
	delete(props, CompanyKeyProperty)
	j.w.dl.rememberCreated(j.w.d.LoopID, j.key, o.ID)
	written := map[string]string{}
	for p, v := range props {
		written[p] = j.w.hash(p, v)
	}
	delete(props, ProvenanceProperty)
	return fmt.Sprintf("created %s %s with %s", j.noun, o.ID, strings.Join(slices.Sorted(maps.Keys(props)), ", ")) + left,
		&store.CRMWrite{ObjectType: j.objects, ObjectID: o.ID, Written: written}
}

// fill is what a found object is given: the properties to write, and what became of
// each mapped one.
type fill struct {
	props                   map[string]string // sent: the values, and the provenance
	values                  map[string]string // the values alone
	filled, refreshed, kept []string
	written                 map[string]string // the hashes of enrichd's values it still stands behind
}

// plan decides what the found object is given. Only what is blank in HubSpot is
// written; with refresh, also what still holds the value enrichd wrote there.
// Everything else was typed by someone: kept.
func (j *job) plan() *fill {
	found, prev := j.found, j.prev
	ours := func(p string) bool {
		cur := found.Properties[p]
		return prev != nil && prev.ObjectID == found.ID && !blank(cur) &&
			prev.Written[p] != "" && hmac.Equal([]byte(prev.Written[p]), []byte(j.w.hash(p, *cur)))
	}
	f := &fill{props: map[string]string{}, written: map[string]string{}}
	for _, p := range slices.Sorted(maps.Keys(j.values)) {
		v, cur := j.values[p], found.Properties[p]
		switch {
		case p == j.keyProp && !blank(cur):
			// The object was found by it.
		case blank(cur):
			f.props[p] = v
			f.filled = append(f.filled, p)
		case ours(p) && strings.TrimSpace(*cur) != v && j.w.opts.Refresh:
			f.props[p] = v
			f.refreshed = append(f.refreshed, p)
		case ours(p):
			f.written[p] = prev.Written[p]
		case strings.TrimSpace(*cur) == v:
			// The value there already: whoever wrote it, nothing to write or keep.
		default:
			f.kept = append(f.kept, p)
		}
	}
	f.values = maps.Clone(f.props)
	if len(f.props) > 0 && j.w.opts.Provenance {
		f.props[ProvenanceProperty] = provenanceText(found.Properties[ProvenanceProperty], f.values, j.from, j.ev.Provenance)
	}
	return f
}

// filled is what the delivery says and keeps once f was written into the found object
// (f.props less what HubSpot does not have), or nothing needed writing.
func (j *job) filled(f *fill, left string) (string, *store.CRMWrite) {
	summary := fmt.Sprintf("%s %s: ", j.noun, j.found.ID)
	if len(f.props) == 0 {
		summary += "nothing blank to fill"
	} else {
		for p, v := range f.values {
			if _, ok := f.props[p]; ok {
				f.written[p] = j.w.hash(p, v)
			}
		}
		var parts []string
		if filled := kept2(f.filled, f.props); len(filled) > 0 {
			parts = append(parts, "filled "+strings.Join(filled, ", "))
		}
		if refreshed := kept2(f.refreshed, f.props); len(refreshed) > 0 {
			parts = append(parts, "refreshed "+strings.Join(refreshed, ", "))
		}
		summary += strings.Join(parts, "; ")
	}
	if len(f.kept) > 0 {
		summary += "; kept the values already there in " + strings.Join(f.kept, ", ")
	}
	return summary + left, &store.CRMWrite{ObjectType: j.objects, ObjectID: j.found.ID, Written: f.written}
}

// write makes the result an object in HubSpot: found by its key (the object written
// before, else a search), created when absent with every mapped property, else given
// the properties blank in HubSpot (and, with refresh, those still holding the value
// enrichd wrote).
func (w *writer) write(ctx context.Context, ev event) (summary string, wrote *store.CRMWrite, err error) {
	j, skip, err := w.prepare(ctx, ev)
	if j == nil {
		return skip, nil, err
	}
	defer w.dl.lock(w.d.LoopID, j.key)()
	if err := j.find(ctx); err != nil {
		return "", nil, err
	}
	if j.found == nil {
		props := j.createProps()
		var o *Object
		left, err := withoutMissing(props, func(props map[string]string) (err error) {
			o, err = w.c.Create(ctx, j.objects, props)
			return err
		})
		if err != nil {
			return "", nil, err
		}
		summary, wrote = j.created(o, props, left)
		return summary, wrote, nil
	}
	f := j.plan()
	left := ""
	if len(f.props) > 0 {
		if left, err = withoutMissing(f.props, func(props map[string]string) error { return w.c.Update(ctx, j.objects, j.found.ID, props) }); err != nil {
			return "", nil, err
		}
	}
	summary, wrote = j.filled(f, left)
	return summary, wrote, nil
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
