package cli

import (
	"fmt"

	"enrichd/store"

	"github.com/spf13/cobra"
)

func newTasksCommand() *cobra.Command {
	tasks := &cobra.Command{Use: "tasks", Short: "Look at tasks"}
	list := listCommand(&cobra.Command{
		Use:   "list",
		Short: "List an organization's tasks, newest first",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, args []string, db *store.DB) error {
			org, err := db.FindOrg(cmd.Context(), orgFlag(cmd))
			if err != nil {
				return err
			}
			status, _ := cmd.Flags().GetString("status")
			if status != "" && !store.IsStatus(status) {
				return fmt.Errorf("--status must be one of queued, running, succeeded, failed, canceled")
			}
			limit, _ := cmd.Flags().GetInt("limit")
			list, total, err := db.ListTasks(cmd.Context(), org.ID, status, 0, max(1, limit))
			if err != nil {
				return err
			}
			err = printList(cmd, list, []string{"ID", "CREATED", "OBJECT_TYPE", "STATUS", "TARGET"}, func(t *store.Task) []string {
				return []string{t.ID, t.CreatedAt.Format(timeFormat), t.ObjectType, t.Status, t.Target}
			})
			fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d tasks\n", len(list), total)
			return err
		}),
	})
	requiredOrg(list)
	list.Flags().String("status", "", "only tasks of this status")
	list.Flags().Int("limit", 25, "how many tasks to show")
	tasks.AddCommand(list)
	return tasks
}
