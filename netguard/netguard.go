// Package netguard owns enrichd's outbound HTTP to addresses a user supplied (webhook
// URLs, company websites): an HTTP client that connects only to public addresses,
// checked on the address actually dialed so that DNS rebinding cannot reach inside,
// with no proxy and no redirects unless asked for; and the same check for a URL
// before it is accepted.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// ErrNotPublic is wrapped by every refusal of an address that is not public.
var ErrNotPublic = errors.New("not a public address")

// ErrPlainHTTP is wrapped by the refusal of a URL that is http, not https. Like
// ErrNotPublic, it is what Policy.AllowPrivate would have let through.
var ErrPlainHTTP = errors.New("plain http")

// refusal is an error whose text is a sentence of its own, wrapping a sentinel that
// callers test with errors.Is.
type refusal struct {
	msg string
	err error
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.err }

// Policy says which destinations are allowed.
type Policy struct {
	// AllowPrivate allows plain http and loopback, private, link-local and other
	// non-public addresses. It exists for local development and tests only.
	AllowPrivate bool
	// Resolver resolves host names for CheckURL; net.DefaultResolver when nil.
	Resolver interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	}
}

var guardian = ssrf.New(ssrf.WithAnyPort())

// CheckAddr refuses an address that is not public: loopback, private, link-local,
// CGNAT, multicast, unspecified, IPv6 ULA and the other special-purpose ranges.
func CheckAddr(ip netip.Addr) error {
	if err := guardian.SafeAddr(ip); err != nil {
		return fmt.Errorf("%s: %w", ip, ErrNotPublic)
	}
	return nil
}

// CheckURL validates a URL given to enrichd to call later: https (http too when
// private addresses are allowed), a host, no user info, and a host that resolves only to
// public addresses. Its errors are sentences a person can act on.
func (p Policy) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return nil, fmt.Errorf("%q is not an absolute URL", raw)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && p.AllowPrivate:
	case u.Scheme == "http":
		return nil, &refusal{msg: "the URL must use https, not http", err: ErrPlainHTTP}
	default:
		return nil, fmt.Errorf("the URL must use https, not %q", u.Scheme)
	}
	if u.User != nil {
		return nil, fmt.Errorf("the URL must not carry a user name or password")
	}
	if p.AllowPrivate {
		return u, nil
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if err := CheckAddr(ip.Unmap()); err != nil {
			return nil, fmt.Errorf("the URL's address %s is not publicly reachable: %w", host, ErrNotPublic)
		}
		return u, nil
	}
	resolver := p.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	lookupCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := resolver.LookupNetIP(lookupCtx, "ip", host)
	if err != nil || len(addrs) == 0 {
		if ctx.Err() != nil {
			return nil, ctx.Err() // the caller gave up, not the resolver
		}
		return nil, fmt.Errorf("the URL's host %s does not resolve", host)
	}
	for _, ip := range addrs {
		if err := CheckAddr(ip.Unmap()); err != nil {
			return nil, fmt.Errorf("the URL's host %s resolves to %s, which is not publicly reachable: %w", host, ip, ErrNotPublic)
		}
	}
	return u, nil
}

// Client returns an HTTP client for user-supplied destinations: every connection is
// checked on the address dialed, proxies from the environment are ignored, and at most
// maxRedirects redirects are followed (0: none; the redirect response is returned).
func (p Policy) Client(timeout time.Duration, maxRedirects int) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !p.AllowPrivate {
		dialer.Control = func(network, address string, _ syscall.RawConn) error {
			if err := guardian.Safe(network, address, nil); err != nil {
				return fmt.Errorf("%w: %v", ErrNotPublic, err)
			}
			return nil
		}
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return http.ErrUseLastResponse
			}
			// Every hop is dialed through the same guard; only the scheme is left to check.
			if req.URL.Scheme != "https" && req.URL.Scheme != "http" {
				return fmt.Errorf("redirect to a %q URL refused", req.URL.Scheme)
			}
			return nil
		},
	}
}
