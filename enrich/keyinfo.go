package enrich

import "context"

// Keyed is a Source that calls a vendor with an API key: KeyEnv names the environment
// variable the installation's key is read from.
type Keyed interface {
	KeyEnv() string
}

// KeyInfo is what an organization is shown of the vendor key a source uses for its
// tasks: never the key itself.
type KeyInfo struct {
	// Own says the organization set its own key for the source; else the
	// installation's is used.
	Own bool
	// Last4 are the last 4 characters of the organization's own key.
	Last4 string
	// Failing says the vendor refused the organization's own key; Fallback that the
	// installation's key answers its tasks meanwhile, as the organization allowed.
	Failing  bool
	Fallback bool
}

// KeyInfos tells whose key each source uses for an organization, for GET /v1/sources
// and the dashboard. Whatever keeps the organizations' own keys implements it beside
// SourceKeys; without one, every organization uses the installation's keys.
type KeyInfos interface {
	KeyInfo(ctx context.Context, org, source string) (KeyInfo, error)
}
