//go:build !race

package servertest

// RaceDetector is whether the binary was built with -race.
const RaceDetector = false
