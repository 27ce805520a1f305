package cli

import (
	"errors"
	"fmt"
	"log/slog"

	"enrichd/enrich"
	"enrichd/hubspot"
	"enrichd/server"
	"enrichd/store"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// addHubSpotFlags adds to loops create what a Loop writing into HubSpot takes.
func addHubSpotFlags(c *cobra.Command) {
	f := c.Flags()
	f.Bool("hubspot", false, "write into HubSpot instead of a webhook: the private app's access token (pat-...) is read from standard input, "+
		"checked with HubSpot, sealed under the secret key file and never shown again")
	f.Bool("refresh", false, "with --hubspot: rewrite the values enrichd itself wrote earlier when the record changes (never a value someone typed)")
	f.Bool("provenance", false, "with --hubspot: write which source gave each field into the property enrichd_provenance (created in HubSpot now)")
	f.Bool("gdpr-delete", false, "with --hubspot, people Loops: an erasure deletes the person's HubSpot contact under HubSpot's GDPR delete")
	f.String("hubspot-url", hubspot.DefaultURL, "base URL of HubSpot's API the token is checked against (as serve's)")
	addSecretKeyFlag(f)
}

// createHubSpotLoop creates nl writing into HubSpot, its token read from standard
// input, checked and sealed as the API does.
func createHubSpotLoop(cmd *cobra.Command, db *store.DB, nl store.NewLoop) error {
	f := cmd.Flags()
	refresh, _ := f.GetBool("refresh")
	provenance, _ := f.GetBool("provenance")
	gdprDelete, _ := f.GetBool("gdpr-delete")
	if gdprDelete && nl.ObjectType != enrich.ObjectPerson {
		return errors.New("--gdpr-delete deletes contacts: it is for a Loop of people (--object-type person)")
	}
	org, err := db.FindOrg(cmd.Context(), orgFlag(cmd))
	if err != nil {
		return err
	}
	token, err := readHubSpotToken(cmd)
	if err != nil {
		return err
	}
	nl.OrgID, nl.ID = org.ID, uuid.Must(uuid.NewV7()).String()
	nl.Options = &store.HubSpotOptions{Refresh: refresh, Provenance: provenance, GDPRDelete: gdprDelete}
	if nl.HubSpot, err = sealHubSpotToken(cmd, nl.ID, nl.ObjectType, token, provenance); err != nil {
		return err
	}
	l, err := db.CreateLoop(cmd.Context(), nl)
	if err != nil {
		return err
	}
	return printJSON(cmd, l)
}

func sealHubSpotToken(cmd *cobra.Command, loopID, objectType, token string, provenance bool) (*store.HubSpotToken, error) {
	if secretKeyPath(cmd) == "" {
		return nil, errors.New("--secret-key-file is required with PostgreSQL: give every replica the same file")
	}
	box, err := openSecrets(cmd, slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
	if err != nil {
		return nil, err
	}
	base, _ := cmd.Flags().GetString("hubspot-url")
	return server.SealHubSpotToken(cmd.Context(), box, base, loopID, objectType, token, provenance)
}

// readHubSpotToken reads a token as a vendor key is read: from standard input, never
// an argument, so it stays out of the shell's history.
func readHubSpotToken(cmd *cobra.Command) (string, error) {
	token, err := readVendorKey(cmd)
	if err != nil {
		return "", fmt.Errorf("the HubSpot token: %w", err)
	}
	return token, nil
}

func newSetHubSpotTokenCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "set-hubspot-token ID|SLUG",
		Short: "Replace a HubSpot Loop's token, read from standard input and checked with HubSpot first",
		Args:  cobra.ExactArgs(1),
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			l, err := findLoopArg(cmd, db, args[0])
			if err != nil {
				return err
			}
			if l.Destination.Kind != store.KindHubSpot {
				return fmt.Errorf("loop %s is a webhook's: it has no HubSpot token", l.Slug)
			}
			token, err := readHubSpotToken(cmd)
			if err != nil {
				return err
			}
			sealed, err := sealHubSpotToken(cmd, l.ID, l.ObjectType, token, false)
			if err != nil {
				return err
			}
			if _, err := db.UpdateLoop(cmd.Context(), l.OrgID, l.ID, store.LoopPatch{HubSpotToken: sealed}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "loop %s (%s) now writes into HubSpot with the token %s (HubSpot accepted it)\n", l.Slug, l.ID, sealed.Last4)
			return nil
		}),
	}
	requiredOrg(c)
	c.Flags().String("hubspot-url", hubspot.DefaultURL, "base URL of HubSpot's API the token is checked against (as serve's)")
	addSecretKeyFlag(c.Flags())
	return c
}
