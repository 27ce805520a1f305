package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"enrichd/bench"

	"github.com/matryer/is"
)

// The bench command's scenarios that run serve in this process, through the real
// command.

// TestBenchRuns runs every scenario of enrichd bench, briefly and small, through the
// real command: each must measure something, without errors. The figures themselves
// are not judged here; a test machine's speed says nothing. memory and replicas, which
// start serve processes of their own, have tests of their own (bench_test.go).
func TestBenchRuns(t *testing.T) {
	benchScenarioTest(t, "starts several servers")
	is := is.New(t)
	// Each scenario keeps the cores busy for --duration: the shortest that still gives
	// every part of the mixed load a few requests on a busy machine (about ten each alone).
	rep := benchReport(t, "--duration", "150ms", "--concurrency", "4", "--workers", "4",
		"--scenario", "enqueue-hit,enqueue-miss,read,deliver,fair,mixed,peer,growth", "--growth-tasks", "2000", "--fair-bulk", "200", "--rounds", "2")
	is.Equal(rep.Concurrency, 4)
	var names []string
	for _, r := range rep.Results {
		names = append(names, r.Scenario)
		is.True(r.Count > 0)         // measured something
		is.Equal(r.Errors, int64(0)) // every request got the answer it expects
		is.True(r.Rate > 0)
		switch {
		case r.Peer != nil:
			is.Equal(len(r.Peer.Rounds), 2) // --rounds
		case r.Scenario != "fair" && r.Scenario != "mixed" && r.Scenario != "storage":
			is.True(r.Ceiling > 0 && r.Ratio > 0) // compared with its baseline
		}
	}
	is.Equal(names, []string{"enqueue-hit", "enqueue-miss", "read", "deliver", "fair",
		"mixed", "mixed/read", "mixed/list", "mixed/hit", "mixed/miss", "mixed/email", "mixed/loop", "mixed/replay", "storage",
		"peer/hit/bare", "peer/hit/naive", "peer/hit/enrichd", "peer/read/bare", "peer/read/naive", "peer/read/enrichd",
		"growth-list", "growth-get", "growth-hit", "growth-miss", "growth-claim"})

	// The profile and the execution trace of a run are written whole: a gzipped
	// profile, and a trace that opens with the Go trace format's header.
	dir := t.TempDir()
	profile, trace := filepath.Join(dir, "cpu.out"), filepath.Join(dir, "trace.out")
	mustRun(t, "bench", "--duration", "100ms", "--concurrency", "4", "--workers", "2", "--scenario", "enqueue-hit",
		"--cpuprofile", profile, "--trace", trace)
	raw, err := os.ReadFile(profile)
	is.NoErr(err)
	is.True(len(raw) > 1000 && raw[0] == 0x1f && raw[1] == 0x8b)
	raw, err = os.ReadFile(trace)
	is.NoErr(err)
	is.True(len(raw) > 1000 && strings.HasPrefix(string(raw), "go 1."))

	contains(t, failRun(t, "bench", "--scenario", "nope"), `unknown scenario "nope"`)
	contains(t, failRun(t, "bench", "--concurrency", "0"), "--concurrency")
	contains(t, failRun(t, "bench", "--scenario", "peer", "--rounds", "0"), "--rounds must be from 1 to 100")
	contains(t, failRun(t, "bench", "--scenario", "tail", "--tail-window", "10ms"), "--tail-window must be from 100ms to 1h")
}

// The email-quality scenario answers every address through the real server and scores
// it against the sim's staff, on the names enrichd's lists hold and on names no list
// holds: on a few companies, no wrong person, the unique fits found, the same answers
// in a shuffled order.
func TestBenchEmailQuality(t *testing.T) {
	benchScenarioTest(t, "answers hundreds of email lookups")
	is := is.New(t)
	rep := benchReport(t, "--scenario", "email-quality", "--email-companies", "3", "--concurrency", "3", "--workers", "4")
	is.Equal(len(rep.Results), 1)
	r := rep.Results[0]
	q := r.EmailQuality
	is.True(q != nil && q.HeldOut != nil)
	is.Equal(q.Names, "lists")
	is.Equal(q.HeldOut.Names, "heldout")
	for _, set := range []*bench.EmailQuality{q, q.HeldOut} {
		is.Equal(set.Companies, 3)
		is.Equal(len(set.Runs), 2)
		for _, run := range set.Runs {
			is.Equal(run.Wrong, []string(nil)) // no wrong person
			is.True(run.Total.UniqueFit > 100)
			is.True(float64(run.Total.RightUnique) >= 0.95*float64(run.Total.UniqueFit))
			nobody := run.PerPattern[len(run.PerPattern)-1]
			is.Equal(nobody.Pattern, "nobody")
			is.Equal(nobody.Addresses, 18)
			is.Equal(nobody.NotFound, 18)
		}
		is.Equal(set.Changed, []string(nil)) // the order changes no answer
	}
	is.Equal(q.Runs[0].Total.RightUnique, q.Runs[0].Total.UniqueFit) // the lists' names: every one
	is.Equal(r.Errors, int64(0))
	is.Equal(r.Rate, 100*float64(q.HeldOut.Runs[0].Total.RightUnique)/float64(q.HeldOut.Runs[0].Total.UniqueFit)) // the held-out names' figure
	contains(t, failRun(t, "bench", "--scenario", "email-quality", "--email-companies", "0"), "--email-companies")
	contains(t, failRun(t, "bench", "--scenario", "email-quality", "--email-names", "kings"), "--email-names")
	only := benchReport(t, "--scenario", "email-quality", "--email-companies", "1", "--email-names", "heldout", "--concurrency", "1", "--workers", "2")
	is.Equal(only.Results[0].EmailQuality.Names, "heldout")
	is.True(only.Results[0].EmailQuality.HeldOut == nil)
}

// The waterfall scenario enriches the same companies through three synthetic vendors:
// the waterfall fills more of the wanted fields than first-hit-wins and pays more for
// it, every call the vendors count is on a task's `sources`, and the second pass asks
// nothing for a record held.
func TestBenchWaterfall(t *testing.T) {
	benchScenarioTest(t, "enriches 200 companies four times through three vendors")
	is := is.New(t)
	rep := benchReport(t, "--scenario", "waterfall", "--waterfall-subjects", "200", "--concurrency", "4", "--workers", "4")
	is.Equal(len(rep.Results), 1)
	w := rep.Results[0].Waterfall
	is.True(w != nil)
	is.Equal(w.Subjects, 200)
	is.Equal(len(w.Runs), 6)
	firstHit, waterfall, capped := w.Runs[0], w.Runs[2], w.Runs[4]
	// The dear vendor's own count over the month's two passes under its cap: passed by
	// no more than the asks under way (one a worker) cost beyond the 1 credit each is
	// admitted at.
	dearCredits := capped.VendorCredits["dear"] + w.Runs[5].VendorCredits["dear"]
	is.Equal(firstHit.Mode, "first-hit-wins")
	is.Equal(waterfall.Mode, "waterfall")
	is.True(waterfall.Filled > firstHit.Filled)           // the later vendors filled what the first lacked
	is.True(waterfall.Credits > firstHit.Credits)         // and were paid for it
	is.Equal(waterfall.Found, firstHit.Found)             // the same subjects are known either way
	is.True(dearCredits >= 400 && dearCredits <= 400+4*9) // the dear vendor's budget of 2 credits a subject holds
	is.True(capped.Credits > firstHit.Credits)
	for _, run := range w.Runs {
		is.Equal(run.TaskCalls, run.Calls)     // the tasks account for every vendor call
		is.Equal(run.TaskCredits, run.Credits) // and every vendor credit
		if run.Pass == 2 {
			is.Equal(run.FoundCalls, 0.0) // a record held is not asked for again
			is.Equal(run.Calls, 0.0)      // nor is a vendor that did not know the subject, in any mode
			is.Equal(run.Credits, 0.0)
		}
	}
	contains(t, failRun(t, "bench", "--scenario", "waterfall", "--waterfall-subjects", "0"), "--waterfall-subjects")
}

// benchScenarioTest starts a test of the bench's scenarios, in parallel with the
// others. It skips under -short, saying what the test does (why), and under -race:
// the scenarios' hundreds of requests take minutes in-process under the race
// detector. The run without -race covers them, and package bench's own tests run
// under it.
func benchScenarioTest(t *testing.T, why string) {
	t.Helper()
	if raceDetector {
		t.Skip("-race: the bench's hundreds of requests take minutes in-process under the race detector; the run without -race covers this, and package bench's own tests run under it")
	}
	if testing.Short() {
		t.Skip("-short: " + why)
	}
	t.Parallel()
}
