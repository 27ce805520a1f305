//go:build !race

package e2e

// raceDetector is whether this test binary was built with -race.
const raceDetector = false
