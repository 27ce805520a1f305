package cli

import (
	"fmt"
	"io"
	"os"

	"enrichd/enrich"

	"github.com/spf13/cobra"
)

func newImportCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import FILE.jsonl",
		Short: "Import companies and people into the dataset source (all lines or none); - reads standard input",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The input is opened before the database, so a mistyped file name
			// leaves no empty database behind.
			var in io.Reader = cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			db, err := openPersonalDB(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			host, _ := cmd.Flags().GetString("network-host")
			stats, err := db.Import(cmd.Context(), in, enrich.Normalizer{NetworkHost: host})
			if err != nil {
				return fmt.Errorf("%s: %w (nothing was imported)", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported %d companies and %d people\n", stats.Companies, stats.People)
			return nil
		},
	}
	cmd.Flags().String("network-host", enrich.DefaultNetworkHost, "host of the professional network whose URLs the file holds")
	addSecretKeyFlag(cmd.Flags())
	return cmd
}
