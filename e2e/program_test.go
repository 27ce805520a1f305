package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"enrichd/cli"
)

// schema is SQLite's schema, the one the binary embeds: the stores the tests open
// and the commands run in this process migrate with the same text.
var schema = func() string {
	b, err := os.ReadFile(filepath.Join("..", "schema.sql"))
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// version is what a binary built without the Makefile's stamp says it is.
const version = "dev"

// run runs a command in this process as the binary's run does (the commands main
// builds, on the same schema), so that a test can run hundreds of them without
// starting a process for each. What main adds of its own, the "enrichd: " line a
// failed command prints and the signals serve stops on, is tested on the binary.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := cli.NewRootCommand(cli.Program{Schema: schema, Version: version}, stdout, stderr)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

// buildEnrichd builds this program with go build into a temporary directory.
func buildEnrichd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "enrichd")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	if out, err := exec.Command(goTool, "build", "-o", bin, "..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// failBinary runs bin with args, which must fail as a command does (exit status 1),
// and returns what it printed on standard error, less the last newline.
func failBinary(t *testing.T, bin string, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("enrichd %s: %v, want exit status 1; stderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSuffix(stderr.String(), "\n")
}
