//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

	script, err := os.ReadFile(filepath.Join("..", "examples", "quickstart.sh"))
	is.NoErr(err)
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	is.NoErr(err)
	for _, c := range quickstartCommands(t, string(readme)) { // the README shows what the script runs
		if !strings.Contains(string(script), strings.Replace(c, "./enrichd", `"$ENRICHD"`, 1)) {
			t.Errorf("the README's Quickstart runs %q, which examples/quickstart.sh does not", c)
		}
	}

	bin := enrichdBinary(t)

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

	t.Run("pasted from the README", func(t *testing.T) {
		t.Parallel()
		pastedQuickstart(t, bin, string(readme))
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
	cmd.Dir = ".." // the checkout, where a reader runs it
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
// the database (create, grant, import), as the README writes them; serve, the wait
// for it and the requests differ in the script by its address and log file.
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
		if strings.Contains(line, "./enrichd ") && !strings.Contains(line, "./enrichd serve") && !strings.Contains(line, "./enrichd wait-ready") && !strings.HasPrefix(line, "(") && !strings.HasPrefix(line, "`") {
			commands = append(commands, line)
		}
	}
	if len(commands) < 4 {
		t.Fatalf("found %d setup commands in the README's Quickstart: %q", len(commands), commands)
	}
	return commands
}

// pastedQuickstart runs the README's Quickstart as a newcomer does who pastes its
// blocks into bash at once, in a directory laid out as the checkout (the example
// records, .gitignore), with the port as the one change: localhost:8080 becomes a free
// one, which serve and wait-ready read from ENRICHD_ADDR. `go build` is a stand-in
// that copies the built binary. Every step prints what the README says it does,
// a store hit's 200 carries the task and no data as step 5 says, and everything the
// steps made in the checkout is ignored by its .gitignore, while serve runs and once
// it has stopped.
func pastedQuickstart(t *testing.T, bin, readme string) {
	is := is.New(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	addr := l.Addr().String()
	l.Close()

	tmp := t.TempDir()
	checkout, shims := filepath.Join(tmp, "checkout"), filepath.Join(tmp, "shims")
	is.NoErr(os.MkdirAll(filepath.Join(checkout, "examples"), 0o755))
	is.NoErr(os.MkdirAll(shims, 0o755))
	for _, f := range []string{".gitignore", filepath.Join("examples", "people-and-companies.jsonl")} {
		b, err := os.ReadFile(filepath.Join("..", f))
		is.NoErr(err)
		is.NoErr(os.WriteFile(filepath.Join(checkout, f), b, 0o644))
	}
	is.NoErr(os.WriteFile(filepath.Join(shims, "go"), []byte(`#!/bin/sh
[ "$*" = "build -o enrichd ." ] && exec cp "$ENRICHD_BUILT" enrichd
echo "the test's go stands in for go build -o enrichd . alone, not: go $*" >&2; exit 1
`), 0o755))

	paste := strings.Join(quickstartBlocks(t, readme), "\n")
	if !strings.Contains(paste, "localhost:8080") {
		t.Fatal("the README's Quickstart no longer names localhost:8080: the test's port cannot be put in")
	}
	paste = strings.ReplaceAll(paste, "localhost:8080", addr) + "\nprintf 'KEY=%s\\n' \"$KEY\"\n"

	stdout, err := os.Create(filepath.Join(tmp, "stdout"))
	is.NoErr(err)
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(tmp, "stderr"))
	is.NoErr(err)
	defer stderr.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-s")
	cmd.Dir = checkout
	cmd.Stdin = strings.NewReader(paste)
	// Files, not pipes: the server the paste leaves running holds them open, as it
	// holds a terminal, after bash has read the last line and exited.
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Env = []string{"PATH=" + shims + ":" + os.Getenv("PATH"), "HOME=" + tmp, "TMPDIR=" + tmp,
		"ENRICHD_ADDR=" + addr, "ENRICHD_BUILT=" + bin}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	runErr := cmd.Run()
	group := cmd.Process.Pid
	stopped := false
	stop := func() { // the server the paste started, as Ctrl-C would
		if stopped {
			return
		}
		stopped = true
		syscall.Kill(-group, syscall.SIGTERM)
		for deadline := time.Now().Add(45 * time.Second); syscall.Kill(-group, 0) == nil; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				syscall.Kill(-group, syscall.SIGKILL)
				t.Errorf("the server the paste started did not stop within 45 s of SIGTERM")
				return
			}
		}
	}
	defer stop()
	out, _ := os.ReadFile(stdout.Name())
	errOut, _ := os.ReadFile(stderr.Name())
	report := fmt.Sprintf("the paste:\n%s\nstdout:\n%s\nstderr:\n%s", paste, out, errOut)
	if runErr != nil {
		t.Fatalf("bash: %v\n%s", runErr, report)
	}

	// Each step's output, in order: set up, ready, the company's task queued (202, no
	// data), the same task read, the person's task, and the key for what follows.
	var enqueued, read, person apiResponse
	var key string
	var rest []string
	for _, line := range lines(string(out)) {
		switch {
		case strings.HasPrefix(line, "KEY="):
			key = strings.TrimPrefix(line, "KEY=")
		case strings.HasPrefix(line, "{") && enqueued.Task.ID == "":
			is.NoErr(json.Unmarshal([]byte(line), &enqueued))
			contains(t, line, `"object_type":"company"`)
		case strings.HasPrefix(line, "{") && read.Task.ID == "":
			is.NoErr(json.Unmarshal([]byte(line), &read))
		case strings.HasPrefix(line, "{"):
			is.NoErr(json.Unmarshal([]byte(line), &person))
			contains(t, line, `"object_type":"person"`)
		default:
			rest = append(rest, line)
		}
	}
	text := strings.Join(rest, "\n")
	for _, want := range []string{"created organization acme", "granted 100 credits", "imported 3 companies and 3 people",
		"enrichd is ready at http://" + addr} {
		if !strings.Contains(text, want) {
			t.Errorf("the paste printed no %q\n%s", want, report)
		}
	}
	if enqueued.Task.ID == "" || read.Task.ID != enqueued.Task.ID || person.Task.ID == "" || key == "" {
		t.Fatalf("the paste did not enqueue a company, read its task back and enqueue a person\n%s", report)
	}
	is.True(enqueued.Data == nil) // an enqueue answer carries the task, never data
	if read.Task.Status == "succeeded" && !strings.Contains(string(read.Data), `"name":"Acme"`) {
		t.Errorf("step 5's read of a succeeded task has no company: %s", read.Data)
	}

	// Step 5's note: step 4 sent again is a 200 from the store, the task already
	// succeeded and no data; the data is read with GET /v1/tasks/{id}.
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	base := "http://" + addr
	read = waitSettled(t, client, base, key, read)
	status, again, raw := call(t, client, http.MethodPost, base+"/v1/companies/enrich", key, `{"domain":"acme.com"}`)
	is.Equal(status, http.StatusOK)
	is.Equal(again.Task.Status, "succeeded")
	if again.Data != nil {
		t.Errorf("a store hit's 200 carries data: %s", raw)
	}
	_, got, _ := call(t, client, http.MethodGet, base+"/v1/tasks/"+again.Task.ID, key, "")
	contains(t, string(got.Data), `"name":"Acme"`)

	// What the steps made in the checkout, the server running and stopped, is ignored.
	checkIgnored(t, checkout, tmp, ".gitignore", "examples/people-and-companies.jsonl")
	stop()
	checkIgnored(t, checkout, tmp, ".gitignore", "examples/people-and-companies.jsonl")
}

// checkIgnored fails the test for every file under dir, but those placed there,
// that dir's .gitignore does not ignore, as git itself reads it (the user's and the
// system's git settings left out: home is the test's own).
func checkIgnored(t *testing.T, dir, home string, placed ...string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Log("no git here: what was made is not checked against .gitignore")
		return
	}
	git := func(args ...string) string {
		t.Helper()
		c := exec.Command("git", args...)
		c.Dir = dir
		c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir)}
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		git("init", "-q")
	}
	made := 0
	for _, f := range lines(git("ls-files", "--others", "--exclude-standard")) {
		if !slices.Contains(placed, f) {
			t.Errorf("%s is not ignored by .gitignore: it would be committed", f)
		}
	}
	for _, f := range lines(git("ls-files", "--others", "--ignored", "--exclude-standard")) {
		made++
		t.Logf("made and ignored: %s", f)
	}
	if made == 0 {
		t.Errorf("nothing was made in %s: the check saw nothing to check", dir)
	}
}

// quickstartBlocks are the shell blocks of the README's Quickstart, in order, their
// indentation taken off: what a reader copies.
func quickstartBlocks(t *testing.T, readme string) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Quickstart\n")
	if !ok {
		t.Fatal("README has no Quickstart section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	var block []string
	in := false
	for _, line := range strings.Split(section, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```sh":
			in, block = true, nil
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, strings.Join(block, "\n"))
		case in:
			block = append(block, strings.TrimPrefix(line, "   "))
		}
	}
	if len(blocks) < 5 {
		t.Fatalf("found %d shell blocks in the README's Quickstart", len(blocks))
	}
	return blocks
}
