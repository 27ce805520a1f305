// Command testreport reads `go test -json` on its standard input and writes what a
// plain `go test` would (each package's result line, and the whole output of a test
// that failed or a package that did not build), then every test that skipped, with its
// reason, and their count: a skip on CI is seen, not only a failure. It exits 1 when a
// test or a package failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

type skip struct{ pkg, test, reason string }

func main() {
	failed, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

func report(in io.Reader, out io.Writer) (failed bool, err error) {
	outputs := map[string][]string{} // a test's output lines so far, by "package test"
	var skips []skip
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			// Not an event (go vet's or the linker's own words): pass it on.
			fmt.Fprintln(out, sc.Text())
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "build-fail":
			failed = true
		case e.Action == "output" && e.Test != "":
			outputs[key] = append(outputs[key], e.Output)
		case e.Action == "output":
			// The package's own lines: its result, and what no test wrote (a panic
			// outside a test, a TestMain's words). PASS and the verbose headers are
			// noise a plain go test does not print either.
			if o := strings.TrimSpace(e.Output); o != "PASS" && !strings.HasPrefix(o, "=== ") {
				fmt.Fprint(out, e.Output)
			}
		case e.Action == "fail" && e.Test != "":
			failed = true
			fmt.Fprint(out, strings.Join(outputs[key], ""))
			delete(outputs, key)
		case e.Action == "fail":
			failed = true
		case e.Action == "skip" && e.Test != "":
			skips = append(skips, skip{e.Package, e.Test, reason(outputs[key])})
			delete(outputs, key)
		case e.Action == "pass" && e.Test != "":
			delete(outputs, key)
		}
	}
	if err := sc.Err(); err != nil {
		return failed, err
	}
	// A test that never ended (its binary died: a timeout's panic, a crash) has no
	// pass, fail or skip of its own, and its output says why: print it.
	var unfinished []string
	for key := range outputs {
		unfinished = append(unfinished, key)
	}
	sort.Strings(unfinished)
	for _, key := range unfinished {
		fmt.Fprintf(out, "--- did not end: %s\n%s", key, strings.Join(outputs[key], ""))
	}
	sort.Slice(skips, func(i, j int) bool {
		if skips[i].pkg != skips[j].pkg {
			return skips[i].pkg < skips[j].pkg
		}
		return skips[i].test < skips[j].test
	})
	fmt.Fprintf(out, "\n%d tests skipped:\n", len(skips))
	for _, s := range skips {
		fmt.Fprintf(out, "SKIP %s %s: %s\n", s.pkg, s.test, s.reason)
	}
	return failed, nil
}

// reason is what a skipped test logged, less the lines go test itself writes.
func reason(lines []string) string {
	var said []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		said = append(said, l)
	}
	return strings.Join(said, " | ")
}
