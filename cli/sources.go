package cli

import (
	"fmt"
	"os"
	"strings"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/netguard"
	"enrichd/server"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/time/rate"
)

// knownSources are the names --sources accepts.
const knownSources = "dataset, sim, web, enrichlayer, pdl, apollo"

// addSourceFlags adds the flags of the web and vendor sources to serve.
func addSourceFlags(f *pflag.FlagSet) {
	for _, v := range []struct {
		name, title, keyEnv string
		def                 source.VendorConfig
	}{
		{"enrichlayer", "Enrich Layer", source.EnrichLayerKeyEnv, source.EnrichLayerDefaults},
		{"pdl", "People Data Labs", source.PDLKeyEnv, source.PDLDefaults},
		{"apollo", "Apollo", source.ApolloKeyEnv, source.ApolloDefaults},
	} {
		f.String(v.name+"-url", v.def.BaseURL, v.name+" source: base URL of the "+v.title+" API (key from "+v.keyEnv+")")
		f.String(v.name+"-rate", rateString(server.Rate{Limit: v.def.Rate, Burst: v.def.Burst}), v.name+" source: requests per second/burst to "+v.title+"; 0 turns the limit off")
		f.Int(v.name+"-concurrency", v.def.Concurrency, v.name+" source: requests in flight to "+v.title+" at once")
	}
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
	case "enrichlayer", "pdl", "apollo":
		cfg := source.VendorConfig{NetworkHost: host, Logger: logger}
		keyEnv := map[string]string{"enrichlayer": source.EnrichLayerKeyEnv, "pdl": source.PDLKeyEnv, "apollo": source.ApolloKeyEnv}[name]
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
		switch name {
		case "enrichlayer":
			src, err = source.NewEnrichLayer(cfg)
		case "pdl":
			src, err = source.NewPDL(cfg)
		default:
			src, err = source.NewApollo(cfg)
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
