package cli

import (
	"testing"

	"github.com/matryer/is"

	"enrichd/enrich/source"
)

// --web-allow-private is the one allowance for local development: private addresses,
// and redirects from https to plain http. Without it, the web source allows neither.
func TestWebAllowPrivateAlsoAllowsPlainHTTP(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"--web-allow-private"}} {
		is := is.New(t)
		cmd := newServeCommand()
		is.NoErr(cmd.ParseFlags(args))
		src, err := extraSource(cmd, "web")
		is.NoErr(err)
		web, ok := src.(*source.Web)
		is.True(ok)
		allowed := len(args) > 0
		is.Equal(web.Policy.AllowPrivate, allowed)
		is.Equal(web.AllowHTTP, allowed)
	}
}
