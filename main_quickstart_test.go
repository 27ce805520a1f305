package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestQuickstart runs examples/quickstart.sh as a new user would, against a binary
// built with go build, a fresh temporary directory and a free port, and checks what it
// prints, that it stopped its server and cleaned up, and that the README's Quickstart
// block is the script.
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the quickstart script")
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the quickstart needs %s, which is not installed here", tool)
		}
	}
	t.Parallel()
	is := is.New(t)

	script, err := os.ReadFile(filepath.Join("examples", "quickstart.sh"))
	is.NoErr(err)
	readme, err := os.ReadFile("README.md")
	is.NoErr(err)
	is.Equal(quickstartBlock(t, string(readme)), scriptCommands(t, string(script))) // the README shows the script as it runs

	bin := filepath.Join(t.TempDir(), "enrichd")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	build := exec.Command(goTool, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	addr := l.Addr().String()
	l.Close()
	tmp := t.TempDir()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("examples", "quickstart.sh"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "TMPDIR=" + tmp, "ENRICHD=" + bin, "ADDR=" + addr}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bash examples/quickstart.sh: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	contains(t, out, "created organization acme")
	contains(t, out, "granted 100 credits")
	contains(t, out, "imported 3 companies and 3 people")
	ls := lines(out)
	is.True(len(ls) >= 2)
	company, person := ls[len(ls)-2], ls[len(ls)-1]
	for _, want := range []string{`"object_type":"company"`, `"status":"succeeded"`, `"name":"Acme"`, `"domain":"acme.com"`} {
		contains(t, company, want)
	}
	for _, want := range []string{`"object_type":"person"`, `"status":"succeeded"`, `"full_name":"Jane Doe"`, `"method":"exact"`, `"credits_charged":3`} {
		contains(t, person, want)
	}

	// The server is gone and the temporary directory removed.
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("something still listens on %s after the script ended", addr)
	}
	left, err := os.ReadDir(tmp)
	is.NoErr(err)
	is.Equal(len(left), 0) // the script removed its directory
}

// quickstartBlock is the first ```sh block of the README's Quickstart section.
func quickstartBlock(t *testing.T, readme string) string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Quickstart\n")
	if !ok {
		t.Fatal("README has no Quickstart section")
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal("README's Quickstart has no sh block")
	}
	block, _, ok = strings.Cut(block, "```\n")
	if !ok {
		t.Fatal("README's Quickstart sh block is not closed")
	}
	return block
}

// scriptCommands is the script without its opening comment lines.
func scriptCommands(t *testing.T, script string) string {
	t.Helper()
	i := strings.Index(script, "\nset -euo pipefail\n")
	if i < 0 {
		t.Fatal("examples/quickstart.sh does not start its commands with set -euo pipefail")
	}
	return script[i+1:]
}
