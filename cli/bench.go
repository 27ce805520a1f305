package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
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
raw SQLite ceiling of the same work, measured in the same run. It touches no database
but its own temporary ones.`,
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
			if workers < 1 {
				return fmt.Errorf("--workers must be at least 1")
			}
			if path, _ := f.GetString("cpuprofile"); path != "" {
				out, err := os.Create(path)
				if err != nil {
					return err
				}
				defer out.Close()
				if err := pprof.StartCPUProfile(out); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			opt := bench.Options{Schema: program(cmd).Schema, Duration: duration, Concurrency: concurrency, Scenarios: scenarios, Workers: workers, GrowthTasks: growthTasks, FairBulk: fairBulk}
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
	f.Duration("duration", 5*time.Second, "how long each scenario drives load and each ceiling is measured; growth splits it between its two reads; fair ignores it and runs until its tasks settle")
	f.Int("concurrency", 32, "clients sending at once (fair: clients sending the first organization's tasks)")
	f.StringSlice("scenario", nil, "scenarios to run, comma-separated: enqueue-hit, enqueue-miss, read, deliver, fair, growth (all but growth when empty)")
	f.Int("growth-tasks", 1_000_000, "growth scenario: tasks stored before reads are measured again")
	f.Int("fair-bulk", 5000, "fair scenario: tasks the first organization queues before the second sends 10")
	f.Int("workers", 16, "task workers of the service under test")
	f.Bool("json", false, "print the report as JSON")
	f.String("cpuprofile", "", "write a CPU profile of the whole run (service and load generator) to this file, for go tool pprof")
	return cmd
}
