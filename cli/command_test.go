package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"enrichd/bench"
	"enrichd/cli"
)

// runCommand runs the real enrichd command line with args, in this process.
func runCommand(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut strings.Builder
	cmd := cli.NewRootCommand(cli.Program{Schema: schema, Version: "test"}, &out, &errOut)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

// mustRun runs args (runCommand) and fails the test when the command fails.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := runCommand(t, args...)
	if err != nil {
		t.Fatalf("enrichd %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// failRun runs args, which must fail, and returns the error's text.
func failRun(t *testing.T, args ...string) string {
	t.Helper()
	out, _, err := runCommand(t, args...)
	if err == nil {
		t.Fatalf("enrichd %s: succeeded, want an error; stdout: %q", strings.Join(args, " "), out)
	}
	return err.Error()
}

// benchReport runs enrichd bench --json with args (mustRun) and returns its report.
func benchReport(t *testing.T, args ...string) bench.Report {
	t.Helper()
	out := mustRun(t, append([]string{"bench", "--json"}, args...)...)
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("enrichd bench --json %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return rep
}

func contains(t *testing.T, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Errorf("%q does not contain %q", got, want)
	}
}
