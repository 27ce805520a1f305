package signature

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	stripewebhook "github.com/stripe/stripe-go/v85/webhook"
)

const testSecret = "whsec_c2VjcmV0LW9mLXRoZS10ZXN0LWxvb3AtMzItYnl0ZXMh"

func TestSignatureVerifiesWithOurVerifyAndStripes(t *testing.T) {
	is := is.New(t)
	body := []byte(`{"event":"task.succeeded","task":{"id":"t1"},"data":{"name":"Acme"},"error":null}`)
	header := Sign(body, testSecret, time.Now())

	is.True(strings.HasPrefix(header, "t="))
	is.True(strings.Contains(header, ",v1="))
	is.NoErr(Verify(body, header, testSecret, 0))
	// A third-party implementation of the same scheme agrees.
	is.NoErr(stripewebhook.ValidatePayloadWithTolerance(body, header, testSecret, 300*time.Second))
}

func TestSignatureIsHMACOfTimestampDotBody(t *testing.T) {
	is := is.New(t)
	at := time.Unix(1700000000, 0)
	body := []byte(`{"event":"test","task":null,"data":null,"error":null}`)
	// The reference computation of the scheme, by the third-party library.
	want := fmt.Sprintf("t=1700000000,v1=%x", stripewebhook.ComputeSignature(at, body, testSecret))
	is.Equal(Sign(body, testSecret, at), want)
}

func TestVerifyRefuses(t *testing.T) {
	now := time.Unix(1700000000, 0)
	body := []byte(`{"event":"test"}`)
	good := Sign(body, testSecret, now)
	_, sig, _ := strings.Cut(good, ",")
	for _, c := range []struct {
		name   string
		body   []byte
		header string
		secret string
		want   error
	}{
		{"no header", body, "", testSecret, ErrNoSignature},
		{"no timestamp", body, sig, testSecret, ErrMalformed},
		{"timestamp not a number", body, "t=yesterday," + sig, testSecret, ErrMalformed},
		{"negative timestamp", body, "t=-1700000000," + sig, testSecret, ErrMalformed},
		{"no signature", body, "t=1700000000", testSecret, ErrMalformed},
		{"signature not hex", body, "t=1700000000,v1=zz", testSecret, ErrMalformed},
		{"not key=value", body, "t=1700000000,garbage", testSecret, ErrMalformed},
		{"too old", body, Sign(body, testSecret, now.Add(-301*time.Second)), testSecret, ErrTooOld},
		{"too far ahead", body, Sign(body, testSecret, now.Add(301*time.Second)), testSecret, ErrTooOld},
		{"body changed", []byte(`{"event":"test" }`), good, testSecret, ErrSignatureInvalid},
		{"other secret", body, good, "whsec_other", ErrSignatureInvalid},
		{"timestamp changed", body, "t=1700000001," + sig, testSecret, ErrSignatureInvalid},
		{"an empty timestamp, then one", body, "t=,t=1700000000," + sig, testSecret, ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			err := verifyAt(c.body, c.header, c.secret, 0, now)
			is.True(errors.Is(err, c.want))
		})
	}
}

func TestVerifyAcceptsWithinToleranceAndAnyOfSeveralSignatures(t *testing.T) {
	is := is.New(t)
	now := time.Unix(1700000000, 0)
	body := []byte(`{"event":"test"}`)
	is.NoErr(verifyAt(body, Sign(body, testSecret, now.Add(-299*time.Second)), testSecret, 0, now))
	is.True(errors.Is(verifyAt(body, Sign(body, testSecret, now.Add(-61*time.Second)), testSecret, time.Minute, now), ErrTooOld))

	// As in other implementations of the scheme, one matching v1 among several is enough.
	header := Sign(body, testSecret, now)
	ts, sig, _ := strings.Cut(header, ",")
	other := Sign(body, "whsec_other", now)
	_, otherSig, _ := strings.Cut(other, ",")
	is.NoErr(verifyAt(body, ts+","+otherSig+","+sig, testSecret, 0, now))
	is.NoErr(verifyAt(body, ts+",v1=zz,"+sig, testSecret, 0, now)) // a malformed v1 is passed over
}
