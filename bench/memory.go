package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"enrichd/enrich"
	"enrichd/store"
)

// Memory is the memory scenario's figures: the resident set of a serve process under
// the mixed load and after it, as /proc/<pid>/status gives it, in MB.
type Memory struct {
	PID  int      `json:"pid"`  // the serve process, gone when the scenario ends
	Args []string `json:"args"` // its command line after the program
	Load string   `json:"load"` // how long the mixed load ran
	Idle string   `json:"idle"` // how long it then stayed idle
	// LoadRate is the requests per second the mixed load got answered as expected.
	LoadRate float64 `json:"load_rate"`
	// Peak is the sample of the highest VmRSS under load, with its RssAnon and
	// RssFile; HWM is VmHWM when the load ended, the peak between samples too (to
	// within the kernel's per-CPU counting of RSS: a sample may read a little above it).
	PeakMB     float64 `json:"peak_mb"`
	PeakAnonMB float64 `json:"peak_anon_mb"`
	PeakFileMB float64 `json:"peak_file_mb"`
	HWMMB      float64 `json:"hwm_mb"`
	IdleMB     float64 `json:"idle_mb"`
	IdleAnonMB float64 `json:"idle_anon_mb"`
	IdleFileMB float64 `json:"idle_file_mb"`
	Samples    int     `json:"samples"` // taken under load, one a second
}

// memory starts serve as a process of its own over a temporary database, drives the
// mixed load against it while sampling its resident set every second, leaves it idle,
// samples once more, and stops it.
func memory(ctx context.Context, opt Options) (Result, error) {
	load, idle := opt.MemoryLoad, opt.MemoryIdle
	if load <= 0 {
		load = 60 * time.Second
	}
	if idle <= 0 {
		idle = 30 * time.Second
	}
	if runtime.GOOS != "linux" {
		return Result{Scenario: "memory", Unit: "MB", Note: "not measured: it reads /proc, which only Linux has"}, nil
	}
	rc, err := startReceiver()
	if err != nil {
		return Result{}, err
	}
	defer rc.close()
	dir, err := os.MkdirTemp("", "enrichd-bench-serve-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "serve.db")
	key, loopID, err := prepareServeDB(ctx, opt, path, rc.url)
	if err != nil {
		return Result{}, err
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return Result{}, err
	}
	srv, err := startServe(opt, path, addr, "") // the key file beside the database, made as serve starts
	if err != nil {
		return Result{}, err
	}
	defer srv.stop()
	e := &env{dir: dir, base: "http://" + addr, client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}}, raw: newRawClient(addr)}
	defer e.client.CloseIdleConnections()
	defer e.raw.closeIdle()
	if err := srv.waitReady(ctx, e.client, e.base); err != nil {
		return Result{}, err
	}
	m, err := setUpMix(ctx, e, key, loopID, mixClients(opt))
	if err != nil {
		return Result{}, err
	}

	pid := srv.cmd.Process.Pid
	stopSampling, samplingDone := make(chan struct{}), make(chan struct{})
	var peak procMemory
	var samples int
	var sampleErr error
	go func() {
		defer close(samplingDone)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			s, err := readProcMemory(pid)
			if err != nil {
				sampleErr = err
				return
			}
			samples++
			if s.rss > peak.rss {
				peak = s
			}
		}
	}()
	rows := m.drive(ctx, "memory", load)
	close(stopSampling)
	<-samplingDone
	if sampleErr != nil {
		return Result{}, sampleErr
	}
	end, err := readProcMemory(pid) // also the last moment of the load, between ticks
	if err != nil {
		return Result{}, err
	}
	samples++
	if end.rss > peak.rss {
		peak = end
	}

	// Idle means no client either: their connections go, as they would.
	e.client.CloseIdleConnections()
	e.raw.closeIdle()
	select {
	case <-ctx.Done():
		return Result{}, ctx.Err()
	case <-srv.done:
		return Result{}, fmt.Errorf("serve exited while idle: %v", srv.err)
	case <-time.After(idle):
	}
	after, err := readProcMemory(pid)
	if err != nil {
		return Result{}, err
	}
	if err := srv.stop(); err != nil {
		return Result{}, err
	}

	whole := rows[0]
	mem := &Memory{PID: pid, Args: srv.args, Load: load.String(), Idle: idle.String(), LoadRate: whole.Rate,
		PeakMB: mb(peak.rss), PeakAnonMB: mb(peak.anon), PeakFileMB: mb(peak.file), HWMMB: mb(end.hwm),
		IdleMB: mb(after.rss), IdleAnonMB: mb(after.anon), IdleFileMB: mb(after.file), Samples: samples}
	shown := strings.Join(srv.args, " ")
	shown = strings.Replace(shown, path, "<temporary>", 1)
	r := Result{Scenario: "memory", Unit: "MB", Rate: mem.PeakMB, Count: whole.Count, Errors: whole.Errors, P50ms: whole.P50ms, P99ms: whole.P99ms, Memory: mem,
		Note: fmt.Sprintf("RSS of a serve process: peak %.0f MB under the mixed load (anon %.0f, file %.0f; VmHWM %.0f) from %d clients for %s at %s req/s; %.0f MB (anon %.0f, file %.0f) after %s idle; %s",
			mem.PeakMB, mem.PeakAnonMB, mem.PeakFileMB, mem.HWMMB, len(m.clients), mem.Load, thousands(mem.LoadRate),
			mem.IdleMB, mem.IdleAnonMB, mem.IdleFileMB, mem.Idle, shown)}
	return r, nil
}

func mb(kB int64) float64 { return float64(kB) / 1024 }

// prepareServeDB creates, in a database of its own, the organization the load uses:
// a key, credits and a company Loop whose webhooks go to hookURL.
func prepareServeDB(ctx context.Context, opt Options, path, hookURL string) (key, loopID string, err error) {
	db, err := store.Open(ctx, path, opt.Schema)
	if err != nil {
		return "", "", err
	}
	defer db.Close()
	key, k, err := db.CreateKey(ctx, store.BySystem, "bench", "bench", true)
	if err != nil {
		return "", "", err
	}
	if _, err := db.GrantCredits(ctx, "bench", 1<<40, nil); err != nil {
		return "", "", err
	}
	loop, err := db.CreateLoop(ctx, store.NewLoop{OrgID: k.OrgID, Name: "bench", ObjectType: enrich.ObjectCompany, WebhookURL: hookURL, Enabled: true})
	if err != nil {
		return "", "", err
	}
	return key, loop.ID, db.Close()
}

// subjectKey is the store's option of a subject key of the run's own: the people the
// bench's databases hold are the sim's, named by keyed hashes as any others.
func subjectKey() store.Option {
	key := make([]byte, 32)
	rand.Read(key)
	return store.WithSubjectKey(key)
}

// freeLoopbackAddr is a loopback port free a moment ago, for a process that must be
// told its address before it listens.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// serveProcess is a serve started by the memory scenario.
type serveProcess struct {
	cmd  *exec.Cmd
	args []string
	done chan struct{} // closed when it has exited, err then set
	err  error
}

// startServe starts serve on the database at path, listening on addr; keyFile, when
// set, is its --secret-key-file (PostgreSQL's replicas share one).
func startServe(opt Options, path, addr, keyFile string) (*serveProcess, error) {
	command := opt.ServeCommand
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding this program to start serve: %w", err)
		}
		command = []string{exe, "serve"}
	}
	args := append(append([]string(nil), command[1:]...),
		"--db", path, "--addr", addr, "--sources", "sim", "--rate-ip", "0", "--rate-key", "0",
		// Every client of the load is on one address: the per-address cap would refuse
		// all but 64 of them.
		"--max-conns-per-addr", "1024",
		"--max-backlog", strconv.FormatInt(1<<40, 10), "--allow-private-webhooks", "--workers", strconv.Itoa(opt.Workers))
	if keyFile != "" {
		args = append(args, "--secret-key-file", keyFile)
	}
	args = append(args, opt.ServeArgs...)
	// Its log goes nowhere (no Stdout or Stderr: /dev/null), as in the in-process
	// scenarios: a line per request, written, is part of the cost, not a pipe to drain.
	cmd := exec.Command(command[0], args...)
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting serve: %w", err)
	}
	p := &serveProcess{cmd: cmd, args: args, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitReady waits for /readyz to answer 200.
func (p *serveProcess) waitReady(ctx context.Context, client *http.Client, base string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return fmt.Errorf("serve exited before it was ready (%v); its log was discarded, run it by hand to see why: %s %s",
				p.err, p.cmd.Path, strings.Join(p.args, " "))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("serve was not ready in 30 seconds")
		}
	}
}

// stop asks serve to shut down as a signal from a terminal would, and kills it if it
// has not within a minute. It returns once the process is gone; stopping a process
// already stopped does nothing.
func (p *serveProcess) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.cmd.Process.Kill()
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		<-p.done
		return errors.New("serve did not stop within a minute of SIGTERM and was killed")
	}
	var exit *exec.ExitError
	if p.err != nil && !errors.As(p.err, &exit) {
		return p.err
	}
	return nil
}

// procMemory is a process's memory from /proc/<pid>/status, in kB.
type procMemory struct{ rss, anon, file, hwm int64 }

func readProcMemory(pid int) (procMemory, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMemory{}, fmt.Errorf("reading serve's memory: %w", err)
	}
	var m procMemory
	fields := map[string]*int64{"VmRSS:": &m.rss, "RssAnon:": &m.anon, "RssFile:": &m.file, "VmHWM:": &m.hwm}
	for _, line := range strings.Split(string(raw), "\n") {
		name, rest, ok := strings.Cut(line, "\t")
		if !ok {
			name, rest, ok = strings.Cut(line, " ")
		}
		if dst := fields[name]; ok && dst != nil {
			*dst, _ = strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		}
	}
	if m.rss == 0 {
		return procMemory{}, fmt.Errorf("reading serve's memory: no VmRSS in /proc/%d/status", pid)
	}
	return m, nil
}
