package signature

import (
	"bytes"
	"testing"
	"time"
)

var benchBody = bytes.Repeat([]byte(`{"event":"task.succeeded","task":{"id":"0195f3a2"},"data":{"name":"Acme"}}`), 20)

func BenchmarkSign(b *testing.B) {
	at := time.Now()
	for b.Loop() {
		Sign(benchBody, testSecret, at)
	}
}

func BenchmarkVerify(b *testing.B) {
	header := Sign(benchBody, testSecret, time.Now())
	for b.Loop() {
		if err := Verify(benchBody, header, testSecret, 0); err != nil {
			b.Fatal(err)
		}
	}
}
