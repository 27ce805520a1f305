// Command enrichd is a self-hosted company and person enrichment service: one binary,
// one SQLite file. `enrichd serve` runs the API and its workers; the other commands
// manage organizations, keys, credits and the imported dataset, also while serve runs.
// The commands live in package cli; main builds the root command and runs it.
package main

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"enrichd/cli"
)

//go:embed schema.sql
var schema string

// version is the release this binary was built as, stamped by the Makefile:
// go build -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

// errorLine is how a failed command reports its error: one "enrichd: " prefix, also
// when the error wraps one of the Go client, whose errors start with "enrichd: " of
// their own for the programs that import it.
func errorLine(err error) string {
	msg := strings.TrimPrefix(err.Error(), "enrichd: ")
	return "enrichd: " + strings.ReplaceAll(msg, ": enrichd: ", ": ")
}

// run is the whole program, so tests can start it as a user would.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := cli.NewRootCommand(cli.Program{Schema: schema, Version: version}, stdout, stderr)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}
