package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Write passes the server's writes on, except net/http's own answer to a request it
// refused before any handler: that is rewritten as the API's JSON error. A handler's
// writes are never taken for one: a large body reaches the connection in writes of its
// own, whose bytes a client may choose.
func (c *limitedConn) Write(p []byte) (int, error) {
	if c.responding.Load() {
		return c.Conn.Write(p)
	}
	if status, text, ok := parserError(p); ok {
		c.l.events.malformed(status)
		if _, err := c.Conn.Write(c.l.jsonParserError(status, text)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// net/http writes a request it cannot parse this answer, in one Write straight to the
// connection, and closes it: "HTTP/1.1 <status line>" + parserErrorHeaders + a text
// that is the status line again, or for 501 a sentence of its own. A handler's answer
// never has this form: net/http adds a Date header to it.
const (
	parserErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	unsupportedTE      = "Unsupported transfer encoding"
)

// net/http answers a request whose Expect header is not 100-continue with this, and
// closes the connection, before any handler; the Date header between the two parts.
// Every answer of a handler has an X-Request-Id header.
const (
	expectationFailed     = "HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nDate: "
	expectationFailedTail = "\r\nContent-Length: 0\r\n\r\n"
)

// parserError reads net/http's own answer to a request it refused before any handler:
// its status and, for a 400, net/http's reason ("invalid header name"), if any.
func parserError(p []byte) (status int, reason string, ok bool) {
	if date, found := bytes.CutPrefix(p, []byte(expectationFailed)); found {
		date, found = bytes.CutSuffix(date, []byte(expectationFailedTail))
		if found && len(date) < 64 && !bytes.Contains(date, []byte("\r\n")) {
			return http.StatusExpectationFailed, "", true
		}
		return 0, "", false
	}
	rest, found := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !found || len(rest) < 4 || rest[3] != ' ' || (rest[0] != '4' && rest[0] != '5') {
		return 0, "", false
	}
	line, body, found := bytes.Cut(rest, []byte(parserErrorHeaders))
	if !found || bytes.Contains(line, []byte("\r\n")) || !(bytes.Equal(body, line) || string(body) == unsupportedTE) {
		return 0, "", false
	}
	status, err := strconv.Atoi(string(line[:3]))
	if err != nil {
		return 0, "", false
	}
	_, after, _ := bytes.Cut(line, []byte(": "))
	return status, string(after), true
}

// jsonParserError is the answer to a request net/http refused, in the API's error
// shape. The connection is closed after it, as net/http does.
func (l *Listener) jsonParserError(status int, reason string) []byte {
	var e errorBody
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		e = errorBody{Code: "headers_too_large",
			Error: fmt.Sprintf("the request line and headers are larger than %d KiB; send fewer or shorter headers", l.limits.MaxHeaderBytes>>10)}
	case http.StatusNotImplemented:
		e = errorBody{Code: "unsupported_transfer_encoding",
			Error: "the request's Transfer-Encoding is not supported; send the body with Content-Length, or chunked"}
	case http.StatusExpectationFailed:
		e = errorBody{Code: "expectation_failed", Error: "the request's Expect header is not supported; send Expect: 100-continue, or none"}
	case http.StatusHTTPVersionNotSupported:
		e = errorBody{Code: "unsupported_http_version", Error: "the request's HTTP version is not supported; use HTTP/1.1"}
	default:
		// net/http's reasons are fixed phrases of its own, never the client's bytes.
		what := "the request is not valid HTTP/1.1"
		if reason != "" {
			what += " (" + reason + ")"
		}
		e = errorBody{Code: "invalid_input", Error: what + "; check the request line and the headers: " +
			"a Host header, no header sent twice that may appear once only, no control character or space where none may be"}
	}
	body, _ := json.Marshal(e)
	body = append(body, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}
