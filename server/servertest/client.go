package servertest

import "net/http"

// Transport is the tests' own HTTP transport. Every httptest.Server's Close closes
// the idle connections of http.DefaultTransport, and a request of a test running in
// parallel that was about to reuse one of them fails ("HTTP/1.x transport connection
// broken: http: CloseIdleConnections called"); no server's Close touches this one.
var Transport = http.DefaultTransport.(*http.Transport).Clone()

// Client sends the tests' requests over Transport.
var Client = &http.Client{Transport: Transport}
