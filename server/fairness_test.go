//go:build linux

package server_test

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"enrichd/server"
	"enrichd/server/servertest"
)

// raiseFileLimit lets the test process hold n files, or skips the test if it cannot.
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	lim.Cur = min(n, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < n {
		t.Skipf("the test holds %d files; RLIMIT_NOFILE allows %d (%v)", n, lim.Cur, err)
	}
}

// TestOneAddressCannotStarveTheOthers: one address (127.0.0.1) opens more stalled
// connections than the listener holds in all, half sending nothing and half a header
// byte a second, while a client on another address (127.0.0.2) makes requests, each
// on a new connection. The client is served at once; the attacker's connections over
// its share are closed at once and counted.
func TestOneAddressCannotStarveTheOthers(t *testing.T) {
	// Not in parallel: what it checks is bounded in time, which other tests running
	// at once would stretch.
	const attackers = 1100
	raiseFileLimit(t, 2*attackers+500) // both ends of every connection, in one process
	limits := server.DefaultConfig().HTTP
	if attackers <= limits.MaxConns {
		t.Fatalf("the attack must exceed --max-conns (%d)", limits.MaxConns)
	}
	e := servertest.NewEnv(t)
	addr := serveLimited(t, e, limits)

	conns := make([]net.Conn, attackers)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range conns {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, Timeout: 5 * time.Second}
			if c, err := d.Dial("tcp", addr); err == nil {
				conns[i] = c
			}
		})
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the even ones send their headers a byte a second
		header := "GET /v1/tasks HTTP/1.1\r\nHost: x\r\nX-Slow: "
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			b := byte('a')
			if n < len(header) {
				b = header[n]
			}
			for i := 0; i < len(conns); i += 2 {
				if conns[i] != nil {
					conns[i].SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
					conns[i].Write([]byte{b})
				}
			}
		}
	}()

	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		DisableKeepAlives: true, // every request dials, as a new client does
		DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
	}}
	var took []time.Duration
	failed := 0
	for range 20 {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/tasks?pageSize=1", nil)
		req.Header.Set("Authorization", "Bearer "+e.Key)
		start := time.Now()
		res, err := client.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d", res.StatusCode)
			}
		}
		took = append(took, time.Since(start)) // a timeout counts as the timeout
		if err != nil {
			failed++
			t.Logf("request from 127.0.0.2: %v", err)
		}
	}
	slices.Sort(took)
	p50, most := took[len(took)/2], took[len(took)-1]
	t.Logf("client on 127.0.0.2 while 127.0.0.1 holds %d connections: p50 %v, max %v, %d of %d failed",
		attackers, p50.Round(time.Microsecond), most.Round(time.Microsecond), failed, len(took))
	if p50 >= 100*time.Millisecond || failed > 0 {
		t.Fatalf("p50 %v (want under 100ms), %d failed", p50, failed)
	}

	// The attacker holds its share and no more: the others were closed at once.
	m := servertest.Scrape(t, e.HTTP.URL)
	if got, want := m[`enrichd_http_connections_refused_total{reason="per_address"}`], float64(attackers-limits.MaxConnsPerAddr); got < want {
		t.Errorf("refused connections: %v, want at least %v", got, want)
	}
	if open := m["enrichd_http_connections_open"]; open > float64(limits.MaxConnsPerAddr+2) {
		t.Errorf("%v connections open, want the attacker's %d at most (and a scrape's)", open, limits.MaxConnsPerAddr)
	}
}
