package servertest

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Scrape reads /metrics from base (the API's or the admin listener's URL) as a map
// from series (name{labels}) to value.
func Scrape(t testing.TB, base string) map[string]float64 {
	t.Helper()
	res, err := Client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		raw, _ := io.ReadAll(res.Body)
		t.Fatalf("GET /metrics: %d %s %s", res.StatusCode, res.Header.Get("Content-Type"), raw)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// WaitMetric scrapes until series has the value want: counters move just after the
// transition they count is committed, which a client may see first.
func (e *Env) WaitMetric(series string, want float64) map[string]float64 {
	e.T.Helper()
	deadline := time.Now().Add(SettleWithin)
	for {
		m := Scrape(e.T, e.HTTP.URL)
		if m[series] == want {
			return m
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("%s = %v, want %v", series, m[series], want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
