package cli

import (
	"fmt"
	"os"
	"strings"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/netguard"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/time/rate"
)

// knownSources are the names --sources accepts.
const knownSources = "dataset, sim, web, enrichlayer, pdl"

// addSourceFlags adds the flags of the web and vendor sources to serve.
func addSourceFlags(f *pflag.FlagSet) {
	f.String("enrichlayer-url", "https://enrichlayer.com", "enrichlayer source: base URL of the Enrich Layer API (key from "+source.EnrichLayerKeyEnv+")")
	f.String("enrichlayer-rate", "5/5", "enrichlayer source: requests per second/burst to Enrich Layer; 0 turns the limit off")
	f.Int("enrichlayer-concurrency", 4, "enrichlayer source: requests in flight to Enrich Layer at once")
	f.String("pdl-url", "https://api.peopledatalabs.com", "pdl source: base URL of the People Data Labs API (key from "+source.PDLKeyEnv+")")
	f.String("pdl-rate", "1/5", "pdl source: requests per second/burst to People Data Labs; 0 turns the limit off")
	f.Int("pdl-concurrency", 4, "pdl source: requests in flight to People Data Labs at once")
	f.Bool("web-allow-private", false, "web source: also fetch sites on private and loopback addresses, over http too (local development only)")
}

// extraSource builds a source other than dataset and sim, or says why it cannot.
func extraSource(cmd *cobra.Command, name string) (enrich.Source, error) {
	f := cmd.Flags()
	host, _ := f.GetString("network-host")
	logger, err := newLogger(cmd)
	if err != nil {
		return nil, err
	}
	switch name {
	case "web":
		allow, _ := f.GetBool("web-allow-private")
		return &source.Web{NetworkHost: host, Policy: netguard.Policy{AllowPrivate: allow}, AllowHTTP: allow, Logger: logger}, nil
	case "enrichlayer", "pdl":
		cfg := source.VendorConfig{NetworkHost: host, Logger: logger}
		keyEnv := map[string]string{"enrichlayer": source.EnrichLayerKeyEnv, "pdl": source.PDLKeyEnv}[name]
		cfg.APIKey = os.Getenv(keyEnv)
		if strings.TrimSpace(cfg.APIKey) == "" {
			return nil, fmt.Errorf("--sources %s needs its API key in the environment variable %s", name, keyEnv)
		}
		cfg.BaseURL, _ = f.GetString(name + "-url")
		cfg.Concurrency, _ = f.GetInt(name + "-concurrency")
		if cfg.Concurrency < 1 {
			return nil, fmt.Errorf("--%s-concurrency must be at least 1", name)
		}
		r, err := rateFlag(cmd, logger, name+"-rate")
		if err != nil {
			return nil, err
		}
		cfg.Rate, cfg.Burst = r.Limit, r.Burst
		if r.Limit == 0 {
			cfg.Rate = rate.Inf
		}
		var src enrich.Source
		if name == "enrichlayer" {
			src, err = source.NewEnrichLayer(cfg)
		} else {
			src, err = source.NewPDL(cfg)
		}
		if err != nil {
			return nil, fmt.Errorf("--sources %s: %w (--%s-url)", name, err, name)
		}
		return src, nil
	}
	return nil, fmt.Errorf("--sources: unknown source %q (known: %s)", name, knownSources)
}

// linkWeb gives the web source the others to ask for the company page a site links to.
func linkWeb(sources []enrich.Source) {
	for _, s := range sources {
		if w, ok := s.(*source.Web); ok {
			for _, other := range sources {
				if other != s {
					w.Network = append(w.Network, other)
				}
			}
		}
	}
}
