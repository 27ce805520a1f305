// Package e2e holds the tests of enrichd as a user runs it: the binary, built once for
// the package with go build, its commands, serve, the dashboard in a real headless
// Chromium, the Quickstart, replicas on PostgreSQL, and the docs checked against the
// commands. It has no code of its own; program_test.go is where to start.
package e2e
