package storetest

import (
	"flag"
	"runtime"
	"strconv"
)

// ParallelUnlessGiven makes the tests that call t.Parallel run n at a time (or one a
// core, if that is more) when -parallel is not given. It is for a TestMain whose tests
// wait (on a database's commits, a serve process, a browser, a worker's sweep) far
// more than they compute: go test's default, one a core, leaves a 2-core machine idle
// most of their time. It parses the flags.
func ParallelUnlessGiven(n int) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(max(n, runtime.GOMAXPROCS(0))))
	}
}
