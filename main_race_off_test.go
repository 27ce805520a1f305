//go:build !race

package main

// raceDetector is whether this test binary was built with -race.
const raceDetector = false
