package cli

import (
	"encoding/json"
	"enrichd/enrich/source"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"time"

	"enrichd/bench"

	"github.com/spf13/cobra"
)

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput and latency of the real service against SQLite's own ceiling, on this machine",
		Long: `bench starts enrichd in-process on a loopback port over a temporary database and the
synthetic sim source, drives it through real HTTP, and prints each scenario beside the
raw SQLite ceiling of the same work, measured in the same run. The memory scenario
instead starts this program's serve as a process of its own, on a free loopback port,
and reads its resident set from /proc. The replicas scenario (--db postgres://...)
starts --replicas serve processes on that PostgreSQL database and spreads the mixed
load over them in turn, as a load balancer would: one row per replica count. The peer
scenario measures, beside enrichd and with the same requests, load generator and
clients, the bare HTTP stack and the naive SQLite service a team would write itself,
all three in-process, in --rounds interleaved rounds. It touches no database but its
own temporary ones, and on PostgreSQL a schema of its own that it drops.`,
		Annotations: map[string]string{noDB: "yes"},
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			duration, _ := f.GetDuration("duration")
			concurrency, _ := f.GetInt("concurrency")
			scenarios, _ := f.GetStringSlice("scenario")
			workers, _ := f.GetInt("workers")
			growthTasks, _ := f.GetInt("growth-tasks")
			fairBulk, _ := f.GetInt("fair-bulk")
			asJSON, _ := f.GetBool("json")
			memoryLoad, _ := f.GetDuration("memory-load")
			memoryIdle, _ := f.GetDuration("memory-idle")
			serveArgs, _ := f.GetStringArray("serve-arg")
			pgURL, _ := f.GetString("db")
			emailCompanies, _ := f.GetInt("email-companies")
			emailNames, _ := f.GetStringSlice("email-names")
			rounds, _ := f.GetInt("rounds")
			waterfallSubjects, _ := f.GetInt("waterfall-subjects")
			tailWindow, _ := f.GetDuration("tail-window")
			if env := os.Getenv("ENRICHD_DB"); pgURL == env && !strings.HasPrefix(env, "postgres") {
				pgURL = "" // the SQLite file serve is given in the environment: not bench's
			}
			replicas, _ := f.GetIntSlice("replicas")
			if pgURL != "" && len(scenarios) == 0 {
				scenarios = []string{"replicas"}
			}
			switch {
			case pgURL != "" && !slices.Equal(scenarios, []string{"replicas"}):
				return fmt.Errorf("--db is the PostgreSQL database of the replicas scenario alone: the other scenarios measure SQLite on temporary files")
			case pgURL == "" && slices.Contains(scenarios, "replicas"):
				return fmt.Errorf("the replicas scenario needs --db postgres://... (a database it may create a schema in)")
			}
			for _, n := range replicas {
				if n < 1 || n > 16 {
					return fmt.Errorf("--replicas must be counts from 1 to 16, not %d", n)
				}
			}
			if duration < 100*time.Millisecond || duration > 10*time.Minute {
				return fmt.Errorf("--duration must be from 100ms to 10m")
			}
			if concurrency < 1 || concurrency > 1024 {
				return fmt.Errorf("--concurrency must be from 1 to 1024")
			}
			if fairBulk < 1 {
				return fmt.Errorf("--fair-bulk must be at least 1")
			}
			if growthTasks < 1 {
				return fmt.Errorf("--growth-tasks must be at least 1")
			}
			if emailCompanies < 1 || emailCompanies > 10000 {
				return fmt.Errorf("--email-companies must be from 1 to 10,000")
			}
			for _, names := range emailNames {
				if names != source.SimNamesLists && names != source.SimNamesHeldOut {
					return fmt.Errorf("--email-names: %q is no name set (%s, %s)", names, source.SimNamesLists, source.SimNamesHeldOut)
				}
			}
			if waterfallSubjects < 1 || waterfallSubjects > 1_000_000 {
				return fmt.Errorf("--waterfall-subjects must be from 1 to 1,000,000")
			}
			if tailWindow < 100*time.Millisecond || tailWindow > time.Hour {
				return fmt.Errorf("--tail-window must be from 100ms to 1h")
			}
			if rounds < 1 || rounds > 100 {
				return fmt.Errorf("--rounds must be from 1 to 100")
			}
			if workers < 1 {
				return fmt.Errorf("--workers must be at least 1")
			}
			if memoryLoad < 100*time.Millisecond || memoryLoad > time.Hour {
				return fmt.Errorf("--memory-load must be from 100ms to 1h")
			}
			if memoryIdle < 100*time.Millisecond || memoryIdle > time.Hour {
				return fmt.Errorf("--memory-idle must be from 100ms to 1h")
			}
			tuneGC(os.Getenv) // the service runs in this process, set as serve sets it
			for _, r := range []struct {
				flag  string
				start func(io.Writer) error
				stop  func()
			}{{"cpuprofile", pprof.StartCPUProfile, pprof.StopCPUProfile}, {"trace", trace.Start, trace.Stop}} {
				if path, _ := f.GetString(r.flag); path != "" {
					out, err := os.Create(path)
					if err != nil {
						return err
					}
					defer out.Close()
					if err := r.start(out); err != nil {
						return err
					}
					defer r.stop()
				}
			}
			opt := bench.Options{Schema: program(cmd).Schema, Duration: duration, Concurrency: concurrency, Scenarios: scenarios, Workers: workers, GrowthTasks: growthTasks, FairBulk: fairBulk,
				MemoryLoad: memoryLoad, MemoryIdle: memoryIdle, ServeArgs: serveArgs, DB: pgURL, Replicas: replicas, EmailCompanies: emailCompanies, EmailNames: emailNames, Rounds: rounds, WaterfallSubjects: waterfallSubjects, TailWindow: tailWindow}
			if !asJSON {
				opt.Progress = cmd.ErrOrStderr()
			}
			rep, err := bench.Run(cmd.Context(), opt)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return rep.WriteTable(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.Duration("duration", 5*time.Second, "how long each scenario drives load and each ceiling is measured; growth gives each of its measurements half of it; peer gives it to each server and request in all, split over --rounds; fair ignores it and runs until its tasks settle; memory has --memory-load; email-quality runs until every address is answered")
	f.Int("concurrency", 32, "clients sending at once (fair: clients sending the first organization's tasks; mixed and memory: half of it, so 16 by default; email-quality: companies answered side by side, at most 8)")
	f.StringSlice("scenario", nil, "scenarios to run, comma-separated: "+strings.Join(bench.Scenarios, ", ")+" (all but peer, growth, replicas, email-quality, waterfall and tail when empty; memory takes --memory-load plus --memory-idle)")
	f.Int("growth-tasks", 1_000_000, "growth scenario: tasks stored before reads and enqueues are measured again; claims are timed behind as many queued tasks, at most 100,000, and behind a hundredth of that")
	f.Duration("memory-load", time.Minute, "memory scenario: how long the mixed load runs against the serve process while its RSS is sampled")
	f.Duration("memory-idle", 30*time.Second, "memory scenario: how long the serve process then stays idle before its RSS is read again")
	f.StringArray("serve-arg", nil, "memory scenario: a flag for the serve process (the replicas scenario's too), as --serve-arg=--flag=value; repeat it for more")
	f.Int("email-companies", 50, "email-quality scenario: how many sim companies it writes addresses for, every current and former employee in eight patterns, and six addresses of nobody each")
	f.StringSlice("email-names", []string{source.SimNamesLists, source.SimNamesHeldOut}, "email-quality scenario: the name sets the sim companies' staff are drawn from, each answered and scored on its own: "+
		source.SimNamesLists+" (names enrichd's lists hold) and "+source.SimNamesHeldOut+" (names of 21 Latin-script cultures no list holds)")
	f.Duration("tail-window", 10*time.Second, "tail scenario: the length of each window its long run of store hits is cut into (run it with --duration 60s or more)")
	f.Int("waterfall-subjects", 10_000, "waterfall scenario: how many companies it enriches through three synthetic vendors, first-hit-wins and then as a waterfall, each twice")
	f.Int("rounds", 3, "peer scenario: how many times each server is driven in turn (bare, naive, enrichd, then again), each time for --duration divided by it")
	f.Int("fair-bulk", 5000, "fair scenario: tasks the first organization queues before the second sends 10")
	f.Int("workers", 16, "task workers of the service under test")
	f.Bool("json", false, "print the report as JSON")
	f.String("db", "", "replicas scenario: a PostgreSQL URL, postgres://user:password@host/database; each run makes a schema of its own there, dropped afterwards, so other data is left alone. Given alone, it runs the replicas scenario")
	f.IntSlice("replicas", []int{1, 2, 3}, "replicas scenario: how many serve processes share the load, one run per count in turn (--replicas 3, or --replicas 1,2,3)")
	f.String("cpuprofile", "", "write a CPU profile of the whole run (service and load generator) to this file, for go tool pprof; the SQLite writer's goroutine is labeled enrichd=writer (go tool pprof -tagfocus enrichd=writer)")
	f.String("trace", "", "write an execution trace of the whole run to this file, for go tool trace (go tool trace -pprof=sched FILE: how long goroutines waited for a processor)")
	return cmd
}
