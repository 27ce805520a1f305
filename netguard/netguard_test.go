package netguard_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"enrichd/netguard"

	"github.com/matryer/is"
)

// resolver stands in for DNS: each name resolves to the addresses listed.
type resolver map[string][]netip.Addr

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if addrs, ok := r[host]; ok {
		return addrs, nil
	}
	return nil, errors.New("no such host")
}

var notPublic = map[string]string{
	"loopback":          "127.0.0.1",
	"loopback 2":        "127.8.9.10",
	"private 10":        "10.1.2.3",
	"private 172":       "172.16.5.4",
	"private 192":       "192.168.1.1",
	"link-local":        "169.254.169.254",
	"CGNAT":             "100.64.0.1",
	"unspecified":       "0.0.0.0",
	"multicast":         "224.0.0.1",
	"IPv6 loopback":     "::1",
	"IPv6 ULA":          "fd12:3456::1",
	"IPv6 ULA fc":       "fc00::1",
	"IPv6 link-local":   "fe80::1",
	"IPv4-mapped local": "::ffff:127.0.0.1",
	"IPv6 unspecified":  "::",
}

func TestCheckURLRefusesNonPublicAddresses(t *testing.T) {
	ctx := context.Background()
	for name, addr := range notPublic {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			ip := netip.MustParseAddr(addr)
			host := addr
			if ip.Is6() {
				host = "[" + addr + "]"
			}
			policy := netguard.Policy{Resolver: resolver{"hooks.example.com": {netip.MustParseAddr("93.184.216.34"), ip}}}

			_, err := policy.CheckURL(ctx, "https://"+host+"/hook")
			is.True(errors.Is(err, netguard.ErrNotPublic)) // literal address

			// A name with one public and one non-public address is refused too.
			_, err = policy.CheckURL(ctx, "https://hooks.example.com/hook")
			is.True(errors.Is(err, netguard.ErrNotPublic))
		})
	}
}

func TestCheckURLAcceptsPublicHTTPS(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	policy := netguard.Policy{Resolver: resolver{"hooks.example.com": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:2800:220:1::1")}}}
	for _, raw := range []string{"https://hooks.example.com/in", "https://hooks.example.com:8443/in?x=1", "https://93.184.216.34/in", "https://[2606:2800:220:1::1]/in"} {
		u, err := policy.CheckURL(ctx, raw)
		is.NoErr(err)
		is.Equal(u.String(), raw)
	}
}

func TestCheckURLRefusesMalformed(t *testing.T) {
	ctx := context.Background()
	policy := netguard.Policy{Resolver: resolver{"hooks.example.com": {netip.MustParseAddr("93.184.216.34")}}}
	for _, raw := range []string{"http://hooks.example.com/in", "ftp://hooks.example.com/", "hooks.example.com/in", "https://", "https://user:pw@hooks.example.com/", "https://nowhere.example.com/", ""} {
		t.Run(raw, func(t *testing.T) {
			is := is.New(t)
			_, err := policy.CheckURL(ctx, raw)
			is.True(err != nil)
		})
	}
}

func TestAllowPrivateIsForDevelopment(t *testing.T) {
	is := is.New(t)
	_, err := netguard.Policy{AllowPrivate: true}.CheckURL(context.Background(), "http://127.0.0.1:9999/hook")
	is.NoErr(err)
}

func TestClientRefusesToDialNonPublicAddresses(t *testing.T) {
	is := is.New(t)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer receiver.Close()

	_, err := netguard.Policy{}.Client(5*time.Second, 0).Get(receiver.URL)
	is.True(errors.Is(err, netguard.ErrNotPublic)) // the dial itself is refused

	resp, err := netguard.Policy{AllowPrivate: true}.Client(5*time.Second, 0).Get(receiver.URL)
	is.NoErr(err)
	resp.Body.Close()
}

func TestClientFollowsRedirectsOnlyWhenAsked(t *testing.T) {
	is := is.New(t)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer target.Close()
	origin := httptest.NewServer(http.RedirectHandler(target.URL+"/landing", http.StatusFound))
	defer origin.Close()
	policy := netguard.Policy{AllowPrivate: true}

	resp, err := policy.Client(5*time.Second, 0).Get(origin.URL)
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusFound) // not followed

	resp, err = policy.Client(5*time.Second, 5).Get(origin.URL)
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK)
	is.Equal(resp.Request.URL.Path, "/landing")
}
