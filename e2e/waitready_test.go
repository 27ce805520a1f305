package e2e

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWaitReady: wait-ready returns once serve answers /readyz, on --addr or on
// --admin-addr, and otherwise fails within --timeout saying why: nothing listens,
// another program answers, or enrichd answers not ready.
func TestWaitReady(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, done := startServe(t, ctx, "--db", newDB(t), "--admin-addr", "127.0.0.1:0")
	defer func() {
		cancel()
		<-done
	}()
	api := strings.TrimPrefix(logField(t, logs, "enrichd listening", "addr"), "http://")
	admin := strings.TrimPrefix(logField(t, logs, "enrichd listening", "admin_addr"), "http://")

	out := mustCLI(t, "wait-ready", "--addr", api, "--admin-addr", admin)
	contains(t, out, "enrichd is ready at http://"+admin)
	// /readyz is on the admin address alone: asked on the API's, it is not enrichd's.
	contains(t, failCLI(t, "wait-ready", "--addr", api, "--timeout", "1s"), "not enrichd's /readyz")
	// A wildcard host is asked on the loopback address, as a container's check does.
	_, port, _ := net.SplitHostPort(admin)
	contains(t, mustCLI(t, "wait-ready", "--addr", "0.0.0.0:"+port), "enrichd is ready at http://127.0.0.1:"+port)
	contains(t, mustCLI(t, "wait-ready", "--addr", ":"+port), "enrichd is ready at http://127.0.0.1:"+port)

	t.Run("nothing listens", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		msg := failCLI(t, "wait-ready", "--addr", addr, "--timeout", "1s")
		contains(t, msg, "enrichd is not ready at http://"+addr+"/readyz after 1s")
		contains(t, msg, "connection refused")
	})
	t.Run("not ready", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"status":"not_ready","reason":"the database does not take writes"}`))
		}))
		defer srv.Close()
		contains(t, failCLI(t, "wait-ready", "--addr", srv.Listener.Addr().String(), "--timeout", "1s"),
			"/readyz answered 503 not_ready: the database does not take writes")
	})
	t.Run("bad flags", func(t *testing.T) {
		t.Parallel()
		contains(t, failCLI(t, "wait-ready", "--addr", "127.0.0.1:0"), "port 0")
		contains(t, failCLI(t, "wait-ready", "--addr", "nowhere"), `--addr "nowhere"`)
		contains(t, failCLI(t, "wait-ready", "--timeout", "0s"), "--timeout must be more than 0")
	})
}
