package cli

import (
	"encoding/csv"
	"fmt"

	"enrichd/enrich/source"

	"github.com/spf13/cobra"
)

// maxSimSample bounds sim sample's --count: past it the sim's companies run out of
// people a work email finds alone.
const maxSimSample = 100

func newSimCommand() *cobra.Command {
	sim := &cobra.Command{
		Use:   "sim",
		Short: "The synthetic network of --sources sim",
	}
	sample := &cobra.Command{
		Use:         "sample",
		Annotations: map[string]string{noDB: "yes"},
		Short:       "Print people the sim source finds by work email, as a CSV to upload as a batch",
		Long: `Print, as CSV, people of the synthetic network that serve --sources sim finds by
their work email: each address belongs to the one current employee of its company
under that name, so a batch of them (the dashboard's Upload, or POST /v1/batches)
succeeds row by row. The columns: email (the input), and sim_name and sim_company,
kept as they are and written back beside the results to compare. The same --count
prints the same people.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			n, _ := cmd.Flags().GetInt("count")
			if n < 1 || n > maxSimSample {
				return fmt.Errorf("--count must be from 1 to %d", maxSimSample)
			}
			people := (&source.Sim{}).Sample(n)
			w := csv.NewWriter(cmd.OutOrStdout())
			w.Write([]string{"email", "sim_name", "sim_company"})
			for _, p := range people {
				w.Write([]string{p.Email, p.FullName, p.Company})
			}
			w.Flush()
			return w.Error()
		},
	}
	sample.Flags().Int("count", 10, fmt.Sprintf("how many people, 1 to %d", maxSimSample))
	sim.AddCommand(sample)
	return sim
}
