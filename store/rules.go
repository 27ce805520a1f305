package store

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"enrichd/enrich"
	"fmt"
	"io"
	"net/mail"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// The rules every engine keeps the same way: how records are keyed and read back, what
// a webhook's body is, which error each refusal is, how addresses, tokens and secrets
// are made and checked. Drivers call these; none writes its own.

const (
	// MaxEmail is the longest address RFC 5321 lets through a mail server.
	MaxEmail = 254
	// maxToken bounds a token before it is hashed; ours are 43 characters.
	maxToken = 128
)

// RecordKeys are the keys a record is saved under, each with its redirect mark: set
// (0 or 1, confirmed) for a domain that is an alias of the company's own.
type RecordKeys map[string]sql.NullInt64

func RecordKey(lookup enrich.Lookup, target string) string {
	switch lookup {
	case enrich.LookupDomain:
		return Key("domain", target)
	case enrich.LookupCompanyURL:
		return Key("company", target)
	case enrich.LookupPersonURL:
		return Key("person", target)
	}
	return Key("email", enrich.AddressKey(target))
}

// IdentityKey is the key that names a record itself: a company by its network page,
// else its canonical domain; a person by profile. fallback serves a record that has
// neither.
func IdentityKey(res enrich.Result, fallback string) string {
	if c := res.Company; c != nil && c.NetworkURL != nil {
		return Key("company", *c.NetworkURL)
	}
	if c := res.Company; c != nil && c.Domain != nil {
		return Key("domain", *c.Domain)
	}
	if p := res.Person; p != nil && p.NetworkURL != nil {
		return Key("person", *p.NetworkURL)
	}
	return fallback
}

func ResultJSON(res enrich.Result) (json.RawMessage, error) {
	if res.Person != nil {
		return json.Marshal(res.Person)
	}
	return json.Marshal(res.Company)
}

func AddCompanyKeys(keys RecordKeys, c *enrich.Company) {
	if c.Domain != nil {
		keys[Key("domain", *c.Domain)] = sql.NullInt64{}
	}
	if c.NetworkURL != nil {
		keys[Key("company", *c.NetworkURL)] = sql.NullInt64{}
	}
}

func normalizeCompany(norm enrich.Normalizer, c *enrich.Company) error {
	if c.Domain != nil {
		d, err := norm.Domain(*c.Domain)
		if err != nil {
			return err
		}
		c.Domain = &d
	}
	if c.NetworkURL != nil {
		u, err := norm.CompanyURL(*c.NetworkURL)
		if err != nil {
			return err
		}
		c.NetworkURL = &u
	}
	if c.EnrichmentStatus == "" {
		c.EnrichmentStatus = enrich.StatusEnriched
	}
	return nil
}

func normalizePerson(norm enrich.Normalizer, p *enrich.Person) error {
	u, err := norm.PersonURL(*p.NetworkURL)
	if err != nil {
		return err
	}
	p.NetworkURL = &u
	if p.EnrichmentStatus == "" {
		p.EnrichmentStatus = enrich.StatusEnriched
	}
	if p.Positions == nil {
		p.Positions = []enrich.Position{}
	}
	for i := range p.Positions {
		pos := &p.Positions[i]
		if pos.CompanyNetworkURL != nil {
			u, err := norm.CompanyURL(*pos.CompanyNetworkURL)
			if err != nil {
				return fmt.Errorf("positions[%d].company_network_url: %v", i, err)
			}
			pos.CompanyNetworkURL = &u
		}
		if pos.Company != nil && pos.Company.Domain != nil {
			d, err := norm.Domain(*pos.Company.Domain)
			if err != nil {
				return fmt.Errorf("positions[%d].company.domain: %v", i, err)
			}
			pos.Company.Domain = &d
		}
		for _, d := range []struct {
			name            string
			date, precision *string
		}{{"start_date", pos.StartDate, pos.StartDatePrecision}, {"end_date", pos.EndDate, pos.EndDatePrecision}} {
			if d.date != nil && !validDate(*d.date) {
				return fmt.Errorf("positions[%d].%s %q is not a YYYY-MM-DD date", i, d.name, *d.date)
			}
			if d.precision != nil && *d.precision != "year" && *d.precision != "month" && *d.precision != "day" {
				return fmt.Errorf("positions[%d].%s_precision must be year, month or day", i, d.name)
			}
		}
	}
	return nil
}

func validDate(s string) bool {
	_, err := time.Parse(time.DateOnly, s)
	return err == nil
}

type importCompany struct {
	Type string `json:"type"`
	enrich.Company
	Domains []string `json:"domains"`
}

type importPerson struct {
	Type string `json:"type"`
	enrich.Person
	Emails []string `json:"emails"`
}

func TaskNotFound() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "task not found"}
}

func LoopNotFound() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "loop not found"}
}

func DeliveryNotFound() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "delivery not found"}
}

func UserNotFound(email string) error {
	return enrich.Errorf(enrich.KindNotFound, "no user with email %q (see: enrichd users list)", email)
}

func LinkInvalid() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "link_invalid",
		Message: "this set-password link is not valid: it was used already, has expired or was replaced by a newer one; ask an administrator for a new one"}
}

// LoginFailed is the one answer to a failed login, whatever the reason, so a failure
// says nothing about which accounts exist.
func LoginFailed() error {
	return enrich.Errorf(enrich.KindUnauthorized, "email or password is wrong")
}

func SessionInvalid() error {
	return enrich.Errorf(enrich.KindUnauthorized, "the session has ended; sign in again")
}

// NormalEmail is the form an address is stored and looked up in.
func NormalEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// CheckEmail refuses what cannot be someone's address. It does not check the domain
// further: a self-hosted team may well sign in as admin@localhost.
func CheckEmail(email string) error {
	if len(email) > MaxEmail {
		return enrich.Errorf(enrich.KindInvalid, "email is longer than %d bytes, the most an address may have", MaxEmail)
	}
	if err := enrich.CheckText("email", email); err != nil {
		return err
	}
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Name != "" || addr.Address != email {
		return enrich.Errorf(enrich.KindInvalid, "email %q is not a plain email address such as jane@acme.com", email)
	}
	return nil
}

// NewToken returns a token to hand out and the hash to store in its place.
func NewToken() (string, []byte, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	plain := base64.RawURLEncoding.EncodeToString(b[:])
	hash := sha256.Sum256([]byte(plain))
	return plain, hash[:], nil
}

// TokenHash is the hash a token is looked up by, or nil for a string that cannot be
// one of ours.
func TokenHash(plain string) []byte {
	if plain == "" || len(plain) > maxToken {
		return nil
	}
	hash := sha256.Sum256([]byte(plain))
	return hash[:]
}

// NewLoopSecret is a Loop's signing secret: "whsec_" and 32 random bytes in standard
// base64, the form the Standard Webhooks libraries decode their key from. (Secrets
// made before were unpadded URL-safe base64; they sign as they always did.)
func NewLoopSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b[:]), nil
}

// BodyHash is what idempotency_keys.body_hash holds for a request's hash: the 32 bytes
// of a sha256 given in hex, as the server gives it; any other text as it is.
func BodyHash(h string) []byte {
	if len(h) == 2*sha256.Size {
		if b, err := hex.DecodeString(h); err == nil {
			return b
		}
	}
	return []byte(h)
}

// eventBody is the body of every webhook: {event, task, data, error}.
type eventBody struct {
	Event string            `json:"event"`
	Task  *Task             `json:"task"`
	Data  json.RawMessage   `json:"data"`
	Error *enrich.TaskError `json:"error"`
	// Provenance and Sources are a settled task's (GET /v1/tasks/{id}'s); a test
	// event has neither.
	Provenance json.RawMessage `json:"provenance,omitempty"`
	Sources    json.RawMessage `json:"sources,omitempty"`
}

// SettledEvent is the event a settled task sends to its Loop, task.succeeded or
// task.failed, and its body; event is "" for a task that sends none (one not
// settled, or canceled).
func SettledEvent(t *Task) (event string, payload []byte, err error) {
	body := eventBody{Event: EventTaskSucceeded, Task: t, Data: t.Data, Error: t.Error}
	switch t.Status {
	case StatusSucceeded:
	case StatusFailed:
		body.Event, body.Data = EventTaskFailed, nil
	default:
		return "", nil, nil
	}
	if body.Data == nil {
		body.Data = json.RawMessage("null")
	}
	body.Provenance, body.Sources = json.RawMessage(`{}`), json.RawMessage(`[]`)
	if body.Event == EventTaskSucceeded && len(t.Provenance) > 0 {
		body.Provenance = t.Provenance
	}
	if len(t.Sources) > 0 {
		body.Sources = t.Sources
	}
	payload, err = json.Marshal(body)
	return body.Event, payload, err
}

// TestEventPayload is the body of a Loop's `test` event: {event: "test", task: null,
// data: null, error: null}.
func TestEventPayload() ([]byte, error) {
	return json.Marshal(eventBody{Event: EventTest, Data: json.RawMessage("null")})
}

// ImportRecord is one line of an import, checked and normalized: the record, the keys
// it is found by, and when it was last enriched (nil: at the import).
type ImportRecord struct {
	Result       enrich.Result
	Keys         RecordKeys
	LastEnriched *time.Time
}

// ParseImport reads and checks every line of a JSON Lines import of companies and
// people, normalizing them with norm; the first bad line fails it, with its number.
func ParseImport(r io.Reader, norm enrich.Normalizer) ([]ImportRecord, ImportStats, error) {
	var lines []ImportRecord
	var stats ImportStats
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		lineErr := func(format string, args ...any) error {
			return enrich.Errorf(enrich.KindInvalid, "line %d: %s", n, fmt.Sprintf(format, args...))
		}
		// encoding/json would turn bytes that are not UTF-8 into U+FFFD, and store a name
		// never sent.
		if !utf8.Valid(line) {
			return nil, ImportStats{}, lineErr("not valid UTF-8; send JSON Lines encoded as UTF-8")
		}
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(line, &head); err != nil {
			return nil, ImportStats{}, lineErr("not a JSON object: %v", err)
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		p := ImportRecord{Keys: RecordKeys{}}
		switch head.Type {
		case enrich.ObjectCompany:
			var c importCompany
			if err := dec.Decode(&c); err != nil {
				return nil, ImportStats{}, lineErr("%v", err)
			}
			if strings.TrimSpace(c.Name) == "" {
				return nil, ImportStats{}, lineErr("a company needs a name")
			}
			if c.Domain == nil && c.NetworkURL == nil {
				return nil, ImportStats{}, lineErr("a company needs a domain or a network_url")
			}
			if err := normalizeCompany(norm, &c.Company); err != nil {
				return nil, ImportStats{}, lineErr("%v", err)
			}
			AddCompanyKeys(p.Keys, &c.Company)
			for _, alias := range c.Domains {
				d, err := norm.Domain(alias)
				if err != nil {
					return nil, ImportStats{}, lineErr("domains: %v", err)
				}
				if c.Domain == nil || d != *c.Domain {
					p.Keys[Key("domain", d)] = sql.NullInt64{Valid: true, Int64: 0}
				}
			}
			c.Redirect = nil
			p.Result, p.LastEnriched = enrich.Result{Company: &c.Company}, c.UpdatedAt
			stats.Companies++
		case enrich.ObjectPerson:
			var ps importPerson
			if err := dec.Decode(&ps); err != nil {
				return nil, ImportStats{}, lineErr("%v", err)
			}
			if ps.NetworkURL == nil {
				return nil, ImportStats{}, lineErr("a person needs a network_url")
			}
			if err := normalizePerson(norm, &ps.Person); err != nil {
				return nil, ImportStats{}, lineErr("%v", err)
			}
			p.Keys[Key("person", *ps.NetworkURL)] = sql.NullInt64{}
			for _, e := range ps.Emails {
				addr, err := norm.Email(e)
				if err != nil {
					return nil, ImportStats{}, lineErr("emails: %v", err)
				}
				p.Keys[RecordKey(enrich.LookupEmail, addr)] = sql.NullInt64{}
			}
			ps.EmailMatch = nil
			p.Result, p.LastEnriched = enrich.Result{Person: &ps.Person}, ps.LastEnrichedAt
			stats.People++
		default:
			return nil, ImportStats{}, lineErr(`"type" must be "company" or "person", not %q`, head.Type)
		}
		lines = append(lines, p)
	}
	if err := sc.Err(); err != nil {
		return nil, ImportStats{}, fmt.Errorf("reading the import: %w", err)
	}
	return lines, stats, nil
}

// RecordResult decodes a stored record (of objectType, its JSON data) as the result of
// looking up in: a company found through an alias domain carries redirect, confirmed
// when the alias is; a person found by an address on record carries email_match exact.
func RecordResult(objectType string, data []byte, confirmedAlias bool, in enrich.Input) (enrich.Result, error) {
	if objectType == enrich.ObjectPerson {
		var p enrich.Person
		err := json.Unmarshal(data, &p)
		if in.Lookup == enrich.LookupEmail {
			p.EmailMatch = &enrich.EmailMatch{Method: enrich.MatchExact, Email: in.Target}
		}
		return enrich.Result{Person: &p}, err
	}
	var c enrich.Company
	if err := json.Unmarshal(data, &c); err != nil {
		return enrich.Result{}, err
	}
	if in.Lookup == enrich.LookupDomain && c.Domain != nil && *c.Domain != in.Target {
		c.Redirect = &enrich.Redirect{From: in.Target, To: *c.Domain, Confirmed: confirmedAlias}
	}
	return enrich.Result{Company: &c}, nil
}

// QueueFull is the refusal of a task when the organization already has queued tasks,
// the most it may have.
func QueueFull(queued int64) error {
	return &enrich.Error{Kind: enrich.KindTooManyRequests, Code: "queue_full", QueuedTasks: &queued, RetryAfter: 10,
		Message: fmt.Sprintf("your organization already has %d queued tasks, the most it may have; let them drain and try again", queued)}
}

// IdempotencyKeyReused is the refusal of a request whose Idempotency-Key was first
// used, on firstEndpoint ("" when that was not kept), with another body. The hash,
// which covers the endpoint, decides that it is another request; the endpoints only
// say which of the two differs.
func IdempotencyKeyReused(firstEndpoint, endpoint string) error {
	switch {
	case firstEndpoint != "" && endpoint != "" && !strings.EqualFold(firstEndpoint, endpoint):
		return &enrich.Error{Kind: enrich.KindUnprocessable, Code: "idempotency_key_reused",
			Message: fmt.Sprintf("this Idempotency-Key was first used on %s, not on %s; a key names one request: send a new key for this one",
				firstEndpoint, endpoint)}
	case firstEndpoint == "":
		return &enrich.Error{Kind: enrich.KindUnprocessable, Code: "idempotency_key_reused",
			Message: "this Idempotency-Key was first used with another request (another endpoint or body); send a new key for a new request"}
	}
	return &enrich.Error{Kind: enrich.KindUnprocessable, Code: "idempotency_key_reused",
		Message: "this Idempotency-Key was first used on " + firstEndpoint + " with a different request body; send that body again to get the original task back, or a new key for a new request"}
}

// StorageUnavailable is the answer to a write the database cannot take (a full disk,
// a read-only file, a lost server): nothing was done, and the same request may be
// sent again.
func StorageUnavailable() error {
	return &enrich.Error{Kind: enrich.KindUnavailable, Code: CodeStorageUnavailable, RetryAfter: StorageRetryAfter,
		Message: fmt.Sprintf("the service cannot store anything right now (its database does not take writes); nothing was done or charged; retry in %d seconds", StorageRetryAfter)}
}

// CommitUnknown is the answer to a write whose commit was cut off (the connection to
// the database server was lost while it committed): the server may have kept it or
// not, so unlike StorageUnavailable it promises nothing, and says how to retry safely.
func CommitUnknown() error {
	return &enrich.Error{Kind: enrich.KindUnavailable, Code: CodeStorageUnavailable, RetryAfter: StorageRetryAfter,
		Message: fmt.Sprintf("the connection to the database was lost while this request was being stored: it may or may not have been kept; "+
			"retry in %d seconds with the same Idempotency-Key to get the same task (without one, it may be done, and charged, twice)", StorageRetryAfter)}
}

// TimedOut is the error of a task failed for outliving its expires_at.
var TimedOut = enrich.TaskError{Code: enrich.CodeTimedOut,
	Message: "the enrichment did not finish within the task's lifetime; retrying is safe"}

// TaskOperation is every task's operation. The column that said so on every row was
// dropped (SQLite's migration 8); a second operation would bring it back.
const TaskOperation = "enrich"

// The origins of records: the 30-day store of enriched records, and what the team
// imported, which the dataset source reads.
const (
	OriginStore   = "store"
	OriginDataset = "dataset"
)

// KeyPrefixLen is how much of an API key is kept in the clear, to tell keys apart.
const KeyPrefixLen = 12

// MaxPasswordHash bounds what is stored: an argon2id or bcrypt string is about 100
// bytes.
const MaxPasswordHash = 512

var orgName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// CheckOrgName refuses a name that is not 1-100 letters, digits, '.', '_', '-',
// starting with a letter or digit.
func CheckOrgName(name string) error {
	if !orgName.MatchString(name) {
		return enrich.Errorf(enrich.KindInvalid, "organization name %q must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// OrgExists refuses a second organization of the same name.
func OrgExists(name string) error {
	return &enrich.Error{Kind: enrich.KindConflict, Code: "org_exists", Message: "organization " + name + " already exists"}
}

// UserExists refuses a second user of the same address.
func UserExists(email string) error {
	return &enrich.Error{Kind: enrich.KindConflict, Code: "user_exists", Message: "a user with email " + email + " already exists"}
}

// UserDisabled refuses a set-password link for a disabled user.
func UserDisabled(email string) error {
	return &enrich.Error{Kind: enrich.KindConflict, Code: "user_disabled", Message: "user " + email + " is disabled: a disabled user cannot sign in again, so gets no link"}
}

// TaskSettled refuses to cancel a task that has already settled with status.
func TaskSettled(status string) error {
	return &enrich.Error{Kind: enrich.KindConflict, Code: "task_settled",
		Message: fmt.Sprintf("the task has already %s and can no longer be canceled", status)}
}

// GaveUp is the error of a task whose claims ran out MaxTaskAttempts times.
var GaveUp = enrich.TaskError{Code: enrich.CodeInternalError, Message: fmt.Sprintf(
	"the task was started %d times and each time its claim ran out before it finished (the service stopped, or could not extend its lease); it is not tried again", MaxTaskAttempts)}

// FetchedRecord is what a result fetched from a source is kept as in the 30-day
// store (stored), what the task shows (shown), and the keys it is saved under: the
// input looked up when byTarget, the company's domain and page, an alias domain with
// its redirect mark, the person's profile.
func FetchedRecord(in enrich.Input, res enrich.Result, byTarget bool, fetchedAt, now time.Time) (stored, shown enrich.Result, keys RecordKeys) {
	keys = RecordKeys{}
	if byTarget {
		keys[RecordKey(in.Lookup, in.Target)] = sql.NullInt64{}
	}
	if c := res.Company; c != nil {
		c = ptrCopy(c)
		c.EnrichmentStatus = enrich.StatusEnriched
		if c.CreatedAt == nil {
			c.CreatedAt = &now
		}
		if c.UpdatedAt == nil {
			c.UpdatedAt = &now
		}
		AddCompanyKeys(keys, c)
		if in.Lookup == enrich.LookupDomain && (c.Domain == nil || *c.Domain != in.Target) {
			confirmed := int64(0)
			if c.Redirect != nil && c.Redirect.Confirmed {
				confirmed = 1
			}
			keys[Key("domain", in.Target)] = sql.NullInt64{Valid: true, Int64: confirmed}
		}
		shown = enrich.Result{Company: c}
		c = ptrCopy(c)
		c.Redirect = nil // belongs to the domain looked up, not to the company
		stored = enrich.Result{Company: c}
	}
	if p := res.Person; p != nil {
		p = ptrCopy(p)
		p.EnrichmentStatus, p.LastEnrichedAt = enrich.StatusEnriched, &fetchedAt
		if p.Positions == nil {
			p.Positions = []enrich.Position{}
		}
		if p.NetworkURL != nil {
			keys[Key("person", *p.NetworkURL)] = sql.NullInt64{}
		}
		shown = enrich.Result{Person: p}
		p = ptrCopy(p)
		p.EmailMatch = nil // belongs to the address looked up, not to the person
		stored = enrich.Result{Person: p}
	}
	return stored, shown, keys
}

func ptrCopy[T any](v *T) *T { c := *v; return &c }

// maxIndexedText bounds a text value kept in an indexed column: PostgreSQL refuses a
// b-tree entry past about 2,700 bytes, and a vendor may send a company name or a URL
// of any length.
const maxIndexedText = 1000

// Key is the record key of a value of kind (domain, company, person, email): "kind:value".
// A key too long to index ends in the sha256 of the whole instead, and a NUL, which
// PostgreSQL cannot keep in text, becomes U+FFFD: every engine keys the same value the
// same way.
func Key(kind, value string) string {
	k := strings.ReplaceAll(kind+":"+value, "\x00", "\uFFFD")
	if len(k) <= maxIndexedText {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return truncate(k, maxIndexedText-1-2*sha256.Size) + "#" + hex.EncodeToString(sum[:])
}

// IndexedText is s as an indexed column keeps it (a position's title, company name,
// company page or domain): without NULs, and at most maxIndexedText bytes, cut at a
// character's boundary. The record itself keeps the text whole.
func IndexedText(s *string) *string {
	if s == nil {
		return nil
	}
	t := truncate(strings.ReplaceAll(*s, "\x00", "\uFFFD"), maxIndexedText)
	return &t
}

// truncate cuts s to at most n bytes, at a character's boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
