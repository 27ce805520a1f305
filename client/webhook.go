package client

import (
	"net/http"
	"time"

	"enrichd/webhook/signature"
)

// Headers of every webhook delivery a Loop receives: ours, and the Standard Webhooks
// ones beside them, signed with the same secret.
const (
	HeaderEvent            = signature.HeaderEvent      // task.succeeded, task.failed, test, a watch's, or person.erased
	HeaderDeliveryID       = signature.HeaderDeliveryID // the same on every attempt: deduplicate on it
	HeaderSignature        = signature.HeaderSignature
	HeaderWebhookID        = signature.HeaderWebhookID // the delivery id again
	HeaderWebhookTimestamp = signature.HeaderWebhookTimestamp
	HeaderWebhookSignature = signature.HeaderWebhookSignature
)

// DefaultWebhookTolerance is how far a delivery's signature timestamp may be from now.
const DefaultWebhookTolerance = signature.DefaultTolerance

// Errors of VerifyWebhook and VerifyWebhookHeaders; compare with errors.Is.
var (
	ErrNoSignature      = signature.ErrNoSignature
	ErrMalformed        = signature.ErrMalformed
	ErrTooOld           = signature.ErrTooOld
	ErrSignatureInvalid = signature.ErrSignatureInvalid
)

// VerifyWebhook checks a delivery's X-Service-Signature header against its raw body
// (read before any JSON parsing) and the Loop's signing secret: the timestamp must be
// within tolerance of now (DefaultWebhookTolerance when 0) and a v1 signature must
// match, compared in constant time. It is the server's own verification.
func VerifyWebhook(body []byte, header, secret string, tolerance time.Duration) error {
	return signature.Verify(body, header, secret, tolerance)
}

// VerifyWebhookHeaders checks a delivery by whichever header set it carries: the
// X-Service-Signature header when present, otherwise the Standard Webhooks headers
// (webhook-id, webhook-timestamp, webhook-signature). Pass the request's headers as
// received. During a secret rotation's grace period a delivery carries a signature
// for the new secret and one for the old: either secret verifies it.
func VerifyWebhookHeaders(body []byte, h http.Header, secret string, tolerance time.Duration) error {
	return signature.VerifyHeaders(body, h, secret, tolerance)
}
