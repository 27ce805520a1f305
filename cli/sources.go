package cli

import (
	"fmt"
	"math"
	"os"
	"strings"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/netguard"
	"enrichd/server"
	"enrichd/store"

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
	for _, name := range pricedSources {
		f.Int64(name+"-monthly-budget", 0, name+" source: the installation's monthly cap of its vendor credits, over every organization's calls with the installation's key; 0: none")
		f.Float64(name+"-credit-usd", 0, name+" source: what one of its vendor credits costs in USD, to show spend in money; 0: not shown")
	}
	f.Bool("web-allow-private", false, "web source: also fetch sites on private and loopback addresses, over http too (local development only)")
}

// pricedSources are the sources that charge vendor credits: budgets and prices are
// set for them.
var pricedSources = []string{"sim", "enrichlayer", "pdl", "apollo"}

// sourceEconomics reads the installation's budgets and credit prices of serve's flags.
func sourceEconomics(cmd *cobra.Command) (budgets map[string]int64, usd map[string]float64, err error) {
	budgets, usd = map[string]int64{}, map[string]float64{}
	for _, name := range pricedSources {
		b, _ := cmd.Flags().GetInt64(name + "-monthly-budget")
		if b < 0 || b > store.MaxBudget {
			return nil, nil, fmt.Errorf("--%s-monthly-budget must be from 0 (none) to %d vendor credits", name, store.MaxBudget)
		}
		if b > 0 {
			budgets[name] = b
		}
		p, _ := cmd.Flags().GetFloat64(name + "-credit-usd")
		if math.IsNaN(p) || math.IsInf(p, 0) || p < 0 || p > 1e6 {
			return nil, nil, fmt.Errorf("--%s-credit-usd must be a price from 0 (not shown) to 1000000", name)
		}
		if p > 0 {
			usd[name] = p
		}
	}
	return budgets, usd, nil
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
		keyEnv := vendorKeyEnv[name]
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

// fillRow is one object type's fill list as `sources fill` prints it: Default when
// the organization keeps the server's (--fill-company or --fill-person of serve).
type fillRow struct {
	Object  string   `json:"object"`
	Fields  []string `json:"fields"`
	Default bool     `json:"default"`
}

func newSourcesCommand() *cobra.Command {
	sources := &cobra.Command{Use: "sources", Short: "Configure how the sources answer an organization's tasks: fill lists, its own vendor keys"}
	fill := listCommand(&cobra.Command{
		Use:   "fill",
		Short: "Set or show the fields the sources are asked in turn to fill for an organization",
		Long: `fill sets the fields the sources are asked in turn to fill for the organization's
tasks, per object type: while a field of the list is still empty, the next source that
can answer is asked. --company and --person take comma-separated field names; a flag
left out keeps that list, an empty value ('') clears it back to the server's default
(serve's --fill-company and --fill-person). With neither flag it prints the lists, and
whether each is the server's default.

Company fields: ` + strings.Join(enrich.CompanyFields, ", ") + `
Person fields: ` + strings.Join(enrich.PersonFields, ", "),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// The lists are read before the database is opened: a refused name
			// changes nothing and opens nothing.
			var u store.FillUpdate
			for _, v := range []struct {
				flag, object string
				list         **[]string
			}{{"company", enrich.ObjectCompany, &u.Company}, {"person", enrich.ObjectPerson, &u.Person}} {
				if !cmd.Flags().Changed(v.flag) {
					continue
				}
				raw, _ := cmd.Flags().GetString(v.flag)
				fields, err := enrich.ParseFields(v.object, raw)
				if err != nil {
					return fmt.Errorf("--%s: %w", v.flag, err)
				}
				*v.list = &fields
			}
			return withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
				ctx := cmd.Context()
				org, err := db.FindOrg(ctx, orgFlag(cmd))
				if err != nil {
					return err
				}
				if u.Company != nil || u.Person != nil {
					if err := db.SetFillLists(ctx, org.ID, u); err != nil {
						return err
					}
				}
				own, err := db.OrgFillLists(ctx, org.ID)
				if err != nil {
					return err
				}
				rows := []fillRow{
					{Object: enrich.ObjectCompany, Fields: orEmpty(own.Company), Default: own.Company == nil},
					{Object: enrich.ObjectPerson, Fields: orEmpty(own.Person), Default: own.Person == nil},
				}
				return printList(cmd, rows, []string{"OBJECT", "FIELDS"}, func(r fillRow) []string {
					if r.Default {
						return []string{r.Object, "the server's default (serve --fill-" + r.Object + ")"}
					}
					return []string{r.Object, strings.Join(r.Fields, ",")}
				})
			})(cmd, args)
		},
	})
	requiredOrg(fill)
	fill.Flags().String("company", "", "company fields to fill, comma-separated; '' goes back to the server's default")
	fill.Flags().String("person", "", "person fields to fill, comma-separated; '' goes back to the server's default")
	sources.AddCommand(fill, newSourcesBudgetCommand())
	addSourceKeyCommands(sources)
	return sources
}

// orEmpty is list, or [] for none, which --json prints as an array.
func orEmpty(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}
