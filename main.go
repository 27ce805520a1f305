// Command enrichd is a self-hosted company and person enrichment service: one binary,
// one SQLite file. `enrichd serve` runs the API and its workers; the other commands
// manage organizations, keys, credits and the imported dataset, also while serve runs.
package main

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

//go:embed schema.sql
var schema string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "enrichd:", err)
		os.Exit(1)
	}
}

// run is the whole program, so tests can start it as a user would.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newRootCommand(stdout, stderr)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}
