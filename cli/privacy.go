package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"enrichd/enrich/source"
	"enrichd/server"
	"enrichd/store"

	"github.com/spf13/cobra"
)

func newPrivacyCommand() *cobra.Command {
	privacy := &cobra.Command{Use: "privacy", Short: "What this installation holds about people, where it sends them, and for how long"}
	def := server.DefaultConfig()
	report := &cobra.Command{
		Use:   "report",
		Short: "Print the record of processing of this installation: sources and what each receives, retention in force, what is held",
		Long: `Print, for a team's record of processing, this installation as serve would run it
with the same flags and ENRICHD_* variables: the sources asked, in order, who receives
what each sends (domains, company pages, profile URLs, work addresses, name words) and
whether a vendor's key is set here; each retention setting in force; and how many
records, tasks, gathered profiles, deliveries, batches and watches the database holds
now. --json prints the same as one JSON object. See docs/privacy.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// The flags first: a refused one opens no database.
			names, err := sourceNames(cmd)
			if err != nil {
				return err
			}
			cfg := server.DefaultConfig()
			retentionFlags(cmd.Flags(), &cfg)
			return withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
				held, err := db.Holdings(cmd.Context())
				if err != nil {
					return err
				}
				path, _ := cmd.Flags().GetString("db")
				r := privacyReport{Database: redactURL(path), Sources: reportSources(cmd, names, held), Retention: reportRetention(cfg), Held: held}
				if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
					return printJSON(cmd, r)
				}
				return r.print(cmd.OutOrStdout())
			})(cmd, args)
		},
	}
	f := report.Flags()
	addSourcesFlag(f)
	addRetentionFlags(f, def)
	for _, name := range []string{"enrichlayer", "pdl", "apollo"} {
		v := keyedSources[name]
		f.String(name+"-url", v.def.BaseURL, "base URL of the "+v.title+" API (as serve's)")
	}
	f.Bool("json", false, "print the report as one JSON object")
	privacy.AddCommand(report)
	return privacy
}

// privacyReport is what `privacy report` prints.
type privacyReport struct {
	Database  string           `json:"database"`
	Sources   []reportedSource `json:"sources"`
	Retention []retentionRule  `json:"retention"`
	Held      store.Holdings   `json:"held"`
}

// reportedSource is a source serve asks, and what it sends to whom.
type reportedSource struct {
	Name string `json:"name"`
	// Recipient is who receives what it sends; "" when nothing leaves the installation.
	Recipient string        `json:"recipient"`
	URL       string        `json:"url,omitempty"`
	Sends     []source.Sent `json:"sends"`
	// KeyEnv and KeySet: the variable a vendor's installation key is read from, and
	// whether it is set where the report runs (serve refuses to start without it).
	KeyEnv string `json:"key_env,omitempty"`
	KeySet *bool  `json:"key_set,omitempty"`
	// OwnKeys counts the organizations whose tasks reach the vendor under their own key.
	OwnKeys int64 `json:"organizations_with_own_key"`
}

// retentionRule is how long one kind of data is kept, and what decides it.
type retentionRule struct {
	What string `json:"what"`
	// Setting is the serve flag that decides it, or what else does; "" when it is
	// kept until something happens rather than for a time.
	Setting string `json:"setting"`
	// Kept is the period in the flags' form (90d, 36h0m0s), "for ever", or in words
	// what ends it; Seconds is the period, null when there is none.
	Kept    string `json:"kept"`
	Seconds *int64 `json:"seconds"`
	// Note says why the period in force is not the setting's.
	Note string `json:"note,omitempty"`
}

// vendorKeyEnv is where each vendor's installation key is read from.
var vendorKeyEnv = map[string]string{"enrichlayer": source.EnrichLayerKeyEnv, "pdl": source.PDLKeyEnv, "apollo": source.ApolloKeyEnv}

func reportSources(cmd *cobra.Command, names []string, held store.Holdings) []reportedSource {
	out := []reportedSource{}
	for _, name := range names {
		d := source.Disclosures[name]
		s := reportedSource{Name: name, Recipient: d.Recipient, Sends: append([]source.Sent{}, d.Sends...), OwnKeys: held.OwnKeys[name]}
		if env, ok := vendorKeyEnv[name]; ok {
			s.URL, _ = cmd.Flags().GetString(name + "-url")
			set := strings.TrimSpace(os.Getenv(env)) != ""
			s.KeyEnv, s.KeySet = env, &set
		}
		out = append(out, s)
	}
	return out
}

func reportRetention(cfg server.Config) []retentionRule {
	period := func(what, setting string, d time.Duration) retentionRule {
		if d <= 0 {
			return retentionRule{What: what, Setting: setting, Kept: "for ever"}
		}
		secs := int64(d / time.Second)
		v := days(d)
		return retentionRule{What: what, Setting: setting, Kept: v.String(), Seconds: &secs}
	}
	until := func(what, until string) retentionRule { return retentionRule{What: what, Kept: until} }
	candidates := period("profiles an ambiguous email lookup gathered (other people's), for a retry with a hint", "--retain-candidates", cfg.KeepGathered())
	if cfg.RetainCandidates <= 0 || cfg.RetainCandidates > cfg.KeepGathered() {
		set, window := days(cfg.RetainCandidates), days(cfg.Freshness)
		candidates.Note = "--retain-candidates is " + set.String() + ": the freshness window, " + window.String() + ", bounds it"
	}
	return []retentionRule{
		period("settled tasks: what was asked (input, target), the answer, the sources asked; their idempotency keys", "--retain", cfg.Retain),
		period("webhook deliveries sent or failed for good, with their payloads", "--retain", cfg.Retain),
		period("batches, with their rows as uploaded", "--retain", cfg.Retain),
		period("stored records (companies, people, their keys and positions) no source has refreshed", "--retain-records", cfg.RetainRecords),
		candidates,
		period("subjects a vendor did not know", "the freshness window", cfg.Freshness),
		period("the audit log: who enriched, exported, erased or suppressed whom (the subject as sent, until an erasure; its keyed hash), "+
			"keys and users added or revoked, sign-ins", "--retain-audit", cfg.RetainAudit),
		until("webhook deliveries not yet sent", "until sent or failed for good (7 attempts over about 9 hours)"),
		until("watches, with the last result each keeps", "until the watch or its Loop is deleted"),
		until("what a HubSpot Loop wrote (the object's id, keyed hashes of the values)", "until the Loop is deleted or the person erased"),
		until("the imported dataset", "as long as the team keeps it (importing a record again replaces it)"),
		until("logs", "wherever serve's standard error goes (journald under the systemd unit): the system's retention"),
	}
}

func (r privacyReport) print(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "Record of processing: enrichd on %s\n\n", r.Database)
	fmt.Fprintln(w, "Sources, asked in this order (--sources):")
	for _, s := range r.Sources {
		if s.Recipient == "" {
			fmt.Fprintf(w, "  %s\tnothing leaves this installation\n", s.Name)
			continue
		}
		var sends []string
		for _, k := range s.Sends {
			sends = append(sends, k.Describe())
		}
		to := s.Recipient
		if s.URL != "" {
			to += " (" + s.URL + ")"
		}
		fmt.Fprintf(w, "  %s\tto %s: %s\n", s.Name, to, strings.Join(sends, "; "))
		if s.KeySet != nil {
			state := "set"
			if !*s.KeySet {
				state = "not set here"
			}
			fmt.Fprintf(w, "  \tinstallation key %s: %s; organizations with their own key: %d\n", s.KeyEnv, state, s.OwnKeys)
		}
	}
	fmt.Fprintln(w, "\nRetention in force:")
	for _, rule := range r.Retention {
		if rule.Setting == "" {
			continue
		}
		what := rule.What
		if rule.Note != "" {
			what += " (" + rule.Note + ")"
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\n", rule.Setting, rule.Kept, what)
	}
	fmt.Fprintln(w, "\nKept until something happens:")
	for _, rule := range r.Retention {
		if rule.Setting == "" {
			fmt.Fprintf(w, "  %s: %s\n", rule.What, rule.Kept)
		}
	}
	h := r.Held
	fmt.Fprintln(w, "\nHeld now:")
	for _, row := range [][2]string{
		{"stored records", fmt.Sprintf("%d companies, %d people", h.StoredCompanies, h.StoredPeople)},
		{"imported dataset", fmt.Sprintf("%d companies, %d people", h.DatasetCompanies, h.DatasetPeople)},
		{"tasks", strconv.FormatInt(h.Tasks, 10)},
		{"gathered profiles", fmt.Sprintf("%d, for %d ambiguous %s", h.EmailCandidates, h.EmailGatherings, plural(h.EmailGatherings, "address", "addresses"))},
		{"webhook deliveries", fmt.Sprintf("%d, %d not yet sent", h.Deliveries, h.PendingDeliveries)},
		{"Loops (destinations)", fmt.Sprintf("%d, %d of them into HubSpot (%d %s written there)", h.Loops, h.HubSpotLoops,
			h.HubSpotWrites, plural(h.HubSpotWrites, "object", "objects"))},
		{"batches", fmt.Sprintf("%d, with %d rows", h.Batches, h.BatchRows)},
		{"watches", strconv.FormatInt(h.Watches, 10)},
		{"subjects a vendor did not know", strconv.FormatInt(h.SourceMisses, 10)},
		{"audit log entries", strconv.FormatInt(h.AuditEntries, 10)},
	} {
		fmt.Fprintf(w, "  %s\t%s\n", row[0], row[1])
	}
	return w.Flush()
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
