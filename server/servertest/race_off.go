//go:build !race

package servertest

// raceDetector is whether the binary was built with -race.
const raceDetector = false
