package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"enrichd/server"

	"github.com/spf13/cobra"
)

// waitReadyPoll is how often wait-ready asks again: a start takes a fraction of a
// second, so a person waits for little more than that.
const waitReadyPoll = 100 * time.Millisecond

func newWaitReadyCommand() *cobra.Command {
	def := server.DefaultConfig()
	cmd := &cobra.Command{
		Use:         "wait-ready",
		Annotations: map[string]string{noDB: "yes"},
		Short:       "Wait until serve answers /readyz as ready, then exit 0; fail after --timeout saying why",
		Long: `Wait until the serve listening on --addr (or on --admin-addr, where /readyz is then
served) answers GET /readyz with 200 and "ready", then print where it is and exit 0.
After --timeout (and the probe then under way, 3 s at most) it fails with the last
reason: the connection refused, or the reason /readyz gave. It reads the same flags and ENRICHD_* variables as serve, so

  ./enrichd serve &
  ./enrichd wait-ready

returns once the server started in the background takes requests. A wildcard host
(0.0.0.0, ::, or none) is asked on the loopback address, so it also serves as the
health check of a container, whose image has no curl.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, _ := cmd.Flags().GetString("addr")
			if admin, _ := cmd.Flags().GetString("admin-addr"); admin != "" {
				addr = admin
			}
			timeout, _ := cmd.Flags().GetDuration("timeout")
			if timeout <= 0 {
				return errors.New("--timeout must be more than 0")
			}
			base, err := probeURL(addr)
			if err != nil {
				return err
			}
			if err := waitReady(cmd.Context(), base, timeout); err != nil {
				return fmt.Errorf("enrichd is not ready at %s/readyz after %s: %w", base, timeout, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "enrichd is ready at %s\n", base)
			return nil
		},
	}
	f := cmd.Flags()
	f.String("addr", def.Addr, "the address serve listens on (its --addr)")
	f.String("admin-addr", "", "serve's --admin-addr, when it was given: /readyz is served there instead")
	f.Duration("timeout", 30*time.Second, "how long to wait before failing")
	return cmd
}

// probeURL is the http:// base at which a serve listening on addr is reached from
// this machine: a wildcard or missing host becomes the loopback address.
func probeURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--addr %q: %w", addr, err)
	}
	if port == "0" {
		return "", fmt.Errorf("--addr %q: port 0 is a port the system picks at each start; give the one serve logged", addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// waitReady asks base/readyz until it answers ready or timeout has passed, then
// returns the last reason it was not: the request's error, or what /readyz said. A
// probe under way when the time is up is let finish (probeTimeout at most), so that
// the reason is its answer rather than the deadline cutting it.
func waitReady(ctx context.Context, base string, timeout time.Duration) error {
	client := &http.Client{Timeout: probeTimeout}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for {
		err := probeReady(ctx, client, base+"/readyz")
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(min(waitReadyPoll, time.Until(deadline))):
		}
	}
}

// probeTimeout bounds one probe: /readyz answers within its own 2 s write check.
const probeTimeout = 3 * time.Second

// probeReady asks /readyz once. Only enrichd's own answer counts: a 200 from another
// program on the port, without {"status":"ready"}, is not ready.
func probeReady(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			return op // "dial tcp 127.0.0.1:8080: connect: connection refused", without the URL said twice
		}
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(raw, &body) != nil || body.Status == "" {
		return fmt.Errorf("%s answered %d, which is not enrichd's /readyz: is another program on the port?", url, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK || body.Status != "ready" {
		reason := body.Reason
		if reason == "" {
			reason = strings.TrimSpace(string(raw))
		}
		return fmt.Errorf("/readyz answered %d %s: %s", resp.StatusCode, body.Status, reason)
	}
	return nil
}
