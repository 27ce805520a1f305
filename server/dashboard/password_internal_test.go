package dashboard

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestPasswordHashes(t *testing.T) {
	is := is.New(t)
	is.Equal(passwordCost, testCost) // what the tests' sign-ins spend (export_test.go)
	h, err := hashPasswordAt("correct horse battery staple", productionCost)
	is.NoErr(err)
	is.True(strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$"))
	is.True(passwordMatches(h, "correct horse battery staple"))
	is.True(!passwordMatches(h, "correct horse battery stapl"))
	is.True(!passwordMatches(h, ""))

	again, err := hashPasswordAt("correct horse battery staple", productionCost)
	is.NoErr(err)
	is.True(again != h) // salted

	// Hashes not made by hashPassword, or damaged, never match, and a cost beyond
	// what hashPassword uses by far is refused rather than computed.
	parts := strings.Split(h, "$")
	for _, bad := range []string{
		"", "plain", "$argon2i$" + strings.Join(parts[2:], "$"),
		strings.Replace(h, "m=19456", "m=4194304", 1),
		strings.Replace(h, "t=2", "t=1000", 1),
		strings.Replace(h, "v=19", "v=16", 1),
		h[:len(h)-4],
		strings.Join(parts[:5], "$") + "$!!!",
	} {
		is.True(!passwordMatches(bad, "correct horse battery staple"))
	}
}
