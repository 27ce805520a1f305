package source

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"enrichd/enrich"
)

// Keyed is a vendor source that can be built again with another API key: an
// organization's own. The copy has its own rate limiter and concurrency cap (the
// limits are the vendor account's, and the organization's account is another one,
// with the same configured rate) and its own meter, so its failures are never shown
// to other organizations.
type Keyed interface {
	enrich.Source
	// WithAPIKey builds the source with key; onRefused, when not nil, is told each
	// refusal of it (VendorConfig.OnKeyRefused).
	WithAPIKey(key string, onRefused func(reason string)) (enrich.Source, error)
}

// KeyChecker is a source that can check its key with one cheap call (KeyCheck says
// which, and what it costs).
type KeyChecker interface {
	// CheckKey returns nil when the vendor accepted the key, an error wrapping
	// ErrKeyRefused when it refused it, or one wrapping enrich.ErrUnavailable when
	// the check could not be made now.
	CheckKey(ctx context.Context) error
}

var (
	_ Keyed      = (*PDL)(nil)
	_ Keyed      = (*EnrichLayer)(nil)
	_ Keyed      = (*Apollo)(nil)
	_ KeyChecker = (*PDL)(nil)
	_ KeyChecker = (*EnrichLayer)(nil)
	_ KeyChecker = (*Apollo)(nil)
)

// ownKeyConfig is the adapter's configuration with the organization's key in place of
// the installation's.
func (v *vendorAPI) ownKeyConfig(key string, onRefused func(string)) VendorConfig {
	cfg := v.cfg
	cfg.APIKey, cfg.OwnKey, cfg.OnKeyRefused = key, true, onRefused
	return cfg
}

func (p *PDL) WithAPIKey(key string, onRefused func(string)) (enrich.Source, error) {
	return NewPDL(p.api.ownKeyConfig(key, onRefused))
}

func (e *EnrichLayer) WithAPIKey(key string, onRefused func(string)) (enrich.Source, error) {
	return NewEnrichLayer(e.api.ownKeyConfig(key, onRefused))
}

func (a *Apollo) WithAPIKey(key string, onRefused func(string)) (enrich.Source, error) {
	return NewApollo(a.api.ownKeyConfig(key, onRefused))
}

// PDLKeyCheckDomain is the website PDL's key check asks for: a reserved name no
// company has, so the answer is a 404, which PDL does not bill.
const PDLKeyCheckDomain = "enrichd-key-check.invalid"

// CheckKey asks PDL's company enrichment for a website no company has: a 404 (free)
// says the key was accepted.
func (p *PDL) CheckKey(ctx context.Context) error {
	_, err := p.api.check(ctx, "/v5/company/enrich", url.Values{"website": {PDLKeyCheckDomain}})
	return err
}

// CheckKey reads Enrich Layer's credit balance (GET /api/v2/credit-balance, 0 credits).
func (e *EnrichLayer) CheckKey(ctx context.Context) error {
	_, err := e.api.check(ctx, "/api/v2/credit-balance", nil)
	return err
}

// CheckKey asks Apollo's GET /api/v1/auth/health (no credit), which says whether the
// key signs in.
func (a *Apollo) CheckKey(ctx context.Context) error {
	body, err := a.api.check(ctx, "/api/v1/auth/health", nil)
	if err != nil {
		return err
	}
	var h struct {
		IsLoggedIn *bool `json:"is_logged_in"`
	}
	if json.Unmarshal(body, &h) == nil && h.IsLoggedIn != nil && !*h.IsLoggedIn {
		return fmt.Errorf("apollo: the key does not sign in (auth/health: is_logged_in false): %w", ErrKeyRefused)
	}
	return nil
}

// check sends one GET, without retries, to learn whether the vendor takes the key:
// any answer but a refusal of the key (401, 402, 403), a rate limit or a failure of
// the vendor (429, 5xx) says it does. It returns the answer's body.
func (v *vendorAPI) check(ctx context.Context, path string, q url.Values) ([]byte, error) {
	u := v.base.JoinPath(path)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	v.authorize(req, v.key)
	v.meter.call()
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s could not be reached to check the key: %s: %w", v.name, v.redact(withoutURL(err).Error()), enrich.ErrUnavailable)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: reading the answer to the key check: %s: %w", v.name, v.redact(err.Error()), enrich.ErrUnavailable)
	}
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized, code == http.StatusPaymentRequired, code == http.StatusForbidden:
		return nil, fmt.Errorf("%s refused the key (%d): %s: %w", v.name, code, v.problem(body), ErrKeyRefused)
	case code == http.StatusTooManyRequests || code >= 500:
		return nil, fmt.Errorf("%s could not check the key now (%d): %s: %w", v.name, code, v.problem(body), enrich.ErrUnavailable)
	}
	return body, nil
}
