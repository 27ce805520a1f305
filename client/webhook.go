package client

import (
	"time"

	"enrichd/webhook/signature"
)

// Headers of every webhook delivery a Loop receives.
const (
	HeaderEvent      = signature.HeaderEvent      // task.succeeded, task.failed or test
	HeaderDeliveryID = signature.HeaderDeliveryID // the same on every attempt: deduplicate on it
	HeaderSignature  = signature.HeaderSignature
)

// DefaultWebhookTolerance is how far a delivery's signature timestamp may be from now.
const DefaultWebhookTolerance = signature.DefaultTolerance

// Errors of VerifyWebhook; compare with errors.Is.
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
