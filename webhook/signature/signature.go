// Package signature owns the signatures every enrichd webhook delivery carries: ours
// (X-Service-Signature, the scheme Stripe's libraries verify) and the Standard
// Webhooks one (webhook-id, webhook-timestamp, webhook-signature, which the libraries
// of standardwebhooks.com and Svix verify), Sign* for the sender and Verify* for
// receivers. It imports nothing but the standard library, so a receiver (or enrichd's
// Go client) can verify deliveries without linking the server.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Headers of every delivery.
const (
	HeaderEvent      = "X-Service-Event"
	HeaderDeliveryID = "X-Service-Delivery-Id"
	HeaderSignature  = "X-Service-Signature"
	UserAgent        = "Service-Webhook/1"

	// The Standard Webhooks headers, sent beside ours: webhook-id is the delivery id,
	// webhook-timestamp the second of X-Service-Signature's t=.
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// SecretPrefix starts every Loop signing secret.
const SecretPrefix = "whsec_"

// DefaultTolerance is how old a signature's timestamp may be in the reference
// verification.
const DefaultTolerance = 300 * time.Second

// Errors of Verify and VerifyHeaders.
var (
	ErrNoSignature      = errors.New("webhook: no signature header")
	ErrMalformed        = errors.New("webhook: malformed signature header")
	ErrTooOld           = errors.New("webhook: signature timestamp outside the tolerance")
	ErrSignatureInvalid = errors.New("webhook: signature does not match the body")
)

// Sign returns the X-Service-Signature header value for body sent at t:
// "t=<unix>,v1=<hex HMAC-SHA256 of "<unix>.<body>" keyed by the secret>". With more
// than one secret (a rotation's new one, then the old one) it carries one v1 for each,
// in that order, as Stripe does: a receiver holding either secret verifies it.
func Sign(body []byte, secret string, t time.Time, more ...string) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=" + ts)
	for _, s := range append([]string{secret}, more...) {
		// The key is the whole secret text, prefix included, as Stripe's libraries take it.
		b.WriteString(",v1=" + hex.EncodeToString(mac(ts, body, []byte(s))))
	}
	return b.String()
}

func mac(ts string, body []byte, key []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// StandardKey is the HMAC key of webhook-signature for a Loop secret: what follows
// "whsec_", base64-decoded, as the Standard Webhooks libraries take it. Secrets made
// since the Standard Webhooks headers were added are standard base64, which those
// libraries decode; older ones are unpadded URL-safe base64, which they refuse but
// which decodes to a key here all the same. Text that decodes in no alphabet is used
// as it is.
func StandardKey(secret string) []byte {
	rest := strings.TrimPrefix(secret, SecretPrefix)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err := enc.DecodeString(rest); err == nil && len(key) > 0 {
			return key
		}
	}
	return []byte(rest)
}

// SignStandard returns the webhook-signature header value for the delivery id and
// body sent at t: "v1,<base64 HMAC-SHA256 of "<id>.<unix>.<body>">", keyed by
// StandardKey(secret); with more secrets, one such signature for each, separated by
// spaces, as the specification says.
func SignStandard(id string, body []byte, secret string, t time.Time, more ...string) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	sigs := make([]string, 0, 1+len(more))
	for _, s := range append([]string{secret}, more...) {
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(standardMAC(id, ts, body, StandardKey(s))))
	}
	return strings.Join(sigs, " ")
}

func standardMAC(id, ts string, body, key []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// SetHeaders sets on h both header sets of a delivery of body, with the given id,
// sent at t, signed with every secret given (the first, then those of a rotation's
// grace period). The event header is the caller's.
func SetHeaders(h http.Header, id string, body []byte, t time.Time, secrets ...string) {
	if len(secrets) == 0 {
		return
	}
	h.Set(HeaderDeliveryID, id)
	h.Set(HeaderSignature, Sign(body, secrets[0], t, secrets[1:]...))
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(t.Unix(), 10))
	h.Set(HeaderWebhookSignature, SignStandard(id, body, secrets[0], t, secrets[1:]...))
}

// Verify checks a delivery's X-Service-Signature header against the raw body (before
// any JSON parsing) and the Loop's secret: a timestamp is required and must be within
// tolerance of now (DefaultTolerance when tolerance is 0), and one of its v1 signatures
// must match, compared in constant time.
func Verify(body []byte, header, secret string, tolerance time.Duration) error {
	return verifyAt(body, header, secret, tolerance, time.Now())
}

// VerifyHeaders checks a delivery by either of its header sets: X-Service-Signature
// when it is there (see Verify), otherwise the Standard Webhooks headers
// (see VerifyStandard).
func VerifyHeaders(body []byte, h http.Header, secret string, tolerance time.Duration) error {
	return verifyHeadersAt(body, h, secret, tolerance, time.Now())
}

func verifyHeadersAt(body []byte, h http.Header, secret string, tolerance time.Duration, now time.Time) error {
	if v := h.Get(HeaderSignature); v != "" {
		return verifyAt(body, v, secret, tolerance, now)
	}
	return verifyStandardAt(body, h.Get(HeaderWebhookID), h.Get(HeaderWebhookTimestamp),
		h.Get(HeaderWebhookSignature), secret, tolerance, now)
}

// VerifyStandard checks the Standard Webhooks headers of a delivery (webhook-id,
// webhook-timestamp and webhook-signature, given as their values) against the raw
// body and the Loop's secret: the timestamp must be within tolerance of now
// (DefaultTolerance when 0), and one of the space-separated v1 signatures must match,
// compared in constant time.
func VerifyStandard(body []byte, id, timestamp, signatures, secret string, tolerance time.Duration) error {
	return verifyStandardAt(body, id, timestamp, signatures, secret, tolerance, time.Now())
}

func verifyStandardAt(body []byte, id, ts, header, secret string, tolerance time.Duration, now time.Time) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if strings.TrimSpace(header) == "" {
		return ErrNoSignature
	}
	if id == "" {
		return fmt.Errorf("%w: no webhook-id", ErrMalformed)
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts == "" || strings.Trim(ts, "0123456789") != "" {
		return fmt.Errorf("%w: webhook-timestamp is not a unix timestamp", ErrMalformed)
	}
	var sigs [][]byte
	for _, part := range strings.Fields(header) {
		version, sig, ok := strings.Cut(part, ",")
		if !ok || version != "v1" {
			continue // another version, or not one: another signature may still match
		}
		if b, err := base64.StdEncoding.DecodeString(sig); err == nil && len(b) == sha256.Size {
			sigs = append(sigs, b)
		}
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%w: no v1 signature", ErrMalformed)
	}
	if age := now.Sub(time.Unix(unix, 0)); age > tolerance || age < -tolerance {
		return ErrTooOld
	}
	want := standardMAC(id, ts, body, StandardKey(secret))
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return ErrSignatureInvalid
}

func verifyAt(body []byte, header, secret string, tolerance time.Duration, now time.Time) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if strings.TrimSpace(header) == "" {
		return ErrNoSignature
	}
	var ts string
	var sawTimestamp bool
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("%w: %q is not key=value", ErrMalformed, part)
		}
		switch k {
		case "t":
			if sawTimestamp {
				return fmt.Errorf("%w: two timestamps", ErrMalformed)
			}
			ts, sawTimestamp = v, true
		case "v1":
			// As in other implementations of the scheme, a v1 that is not a hex
			// HMAC-SHA256 is passed over: another v1 may still match.
			if sig, err := hex.DecodeString(v); err == nil && len(sig) == sha256.Size {
				sigs = append(sigs, sig)
			}
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts == "" || strings.Trim(ts, "0123456789") != "" {
		return fmt.Errorf("%w: no unix timestamp t=", ErrMalformed)
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%w: no v1 signature", ErrMalformed)
	}
	if age := now.Sub(time.Unix(unix, 0)); age > tolerance || age < -tolerance {
		return ErrTooOld
	}
	want := mac(ts, body, []byte(secret))
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return ErrSignatureInvalid
}
