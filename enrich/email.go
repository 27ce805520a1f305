package enrich

import (
	_ "embed"
	"fmt"
	"net/mail"
	"strings"
	"sync"

	"golang.org/x/net/publicsuffix"
)

// Email match methods: how an email lookup found its person.
const (
	MatchExact    = "exact"    // the address is on record for the person
	MatchInferred = "inferred" // recognized among people already held
	MatchResolved = "resolved" // confirmed against a profile retrieved for the lookup
)

//go:embed data/freemail.txt
var freemailData string

//go:embed data/roles.txt
var rolesData string

func lineSet(data string) map[string]bool {
	set := map[string]bool{}
	for _, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			set[strings.ToLower(line)] = true
		}
	}
	return set
}

var (
	freemailDomains = sync.OnceValue(func() map[string]bool { return lineSet(freemailData) })
	// roleKeys are the role local parts as roleKey folds them: letters only.
	roleKeys = sync.OnceValue(func() map[string]bool {
		keys := map[string]bool{}
		for role := range lineSet(rolesData) {
			keys[roleKey(role)] = true
		}
		return keys
	})
)

// roleKey folds a local part (or a piece of one) to its letters: "No.Reply-2" is noreply.
func roleKey(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r > 127 {
			return r
		}
		return -1
	}, Fold(s))
}

// SplitAddress parses a plain address with net/mail and returns its local part and
// domain. An address over the lengths RFC 5321 allows is refused before it is parsed.
func SplitAddress(address string) (local, domain string, err error) {
	if err := checkAddressLength(address); err != nil {
		return "", "", err
	}
	addr, err := mail.ParseAddress(address)
	if err != nil {
		return "", "", Errorf(KindInvalid, "email %q is not a plain email address", address)
	}
	at := strings.LastIndex(addr.Address, "@")
	return addr.Address[:at], strings.ToLower(addr.Address[at+1:]), nil
}

// IsPersonalMailboxDomain reports whether the registrable domain of domain belongs to a
// free personal-mailbox provider (gmail.com, outlook.fr, proton.me, ...).
func IsPersonalMailboxDomain(domain string) bool {
	domain = strings.TrimSuffix(strings.ToLower(domain), ".")
	if registrable, err := publicsuffix.EffectiveTLDPlusOne(domain); err == nil {
		domain = registrable
	}
	return freemailDomains()[domain]
}

// IsRoleLocalPart reports whether a local part names a function rather than a person
// (info, sales, support, noreply, ...): compared case-folded on its letters alone,
// without its +tag ("Sales2+eu", "support-2" and "no.reply" are roles), and a role
// followed by a short qualifier is a role too ("sales.eu", "info_us", "support.2").
func IsRoleLocalPart(local string) bool {
	if i := strings.IndexByte(local, '+'); i >= 0 {
		local = local[:i]
	}
	local = strings.Trim(local, `"`)
	roles := roleKeys()
	if roles[roleKey(local)] {
		return true
	}
	parts := strings.FieldsFunc(local, func(r rune) bool { return r == '.' || r == '-' || r == '_' })
	if len(parts) == 2 && roles[roleKey(parts[0])] && len(roleKey(parts[1])) <= 2 {
		return true
	}
	return false
}

// Refusal is the TaskError an email lookup fails with at once, before any source is
// asked: a personal-mailbox address or a role address, neither of which names a
// person at a company. It returns nil for an address worth resolving.
func Refusal(address string) *TaskError {
	local, domain, err := SplitAddress(address)
	if err != nil {
		return &TaskError{Code: CodeNotFound, Message: err.Error()}
	}
	if IsPersonalMailboxDomain(domain) {
		return &TaskError{Code: CodeNotFound, Message: fmt.Sprintf(
			"%s is a personal mailbox address; only a work address can be resolved to a person, so nothing was looked up", address)}
	}
	if IsRoleLocalPart(local) {
		return &TaskError{Code: CodeNotFound, Message: fmt.Sprintf(
			"%s is a role address (%s@), not a person's; nothing was looked up", address, local)}
	}
	return nil
}

// AddressKey is the form addresses are remembered and compared in: the local part
// lower-cased and without its +tag, the domain as normalized. Jane.Doe+news@acme.com
// and jane.doe@acme.com are one mailbox.
func AddressKey(address string) string {
	at := strings.LastIndex(address, "@")
	if at < 0 {
		return strings.ToLower(address)
	}
	local := address[:at]
	if i := strings.IndexByte(local, '+'); i > 0 {
		local = local[:i]
	}
	return strings.ToLower(local) + "@" + strings.ToLower(address[at+1:])
}
