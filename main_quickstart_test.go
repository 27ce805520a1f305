//go:build unix

package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestQuickstart runs examples/quickstart.sh as a new user would, against a binary
// built with go build, a fresh temporary directory and a free port, and checks what it
// prints, that it stopped its server and cleaned up, and that the commands the README's
// Quickstart shows are the ones the script runs. With the port already taken, by an HTTP server (a serve left
// from an earlier step) or by a program that is not one, the script fails saying why,
// and leaves neither a temporary directory nor a process behind.
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
	for _, c := range quickstartCommands(t, string(readme)) { // the README shows what the script runs
		if !strings.Contains(string(script), strings.Replace(c, "./enrichd", `"$ENRICHD"`, 1)) {
			t.Errorf("the README's Quickstart runs %q, which examples/quickstart.sh does not", c)
		}
	}

	bin := filepath.Join(t.TempDir(), "enrichd")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	build := exec.Command(goTool, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	t.Run("runs", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		is.NoErr(err)
		addr := l.Addr().String()
		l.Close()

		out, errOut, err := runQuickstart(t, bin, addr)
		if err != nil {
			t.Fatalf("bash examples/quickstart.sh: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
		}
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
		// The server is gone.
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("something still listens on %s after the script ended", addr)
		}
	})

	t.Run("a setup step fails", func(t *testing.T) {
		t.Parallel()
		// A binary whose every command fails stops the script at its first step,
		// before any server: the temporary directory is removed all the same.
		failing, err := exec.LookPath("false")
		if err != nil {
			t.Skip("no false command here")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if out, _, err := runQuickstart(t, failing, addr); err == nil {
			t.Fatalf("the script succeeded with a failing binary; stdout:\n%s", out)
		}
	})

	t.Run("port taken by a server", func(t *testing.T) {
		t.Parallel()
		// Another server answers on the port, /readyz included, as a serve started by
		// hand would: the script must not take it for its own.
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
		}))
		defer other.Close()
		addr := other.Listener.Addr().String()
		out, errOut, err := runQuickstart(t, bin, addr)
		if err == nil {
			t.Fatalf("the script succeeded beside another server; stdout:\n%s", out)
		}
		contains(t, errOut, "something already listens on "+addr+"; stop it or set ADDR=")
		if strings.Contains(out, "created organization") {
			t.Errorf("the script set up a database before finding the port taken; stdout:\n%s", out)
		}
	})

	t.Run("port taken by another program", func(t *testing.T) {
		t.Parallel()
		// Not an HTTP server: it accepts and hangs up, so only serve's own failure to
		// listen can tell.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		addr := l.Addr().String()
		out, errOut, err := runQuickstart(t, bin, addr)
		if err == nil {
			t.Fatalf("the script succeeded though its server could not listen; stdout:\n%s", out)
		}
		contains(t, errOut, "enrichd serve did not become ready; its log:")
		contains(t, errOut, "address already in use") // serve's own reason, from its log
	})
}

// runQuickstart runs the script with bin on addr in its own process group, and fails
// the test if the script left its temporary directory or any process behind. On the
// timeout the whole group is killed, the server the script started included.
func runQuickstart(t *testing.T, bin, addr string) (stdout, stderr string, err error) {
	t.Helper()
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("examples", "quickstart.sh"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "TMPDIR=" + tmp, "ENRICHD=" + bin, "ADDR=" + addr}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second // a child holding the output open does not hold the test
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()

	// The group is the script and everything it started: nothing of it may be left.
	if kerr := syscall.Kill(-cmd.Process.Pid, 0); !errors.Is(kerr, syscall.ESRCH) {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Errorf("the script left a process running (kill -0 on its group: %v)", kerr)
	}
	left, rerr := os.ReadDir(tmp)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if len(left) != 0 {
		t.Errorf("the script left %d entries in its temporary directory, the first %s", len(left), left[0].Name())
	}
	return out.String(), errOut.String(), err
}

// quickstartCommands are the enrichd commands of the README's Quickstart that set up
// the database (create, grant, import), as the README writes them; serve and the
// requests differ in the script only by its address and log file.
func quickstartCommands(t *testing.T, readme string) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Quickstart\n")
	if !ok {
		t.Fatal("README has no Quickstart section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var commands []string
	for _, line := range strings.Split(section, "\n") {
		line = strings.TrimSpace(line)
		if strings.Contains(line, "./enrichd ") && !strings.Contains(line, "./enrichd serve") && !strings.HasPrefix(line, "(") {
			commands = append(commands, line)
		}
	}
	if len(commands) < 4 {
		t.Fatalf("found %d setup commands in the README's Quickstart: %q", len(commands), commands)
	}
	return commands
}
