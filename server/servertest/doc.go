// Package servertest is what the HTTP tests of enrichd's server and of its dashboard
// share: a running enrichd (NewEnv: the real handler behind a loopback listener, on a
// real SQLite file in the test's temporary directory or on a fresh database of the
// PostgreSQL cluster the tests start), the fake network that is its only source, the
// requests a test sends and the answers it reads (each checked against the OpenAPI
// document), the dashboard's pages read through a cookie-keeping client (Browser), the
// receivers Loops deliver to, and the fixtures the tests of both packages use.
//
// Only tests import it; it imports server, and so the server package's own internal
// tests (package server) cannot: the HTTP tests are in package server_test.
package servertest
