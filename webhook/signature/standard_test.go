package signature

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripewebhook "github.com/stripe/stripe-go/v85/webhook"
)

// newSecret is a Loop secret as the store makes them now: "whsec_" and standard base64.
func newSecret(t *testing.T) string {
	t.Helper()
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// legacySecret is a Loop secret as the store made them before the Standard Webhooks
// headers: unpadded URL-safe base64, with characters of that alphabet in it.
const legacySecret = "whsec_NAI5nraAiOImC2X-6WG4J38_JGDt5y_1jkwoErB8_j4"

func headersOf(id string, body []byte, at time.Time, secrets ...string) http.Header {
	h := http.Header{}
	SetHeaders(h, id, body, at, secrets...)
	return h
}

// tamper changes one byte of body.
func tamper(body []byte) []byte {
	out := []byte(string(body))
	out[len(out)/2] ^= 1
	return out
}

// The Standard Webhooks headers verify with the specification's own Go library, and
// X-Service-Signature with stripe-go, on the same delivery; one byte changed, neither.
func TestBothHeaderSetsVerifyWithThirdPartyLibraries(t *testing.T) {
	is := is.New(t)
	secret := newSecret(t)
	body := []byte(`{"event":"task.succeeded","task":{"id":"t1"},"data":{"name":"Acme"},"error":null}`)
	now := time.Now()
	h := headersOf("0195f3a2-7c1e-7000-8000-000000000001", body, now, secret)

	is.Equal(h.Get(HeaderWebhookID), "0195f3a2-7c1e-7000-8000-000000000001")
	is.Equal(h.Get(HeaderDeliveryID), "0195f3a2-7c1e-7000-8000-000000000001")
	is.Equal(h.Get(HeaderWebhookTimestamp), strconv.FormatInt(now.Unix(), 10))
	is.True(strings.HasPrefix(h.Get(HeaderSignature), "t="+strconv.FormatInt(now.Unix(), 10)+",v1="))
	is.True(strings.HasPrefix(h.Get(HeaderWebhookSignature), "v1,"))

	wh, err := standardwebhooks.NewWebhook(secret)
	is.NoErr(err) // the new secrets decode as the specification's libraries decode them
	is.NoErr(wh.Verify(body, h))
	is.True(wh.Verify(tamper(body), h) != nil)
	is.NoErr(stripewebhook.ValidatePayloadWithTolerance(body, h.Get(HeaderSignature), secret, DefaultTolerance))
	is.True(stripewebhook.ValidatePayloadWithTolerance(tamper(body), h.Get(HeaderSignature), secret, DefaultTolerance) != nil)

	// Our own verification takes either set.
	is.NoErr(VerifyHeaders(body, h, secret, 0))
	standardOnly := h.Clone()
	standardOnly.Del(HeaderSignature)
	is.NoErr(VerifyHeaders(body, standardOnly, secret, 0))
	is.True(errors.Is(VerifyHeaders(tamper(body), standardOnly, secret, 0), ErrSignatureInvalid))
	is.True(errors.Is(VerifyHeaders(body, standardOnly, newSecret(t), 0), ErrSignatureInvalid))
	is.True(errors.Is(VerifyHeaders(body, http.Header{}, secret, 0), ErrNoSignature))
}

// The vector the Standard Webhooks and Svix documentation publish.
func TestStandardSignatureMatchesThePublishedVector(t *testing.T) {
	is := is.New(t)
	body := []byte(`{"test": 2432232314}`)
	at := time.Unix(1614265330, 0)
	got := SignStandard("msg_p5jXN8AQM9LWM0D4loKWxJek", body, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", at)
	is.Equal(got, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	wh, err := standardwebhooks.NewWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	is.NoErr(err)
	want, err := wh.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", at, body)
	is.NoErr(err)
	is.Equal(got, want)
	is.NoErr(verifyStandardAt(body, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", got, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", 0, at))
}

// During a rotation's grace period a delivery carries a signature for each secret: a
// receiver holding only the new one, or only the old one, verifies it with either
// library; one holding neither does not.
func TestADeliverySignedWithTwoSecretsVerifiesWithEither(t *testing.T) {
	is := is.New(t)
	current, previous, other := newSecret(t), newSecret(t), newSecret(t)
	body := []byte(`{"event":"test","task":null,"data":null,"error":null}`)
	h := headersOf("d-1", body, time.Now(), current, previous)

	is.Equal(strings.Count(h.Get(HeaderSignature), ",v1="), 2)
	is.Equal(len(strings.Fields(h.Get(HeaderWebhookSignature))), 2)
	for _, secret := range []string{current, previous} {
		wh, err := standardwebhooks.NewWebhook(secret)
		is.NoErr(err)
		is.NoErr(wh.Verify(body, h))
		is.True(wh.Verify(tamper(body), h) != nil)
		is.NoErr(stripewebhook.ValidatePayloadWithTolerance(body, h.Get(HeaderSignature), secret, DefaultTolerance))
		is.True(stripewebhook.ValidatePayloadWithTolerance(tamper(body), h.Get(HeaderSignature), secret, DefaultTolerance) != nil)
		is.NoErr(VerifyHeaders(body, h, secret, 0))
	}
	wh, err := standardwebhooks.NewWebhook(other)
	is.NoErr(err)
	is.True(wh.Verify(body, h) != nil)
	is.True(stripewebhook.ValidatePayloadWithTolerance(body, h.Get(HeaderSignature), other, DefaultTolerance) != nil)
}

// A secret made before the Standard Webhooks headers keeps its X-Service-Signature as
// it was; the specification's libraries cannot decode it (such a Loop rotates its
// secret to be verified by them), though the same key in standard base64 verifies.
func TestALegacySecretKeepsItsSignatureAndNeedsARotationForStandardLibraries(t *testing.T) {
	is := is.New(t)
	body := []byte(`{"event":"test"}`)
	at := time.Now()
	h := headersOf("d-2", body, at, legacySecret)
	is.Equal(h.Get(HeaderSignature), "t="+strconv.FormatInt(at.Unix(), 10)+",v1="+
		hex.EncodeToString(mac(strconv.FormatInt(at.Unix(), 10), body, []byte(legacySecret))))
	is.NoErr(stripewebhook.ValidatePayloadWithTolerance(body, h.Get(HeaderSignature), legacySecret, DefaultTolerance))
	is.NoErr(VerifyHeaders(body, h, legacySecret, 0))

	_, err := standardwebhooks.NewWebhook(legacySecret)
	is.True(err != nil)
	key, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(legacySecret, SecretPrefix))
	is.NoErr(err)
	wh, err := standardwebhooks.NewWebhook(SecretPrefix + base64.StdEncoding.EncodeToString(key))
	is.NoErr(err)
	is.NoErr(wh.Verify(body, h))
}

func TestVerifyStandardRefuses(t *testing.T) {
	now := time.Unix(1700000000, 0)
	body := []byte(`{"event":"test"}`)
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	good := SignStandard("d-1", body, secret, now)
	for _, c := range []struct {
		name        string
		id, ts, sig string
		body        []byte
		want        error
	}{
		{"no signature", "d-1", "1700000000", "", body, ErrNoSignature},
		{"no id", "", "1700000000", good, body, ErrMalformed},
		{"no timestamp", "d-1", "", good, body, ErrMalformed},
		{"timestamp not a number", "d-1", "yesterday", good, body, ErrMalformed},
		{"negative timestamp", "d-1", "-1700000000", good, body, ErrMalformed},
		{"only another version", "d-1", "1700000000", "v2," + strings.TrimPrefix(good, "v1,"), body, ErrMalformed},
		{"not base64", "d-1", "1700000000", "v1,%%%", body, ErrMalformed},
		{"too old", "d-1", "1699999699", SignStandard("d-1", body, secret, now.Add(-301*time.Second)), body, ErrTooOld},
		{"too far ahead", "d-1", "1700000301", SignStandard("d-1", body, secret, now.Add(301*time.Second)), body, ErrTooOld},
		{"body changed", "d-1", "1700000000", good, []byte(`{"event":"test" }`), ErrSignatureInvalid},
		{"id changed", "d-2", "1700000000", good, body, ErrSignatureInvalid},
		{"timestamp changed", "d-1", "1700000001", good, body, ErrSignatureInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			err := verifyStandardAt(c.body, c.id, c.ts, c.sig, secret, 0, now)
			is.True(errors.Is(err, c.want))
		})
	}
}
