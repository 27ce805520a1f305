package server

import (
	"context"
	"strings"
	"time"

	"enrichd/enrich"
	"enrichd/hubspot"
	"enrichd/secret"
	"enrichd/store"

	"github.com/google/uuid"
)

// maxHubSpotToken bounds a token sent: HubSpot's private app tokens are far shorter.
const maxHubSpotToken = 512

// destinationSpec is a Loop's destination asked for on create, or a change to it: nil
// is a field not sent.
type destinationSpec struct {
	Kind *string `json:"kind"`
	URL  *string `json:"url"`
	// Token is a HubSpot private app's access token: checked, sealed, never shown.
	Token      *string            `json:"token"`
	Refresh    *bool              `json:"refresh"`
	Provenance *bool              `json:"provenance"`
	GDPRDelete *bool              `json:"gdpr_delete"`
	Mapping    *map[string]string `json:"mapping"`
	// Enabled enables the destination again (after a 410 Gone or a refused token), or
	// disables it: on PATCH only.
	Enabled *bool `json:"enabled"`
}

// hubspotOptionsSet says whether the spec sets any of a HubSpot destination's options.
func (d *destinationSpec) hubspotOptionsSet() bool {
	return d.Refresh != nil || d.Provenance != nil || d.GDPRDelete != nil || d.Mapping != nil
}

// options applies the spec to a HubSpot destination's current options.
func (d *destinationSpec) options(objectType string, current *store.HubSpotOptions) (*store.HubSpotOptions, error) {
	o := store.HubSpotOptions{}
	if current != nil {
		o = *current
	}
	if d.Refresh != nil {
		o.Refresh = *d.Refresh
	}
	if d.Provenance != nil {
		o.Provenance = *d.Provenance
	}
	if d.GDPRDelete != nil {
		if *d.GDPRDelete && objectType != enrich.ObjectPerson {
			return nil, enrich.Errorf(enrich.KindInvalid, "destination.gdpr_delete deletes contacts: it is for a Loop of people")
		}
		o.GDPRDelete = *d.GDPRDelete
	}
	if d.Mapping != nil {
		if err := hubspot.CheckMapping(objectType, *d.Mapping); err != nil {
			return nil, err
		}
		o.Mapping = *d.Mapping
		if len(o.Mapping) == 0 {
			o.Mapping = nil
		}
	}
	return &o, nil
}

// checkHubSpotTokenText refuses what cannot be a token before HubSpot is asked.
func checkHubSpotTokenText(token string) error {
	if token == "" || len(token) > maxHubSpotToken || strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return enrich.Errorf(enrich.KindInvalid, "destination.token must be a HubSpot private app's access token (pat-...): 1 to %d printable characters, no spaces", maxHubSpotToken)
	}
	return nil
}

// sealHubSpotToken is SealHubSpotToken with the server's secret key file and HubSpot's
// address.
func (s *Server) sealHubSpotToken(ctx context.Context, loopID, objectType, token string, provenance bool) (*store.HubSpotToken, error) {
	return SealHubSpotToken(ctx, s.cfg.Secrets, s.cfg.HubSpotURL, loopID, objectType, token, provenance)
}

// SealHubSpotToken checks a Loop's token with HubSpot at baseURL (hubspot.DefaultURL
// when ""): one cheap read of the Loop's object type, and the provenance property
// created when the Loop asks for it; then seals it under box for the Loop loopID. A
// token HubSpot refuses is 422 hubspot_token_refused; one that could not be checked,
// or no box, 503 hubspot_unavailable; either way nothing is stored. Never inside a
// transaction; no error names the token.
func SealHubSpotToken(ctx context.Context, box *secret.Box, baseURL, loopID, objectType, token string, provenance bool) (*store.HubSpotToken, error) {
	if err := checkHubSpotTokenText(token); err != nil {
		return nil, err
	}
	if box == nil {
		return nil, &enrich.Error{Kind: enrich.KindUnavailable, Code: "hubspot_unavailable",
			Message: "enrichd has no secret key file (--secret-key-file), so a HubSpot token cannot be stored"}
	}
	if baseURL == "" {
		baseURL = hubspot.DefaultURL
	}
	c := &hubspot.Client{BaseURL: baseURL, Token: token, HTTP: hubspot.HTTPClient(0)}
	checkCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := c.CheckToken(checkCtx, objectType)
	if err == nil && provenance {
		err = c.EnsureProvenanceProperty(checkCtx, objectType)
	}
	switch {
	case hubspot.Refused(err):
		scopes := "crm.objects." + hubspot.ObjectPath(objectType) + ".read and .write"
		if provenance {
			scopes += ", and crm.schemas." + hubspot.ObjectPath(objectType) + ".write for provenance"
		}
		return nil, &enrich.Error{Kind: enrich.KindUnprocessable, Code: "hubspot_token_refused",
			Message: "HubSpot refused the token, so the Loop was not saved: " + err.Error() + " (the private app needs the scopes " + scopes + ")"}
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, &enrich.Error{Kind: enrich.KindUnavailable, Code: "hubspot_unavailable",
			Message: "the token could not be checked with HubSpot, so the Loop was not saved; try again: " + err.Error()}
	}
	sealed, err := box.Seal([]byte(token), store.HubSpotTokenLabel(loopID))
	if err != nil {
		return nil, err
	}
	return &store.HubSpotToken{Sealed: sealed, KeyID: box.ID(), Last4: secret.Last4(token)}, nil
}

// newHubSpotLoop completes nl, a Loop asked for with a HubSpot destination: its
// options checked, its token checked with HubSpot and sealed for the Loop's new id.
func (s *Server) newHubSpotLoop(ctx context.Context, nl *store.NewLoop, d *destinationSpec) error {
	if d.URL != nil {
		return enrich.Errorf(enrich.KindInvalid, "destination.url is a webhook's; a hubspot destination takes token")
	}
	if d.Token == nil {
		return enrich.Errorf(enrich.KindInvalid, "destination.token is required: a HubSpot private app's access token (pat-...)")
	}
	if d.Enabled != nil {
		return enrich.Errorf(enrich.KindInvalid, "destination.enabled is changed with PATCH, once the Loop exists")
	}
	opts, err := d.options(nl.ObjectType, nil)
	if err != nil {
		return err
	}
	nl.ID = uuid.Must(uuid.NewV7()).String()
	token, err := s.sealHubSpotToken(ctx, nl.ID, nl.ObjectType, *d.Token, opts.Provenance)
	if err != nil {
		return err
	}
	nl.HubSpot, nl.Options = token, opts
	return nil
}

// hubspotPatch adds to p the change d asks of the HubSpot Loop current: a new token
// (checked and sealed), new options.
func (s *Server) hubspotPatch(ctx context.Context, current *store.Loop, d *destinationSpec, p *store.LoopPatch) error {
	if d.URL != nil {
		return enrich.Errorf(enrich.KindInvalid, "destination.url is a webhook's; this Loop's destination is hubspot")
	}
	var opts *store.HubSpotOptions
	if d.hubspotOptionsSet() {
		var err error
		if opts, err = d.options(current.ObjectType, current.Destination.HubSpotOptions); err != nil {
			return err
		}
		p.HubSpotOptions = opts
	}
	provenance := opts != nil && opts.Provenance && (current.Destination.HubSpotOptions == nil || !current.Destination.HubSpotOptions.Provenance)
	if d.Token != nil {
		token, err := s.sealHubSpotToken(ctx, current.ID, current.ObjectType, *d.Token, opts != nil && opts.Provenance)
		if err != nil {
			return err
		}
		p.HubSpotToken = token
	} else if provenance {
		return enrich.Errorf(enrich.KindInvalid, "turning provenance on creates the property %s in HubSpot: send the token with it", hubspot.ProvenanceProperty)
	}
	return nil
}
