package server

import (
	"context"
	"errors"
	"strings"
	"time"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/secret"
	"enrichd/store"
)

// SourceKeyLabel is what an organization's key for a source is sealed for (see
// store.SourceKeyLabel).
func SourceKeyLabel(orgID, source string) string { return store.SourceKeyLabel(orgID, source) }

// SourceKeyCheck names, for each vendor source an organization can set its own key
// for, the one cheap call that checks a key and what it costs.
var SourceKeyCheck = map[string]string{
	"enrichlayer": "GET /api/v2/credit-balance (0 credits)",
	"pdl":         "GET /v5/company/enrich of a website no company has (a 404, which PDL does not bill)",
	"apollo":      "GET /api/v1/auth/health (no credit)",
}

// StoreSourceKey checks key with chk's one cheap call and, the vendor having accepted
// it, stores it sealed under the box openBox gives (opened only then) for the
// organization and source name. A refusal (KindUnprocessable) or a check that could
// not be made (KindUnavailable) stores nothing; no error names the key.
func StoreSourceKey(ctx context.Context, db *store.DB, openBox func() (*secret.Box, error), chk source.KeyChecker, orgID, name, key string, allowFallback bool) error {
	checkCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := chk.CheckKey(checkCtx)
	cancel()
	switch {
	case errors.Is(err, source.ErrKeyRefused):
		return enrich.Errorf(enrich.KindUnprocessable, "%s refused the key, so it was not stored: %s", name,
			strings.TrimSuffix(err.Error(), ": "+source.ErrKeyRefused.Error()))
	case err != nil:
		return enrich.Errorf(enrich.KindUnavailable, "the key could not be checked, so it was not stored; try again: %s", err.Error())
	}
	box, err := openBox()
	if err != nil {
		return err
	}
	if box == nil {
		return enrich.Errorf(enrich.KindUnavailable, "enrichd has no secret key file (--secret-key-file), so an organization's own key cannot be stored")
	}
	sealed, err := box.Seal([]byte(key), store.SourceKeyLabel(orgID, name))
	if err != nil {
		return err
	}
	return db.SetSourceKey(ctx, orgID, name, sealed, box.ID(), secret.Last4(key), allowFallback)
}

// KeyedSources are the configured sources an organization can set its own key for,
// in --sources order.
func (s *Server) KeyedSources() []string {
	var names []string
	for _, src := range s.cfg.Sources {
		if _, ok := src.(source.Keyed); ok {
			names = append(names, src.Name())
		}
	}
	return names
}

// SetSourceKey is StoreSourceKey for a configured source, checked against the vendor
// at the address serve asks it.
func (s *Server) SetSourceKey(ctx context.Context, orgID, name, key string, allowFallback bool) error {
	for _, src := range s.cfg.Sources {
		keyed, ok := src.(source.Keyed)
		if !ok || src.Name() != name {
			continue
		}
		built, err := keyed.WithAPIKey(key, nil)
		if err != nil {
			return enrich.Errorf(enrich.KindInvalid, "%s", err.Error())
		}
		chk, ok := built.(source.KeyChecker)
		if !ok {
			return enrich.Errorf(enrich.KindInvalid, "%s cannot check a key", name)
		}
		if s.cfg.Secrets == nil {
			return enrich.Errorf(enrich.KindUnavailable, "enrichd has no secret key file (--secret-key-file), so an organization's own key cannot be stored")
		}
		return StoreSourceKey(ctx, s.db, func() (*secret.Box, error) { return s.cfg.Secrets, nil }, chk, orgID, name, key, allowFallback)
	}
	return enrich.Errorf(enrich.KindNotFound, "%q is not a source this server asks with an API key", name)
}

// keyInfos is Config.KeyInfos when serve gives none: whose key each source uses for an
// organization, read from the database.
type keyInfos struct{ db *store.DB }

// KeyInfo says whose key src uses for the organization's tasks (enrich.KeyInfos), for
// GET /v1/sources and the dashboard: never the key, only its last 4 characters.
func (k keyInfos) KeyInfo(ctx context.Context, org, name string) (enrich.KeyInfo, error) {
	key, err := k.db.OrgSourceKey(ctx, org, name)
	if err != nil || key == nil {
		return enrich.KeyInfo{}, err
	}
	return enrich.KeyInfo{Own: true, Last4: key.Last4, Failing: key.Failing(), Fallback: key.AllowFallback}, nil
}
