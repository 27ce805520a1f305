package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

// built is the binary the tests run: built once for the package, by the first test
// that needs it, into the directory TestMain made.
var built struct {
	dir  string
	once sync.Once
	path string
	err  error
}

// enrichdBinary is this program built with go build, as a user builds it.
func enrichdBinary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		bin := filepath.Join(built.dir, "enrichd")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goTool); err != nil {
			goTool = "go"
		}
		if out, err := exec.Command(goTool, "build", "-o", bin, "..").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		built.path = bin
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// serveProcess is a serve process of the binary.
type serveProcess struct {
	name   string
	cmd    *exec.Cmd
	base   string      // http://127.0.0.1:PORT
	log    *syncBuffer // what it wrote, on stdout and stderr
	exited chan struct{}
	err    error // what Wait returned, once exited is closed
}

// startBinaryServe starts `enrichd serve` from bin with args, env added to this process's
// environment, and waits until it listens; it is killed when the test ends.
func startBinaryServe(t *testing.T, bin, name string, env []string, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return startServeProcess(t, name, cmd)
}

// startServeProcess starts cmd, a command line that runs serve with a JSON log, and
// waits until it listens; it is killed when the test ends, and its log shown then if
// the test failed.
func startServeProcess(t *testing.T, name string, cmd *exec.Cmd) *serveProcess {
	t.Helper()
	p := &serveProcess{name: name, cmd: cmd, log: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1) // for waitListening
	go func() {
		p.err = cmd.Wait()
		done <- p.err
		close(p.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("%s's log:\n%s", p.name, p.log.String())
		}
	})
	p.base = waitListening(t, p.log, done)
	return p
}

// stop ends serve as SIGTERM does, and returns all it wrote.
func (p *serveProcess) stop(t *testing.T) string {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.err != nil {
			t.Fatalf("%s: %v\n%s", p.name, p.err, p.log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop\n%s", p.name, p.log.String())
	}
	return p.log.String()
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
