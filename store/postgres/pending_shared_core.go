package postgres

// Copies of package store's unexported domain rules used by the orgs, keys, users,
// Loops and deliveries (pgcore's half; pgqueue's copies are in pending_shared.go),
// until the lead's split exports them: delete this file then, and point the calls at
// the exported ones.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/mail"
	"regexp"
	"strings"

	"enrichd/enrich"
	"enrichd/store"
)

const keyPrefixLen = 12

var orgName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

func orgExists(name string) error {
	return &enrich.Error{Kind: enrich.KindConflict, Code: "org_exists", Message: "organization " + name + " already exists"}
}

const (
	// maxEmail is the longest address RFC 5321 lets through a mail server.
	maxEmail = 254
	// maxPasswordHash bounds what is stored: an argon2id or bcrypt string is about 100 bytes.
	maxPasswordHash = 512
	// maxToken bounds a token before it is hashed; ours are 43 characters.
	maxToken = 128
)

// normalEmail is the form an address is stored and looked up in.
func normalEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// checkEmail refuses what cannot be someone's address.
func checkEmail(email string) error {
	if len(email) > maxEmail {
		return enrich.Errorf(enrich.KindInvalid, "email is longer than %d bytes, the most an address may have", maxEmail)
	}
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Name != "" || addr.Address != email {
		return enrich.Errorf(enrich.KindInvalid, "email %q is not a plain email address such as jane@acme.com", email)
	}
	return nil
}

// newToken returns a token to hand out and the hash to store in its place.
func newToken() (string, []byte, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	plain := base64.RawURLEncoding.EncodeToString(b[:])
	hash := sha256.Sum256([]byte(plain))
	return plain, hash[:], nil
}

// tokenHash is the hash a token is looked up by, or nil for a string that cannot be
// one of ours.
func tokenHash(plain string) []byte {
	if plain == "" || len(plain) > maxToken {
		return nil
	}
	hash := sha256.Sum256([]byte(plain))
	return hash[:]
}

func userNotFound(email string) error {
	return enrich.Errorf(enrich.KindNotFound, "no user with email %q (see: enrichd users list)", email)
}

func userExists(email string) error {
	return &enrich.Error{Kind: enrich.KindConflict, Code: "user_exists", Message: "a user with email " + email + " already exists"}
}

func userDisabled(email string) error {
	return &enrich.Error{Kind: enrich.KindConflict, Code: "user_disabled", Message: "user " + email + " is disabled: a disabled user cannot sign in again, so gets no link"}
}

func linkInvalid() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "link_invalid",
		Message: "this set-password link is not valid: it was used already, has expired or was replaced by a newer one; ask an administrator for a new one"}
}

// loginFailed is the one answer to a failed login, whatever the reason.
func loginFailed() error {
	return enrich.Errorf(enrich.KindUnauthorized, "email or password is wrong")
}

func sessionInvalid() error {
	return enrich.Errorf(enrich.KindUnauthorized, "the session has ended; sign in again")
}

func loopNotFound() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "loop not found"}
}

// newSecret is a Loop's signing secret: "whsec_" and 32 random bytes.
func newSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func deliveryNotFound() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "delivery not found"}
}

// deliveryTaskNotFound is store.taskNotFound, under a name of its own here so as not
// to clash with pgqueue's copy.
func deliveryTaskNotFound() error {
	return &enrich.Error{Kind: enrich.KindNotFound, Code: "not_found", Message: "task not found"}
}

// eventBody is the body of every webhook: {event, task, data, error}.
type eventBody struct {
	Event string            `json:"event"`
	Task  *store.Task       `json:"task"`
	Data  json.RawMessage   `json:"data"`
	Error *enrich.TaskError `json:"error"`
}
