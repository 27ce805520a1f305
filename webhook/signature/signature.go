// Package signature owns the signature every enrichd webhook delivery carries: Sign for
// the sender and Verify for receivers. It imports nothing but the standard library, so a
// receiver (or enrichd's Go client) can verify deliveries without linking the server.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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
)

// DefaultTolerance is how old a signature's timestamp may be in the reference
// verification.
const DefaultTolerance = 300 * time.Second

// Errors of Verify.
var (
	ErrNoSignature      = errors.New("webhook: no signature header")
	ErrMalformed        = errors.New("webhook: malformed signature header")
	ErrTooOld           = errors.New("webhook: signature timestamp outside the tolerance")
	ErrSignatureInvalid = errors.New("webhook: signature does not match the body")
)

// Sign returns the X-Service-Signature header value for body sent at t:
// "t=<unix>,v1=<hex HMAC-SHA256 of "<unix>.<body>" keyed by the secret>".
func Sign(body []byte, secret string, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(ts, body, secret))
}

func mac(ts string, body []byte, secret string) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a delivery's X-Service-Signature header against the raw body (before
// any JSON parsing) and the Loop's secret: a timestamp is required and must be within
// tolerance of now (DefaultTolerance when tolerance is 0), and one of its v1 signatures
// must match, compared in constant time.
func Verify(body []byte, header, secret string, tolerance time.Duration) error {
	return verifyAt(body, header, secret, tolerance, time.Now())
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
	want := mac(ts, body, secret)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return ErrSignatureInvalid
}
