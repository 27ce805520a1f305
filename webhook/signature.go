// Package webhook owns enrichd's outgoing webhooks: the sender that delivers what the
// store says is due, through the SSRF-safe client, on the retry schedule, and hears
// what a receiver answers (410 Gone disables the Loop's destination; Retry-After on a
// 429 or 503 delays the next attempt). The signatures each delivery carries live in
// webhook/signature, which links nothing of the server; the names below keep them
// reachable from here for the sender and for receivers.
package webhook

import (
	"net/http"
	"time"

	"enrichd/webhook/signature"
)

// Headers of every delivery: ours, then the Standard Webhooks ones.
const (
	HeaderEvent            = signature.HeaderEvent
	HeaderDeliveryID       = signature.HeaderDeliveryID
	HeaderSignature        = signature.HeaderSignature
	HeaderWebhookID        = signature.HeaderWebhookID
	HeaderWebhookTimestamp = signature.HeaderWebhookTimestamp
	HeaderWebhookSignature = signature.HeaderWebhookSignature
	UserAgent              = signature.UserAgent
)

// DefaultTolerance is how old a signature's timestamp may be in the reference
// verification.
const DefaultTolerance = signature.DefaultTolerance

// Errors of Verify and VerifyHeaders.
var (
	ErrNoSignature      = signature.ErrNoSignature
	ErrMalformed        = signature.ErrMalformed
	ErrTooOld           = signature.ErrTooOld
	ErrSignatureInvalid = signature.ErrSignatureInvalid
)

// Sign returns the X-Service-Signature header value for body sent at t, with one v1
// per secret; see signature.Sign.
func Sign(body []byte, secret string, t time.Time, more ...string) string {
	return signature.Sign(body, secret, t, more...)
}

// Verify checks a delivery's X-Service-Signature header against the raw body and the
// Loop's secret; see signature.Verify.
func Verify(body []byte, header, secret string, tolerance time.Duration) error {
	return signature.Verify(body, header, secret, tolerance)
}

// VerifyHeaders checks a delivery by either header set: X-Service-Signature when
// present, otherwise webhook-id, webhook-timestamp and webhook-signature; see
// signature.VerifyHeaders.
func VerifyHeaders(body []byte, h http.Header, secret string, tolerance time.Duration) error {
	return signature.VerifyHeaders(body, h, secret, tolerance)
}
