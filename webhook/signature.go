// Package webhook owns enrichd's outgoing webhooks: the sender that delivers what the
// store says is due, through the SSRF-safe client, on the retry schedule. The signature
// each delivery carries lives in webhook/signature, which links nothing of the server;
// the names below keep it reachable from here for the sender and for receivers.
package webhook

import (
	"time"

	"enrichd/webhook/signature"
)

// Headers of every delivery.
const (
	HeaderEvent      = signature.HeaderEvent
	HeaderDeliveryID = signature.HeaderDeliveryID
	HeaderSignature  = signature.HeaderSignature
	UserAgent        = signature.UserAgent
)

// DefaultTolerance is how old a signature's timestamp may be in the reference
// verification.
const DefaultTolerance = signature.DefaultTolerance

// Errors of Verify.
var (
	ErrNoSignature      = signature.ErrNoSignature
	ErrMalformed        = signature.ErrMalformed
	ErrTooOld           = signature.ErrTooOld
	ErrSignatureInvalid = signature.ErrSignatureInvalid
)

// Sign returns the X-Service-Signature header value for body sent at t; see
// signature.Sign.
func Sign(body []byte, secret string, t time.Time) string {
	return signature.Sign(body, secret, t)
}

// Verify checks a delivery's X-Service-Signature header against the raw body and the
// Loop's secret; see signature.Verify.
func Verify(body []byte, header, secret string, tolerance time.Duration) error {
	return signature.Verify(body, header, secret, tolerance)
}
