//go:build race

package cli_test

// raceDetector is whether this test binary was built with -race.
const raceDetector = true
