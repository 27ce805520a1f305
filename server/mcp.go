package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"enrichd/enrich"
	"enrichd/store"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP endpoint: the Model Context Protocol's Streamable HTTP transport at /mcp, for
// AI agents. Its tools are the API's endpoints under other names, through the same
// code: the same checks and refusals, charges, refunds, idempotency keys, Bearer key,
// organization and rate limits. Only the way of answering differs: a tool waits a
// while for its task to settle, and answers with the result.

const (
	defaultMCPWait = 20 * time.Second
	maxMCPWait     = 60 * time.Second
)

// mcpHold is how long an /mcp request may hold its connection past the listener's
// write timeout: a tool's longest wait. A variable only so that a test of the bound
// need not take a minute.
var mcpHold = maxMCPWait

// mcpPoll is how often a waiting tool looks at its task: often at first, when a task
// served from the store or a quick source settles, then less.
var mcpPoll = struct{ first, max time.Duration }{25 * time.Millisecond, 500 * time.Millisecond}

// handleMCP serves the MCP endpoint behind authed. It is stateless: every POST is a
// whole exchange, authenticated and rate-limited on its own, so any replica of a
// scale-out can answer any request and no session outlives its request.
func handleMCP(s *Server) http.Handler {
	// The SDK tells of each session it opens and closes at INFO, which is every request
	// here; its warnings and errors are worth a line, beside the request's own.
	sdkLog := slog.New(minLevel{s.log.Handler(), slog.LevelWarn})
	srv := mcp.NewServer(&mcp.Implementation{Name: "enrichd", Title: "enrichd enrichment", Version: buildVersion()},
		&mcp.ServerOptions{Instructions: mcpInstructions, Logger: sdkLog,
			// The tools are the same for the server's life: no list_changed notification
			// is ever sent, so none is promised (the SDK's default promises one).
			Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{ListChanged: false}}})
	s.addMCPTools(srv)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       sdkLog,
		// The protection is against a web page reaching a local server through DNS
		// rebinding; every request here carries an API key, which such a page does not
		// have, and a reverse proxy on the same host sends its own Host header.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        maxBody,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An enrichment tool may wait up to maxMCPWait before it answers, which the
		// listener's write timeout, sized for the API's quick answers, would cut off.
		hold := mcpHold + s.cfg.HTTP.withDefaults().WriteTimeout
		// And no request holds its connection longer: the SDK keeps the stream of a
		// subscriptions/listen open until the client leaves, and enrichd, whose tools
		// never change, has nothing to send on it. The stream ends at hold, and the
		// second after it is for writing its end.
		ctx, cancel := context.WithTimeout(r.Context(), hold)
		defer cancel()
		r = r.WithContext(context.WithValue(ctx, mcpRequestKey{}, r.Context()))
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(hold + time.Second))
		// A batch would run its every call on one request of the key's rate limit. The
		// protocol dropped batches in 2025-06-18, and the SDK refuses them from then on,
		// but it reads a request without Mcp-Protocol-Version as an older protocol.
		body := bufio.NewReader(http.MaxBytesReader(w, r.Body, maxBody))
		if isBatch(body) {
			writeRPCError(w, http.StatusBadRequest, nil, rpcInvalidRequest, "a JSON-RPC batch is not accepted: send one message a request")
			return
		}
		var read bytes.Buffer // the message as the SDK reads it, for the id of a refusal
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(body, &read), r.Body}
		rw := &rpcRefusals{ResponseWriter: w}
		h.ServeHTTP(rw, r) // a tool whose client left marks the request clientClosed, logged as a hang-up
		rw.finish(read.Bytes())
	})
}

// The JSON-RPC 2.0 error codes of a refused message.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
	rpcInternalError  = -32603
)

// rpcRefusals turns what the SDK's transport refuses in plain text (a malformed
// message, a wrong Accept or Content-Type, an unknown method, a body too large) into
// a JSON-RPC error response with the same HTTP status: every answer of /mcp is JSON,
// and a JSON-RPC client reads it as an error of the protocol. What the SDK answers as
// JSON already passes through.
type rpcRefusals struct {
	http.ResponseWriter
	refused int // the status of a plain-text refusal held back; 0 while there is none
	text    bytes.Buffer
}

func (w *rpcRefusals) WriteHeader(code int) {
	if w.refused == 0 && code >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.refused = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *rpcRefusals) Write(b []byte) (int, error) {
	if w.refused != 0 {
		return w.text.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection, as the SDK flushes through it.
func (w *rpcRefusals) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes a refusal held back as a JSON-RPC error, with the id of the message
// when it is a request whose id could be read (JSON-RPC's null otherwise).
func (w *rpcRefusals) finish(message []byte) {
	if w.refused == 0 {
		return
	}
	text := strings.TrimSpace(w.text.String())
	code := rpcInvalidRequest
	switch {
	case w.refused >= 500:
		code = rpcInternalError
	case strings.HasPrefix(text, "malformed payload") && !json.Valid(message):
		code = rpcParseError // JSON that is not a message is an invalid request
	case strings.HasPrefix(text, "JSON RPC not handled"):
		code = rpcMethodNotFound
	}
	var msg struct {
		ID any `json:"id"`
	}
	if code != rpcParseError {
		dec := json.NewDecoder(bytes.NewReader(message))
		dec.UseNumber()  // an id is answered as sent, a large number too
		dec.Decode(&msg) // an id that cannot be read stays null
	}
	w.Header().Del("X-Content-Type-Options")
	writeRPCError(w.ResponseWriter, w.refused, msg.ID, code, text)
}

// rpcErrorResponse is a JSON-RPC error response.
type rpcErrorResponse struct {
	JSONRPC string `json:"jsonrpc"`
	ID      any    `json:"id"` // a string, a number, or null
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeRPCError answers a JSON-RPC error response with the message's id, null when
// it has none that a response may carry (a string or a number).
func writeRPCError(w http.ResponseWriter, status int, id any, code int, message string) {
	res := rpcErrorResponse{JSONRPC: "2.0"}
	switch id.(type) {
	case string, json.Number:
		res.ID = id
	}
	res.Error.Code, res.Error.Message = code, message
	encode(w, status, res)
}

// mcpRequestKey holds the context of the HTTP request a tool is called in, as the
// server gave it: done when the client has left. The SDK runs a tool in a context that
// the request's end does not cancel, so a tool that waits watches this one.
type mcpRequestKey struct{}

// mcpRequestDone is closed when the client of the request a tool is called in has left
// (nil, which never fires, outside one).
func mcpRequestDone(ctx context.Context) <-chan struct{} {
	if rc, ok := ctx.Value(mcpRequestKey{}).(context.Context); ok {
		return rc.Done()
	}
	return nil
}

// mcpClientLeft reports whether the client of the request a tool is called in has left.
func mcpClientLeft(ctx context.Context) bool {
	select {
	case <-mcpRequestDone(ctx):
		return true
	default:
		return false
	}
}

// isBatch reports whether a JSON text starts as an array, a JSON-RPC batch, reading
// only the white space before its first byte. A read error is left for the SDK to
// read again and answer.
func isBatch(body *bufio.Reader) bool {
	for {
		b, err := body.ReadByte()
		if err != nil {
			return false
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		body.UnreadByte()
		return b == '['
	}
}

// minLevel passes on the records of its handler's at or above min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

const mcpInstructions = `enrichd enriches companies and people from a company domain, a company page URL, a person's profile URL or a work email address. Each enrichment is charged in credits (company 1, profile URL 1, email 3) and refunded when it fails; get_balance says what is left. Pass an idempotency_key that you keep for the same request, so a retry after a timeout or an error is answered with the first task instead of paying again.`

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// mcpEnrichArgs are the arguments every enrichment tool takes beside its input.
type mcpEnrichArgs struct {
	IdempotencyKey *string `json:"idempotency_key,omitempty"`
	WaitSeconds    *int    `json:"wait_seconds,omitempty"`
}

func (a mcpEnrichArgs) wait() (time.Duration, error) {
	if a.WaitSeconds == nil {
		return defaultMCPWait, nil
	}
	if n := *a.WaitSeconds; n < 0 || n > int(maxMCPWait/time.Second) {
		return 0, enrich.Errorf(enrich.KindInvalid, "wait_seconds must be an integer from 0 to %d", int(maxMCPWait/time.Second))
	}
	return time.Duration(*a.WaitSeconds) * time.Second, nil
}

type mcpCompanyArgs struct {
	companyRequest
	mcpEnrichArgs
}

type mcpPersonArgs struct {
	personRequest
	mcpEnrichArgs
}

type mcpGetTaskArgs struct {
	TaskID string `json:"task_id"`
}

type mcpListTasksArgs struct {
	Status   *string `json:"status,omitempty"`
	Page     *int    `json:"page,omitempty"`
	PageSize *int    `json:"pageSize,omitempty"`
}

// mcpTaskResult is an enrichment tool's or get_task's structured result: the body of
// GET /v1/tasks/{id} ({task, data, error}), whether an idempotency key replayed an
// earlier task, and how to follow a task that has not settled.
type mcpTaskResult struct {
	Task json.RawMessage `json:"task"`
	Data json.RawMessage `json:"data,omitempty"`
	// Provenance and Sources are GET /v1/tasks/{id}'s: each field's source, and what
	// each source was asked.
	Provenance json.RawMessage   `json:"provenance,omitempty"`
	Sources    json.RawMessage   `json:"sources,omitempty"`
	Error      *enrich.TaskError `json:"error,omitempty"`
	Replayed   bool              `json:"replayed,omitempty"`
	Next       string            `json:"next,omitempty"`
}

// mcpToolError is a failed call's structured result: the API's error body, the status
// the API would have answered, and Retry-After's seconds where the API sends it.
type mcpToolError struct {
	errorBody
	Status     int `json:"status"`
	RetryAfter int `json:"retryAfter,omitempty"`
}

func (s *Server) addMCPTools(srv *mcp.Server) {
	yes, no := true, false
	// An enrichment asks sources outside (open world) and spends credits, but destroys
	// nothing; the others only read what is stored.
	enrichAnnotations := &mcp.ToolAnnotations{OpenWorldHint: &yes, DestructiveHint: &no}
	readAnnotations := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no}

	srv.AddTool(&mcp.Tool{
		Name:  "enrich_company",
		Title: "Enrich a company",
		Description: "Look up a company's firmographics (name, domain, industry, headcount, founding year, headquarters, description, network page) " +
			"by its website domain or its professional-network company page URL: send exactly one of domain or networkUrl. Costs 1 credit, refunded if nothing is found. " +
			"Waits up to wait_seconds for the result; if the task has not settled by then, call get_task with the task id later. " +
			"Results younger than 30 days are served from the store at once.",
		InputSchema:  json.RawMessage(mcpCompanySchema),
		OutputSchema: mcpOutputSchema(mcpTaskSchema),
		Annotations:  enrichAnnotations,
	}, s.mcpTool(func(ctx context.Context, p *store.Principal, args json.RawMessage) (any, error) {
		a, err := decodeBody[mcpCompanyArgs](args)
		if err != nil {
			return nil, err
		}
		tr, err := a.companyRequest.task(s.norm)
		if err != nil {
			return nil, err
		}
		return s.mcpEnrich(ctx, p, a.mcpEnrichArgs, tr)
	}))

	srv.AddTool(&mcp.Tool{
		Name:  "enrich_person",
		Title: "Enrich a person",
		Description: "Look up a person's profile and employment history by their professional-network profile URL (networkUrl, 1 credit), " +
			"or by their work email address (email, 3 credits) with optional hints fullName, title and location that break a tie between people the address could fit. " +
			"Personal-mailbox and role addresses are refused, and a miss or an ambiguous address is refunded. " +
			"Waits up to wait_seconds for the result (an email lookup may take longer); if the task has not settled by then, call get_task with the task id later.",
		InputSchema:  json.RawMessage(mcpPersonSchema),
		OutputSchema: mcpOutputSchema(mcpTaskSchema),
		Annotations:  enrichAnnotations,
	}, s.mcpTool(func(ctx context.Context, p *store.Principal, args json.RawMessage) (any, error) {
		a, err := decodeBody[mcpPersonArgs](args)
		if err != nil {
			return nil, err
		}
		tr, err := a.personRequest.task(s.norm)
		if err != nil {
			return nil, err
		}
		return s.mcpEnrich(ctx, p, a.mcpEnrichArgs, tr)
	}))

	srv.AddTool(&mcp.Tool{
		Name:  "get_task",
		Title: "Get a task",
		Description: "Read an enrichment task by its id: its status (queued, running, succeeded, failed, canceled), the credits charged, " +
			"the result in data once succeeded, and the reason in error once failed. Free of charge.",
		InputSchema:  json.RawMessage(mcpGetTaskSchema),
		OutputSchema: mcpOutputSchema(mcpTaskSchema),
		Annotations:  readAnnotations,
	}, s.mcpTool(func(ctx context.Context, p *store.Principal, args json.RawMessage) (any, error) {
		a, err := decodeBody[mcpGetTaskArgs](args)
		if err != nil {
			return nil, err
		}
		if a.TaskID == "" {
			return nil, enrich.Errorf(enrich.KindInvalid, "task_id is required: the id of a task an enrichment returned")
		}
		if !IsID(a.TaskID) {
			return nil, store.TaskNotFound() // as GET /v1/tasks/{id} answers for it
		}
		t, err := s.db.GetTask(ctx, p.OrgID, a.TaskID)
		if err != nil {
			return nil, err
		}
		return taskResult(t, false), nil
	}))

	srv.AddTool(&mcp.Tool{
		Name:  "list_tasks",
		Title: "List tasks",
		Description: "List the organization's enrichment tasks, newest first, optionally only those of one status, a page at a time " +
			"(page from 0, pageSize 1 to 100, 25 by default); total counts them all. Results are not included: read one with get_task. Free of charge.",
		InputSchema:  json.RawMessage(mcpListTasksSchema),
		OutputSchema: mcpOutputSchema(mcpTaskListSchema),
		Annotations:  readAnnotations,
	}, s.mcpTool(func(ctx context.Context, p *store.Principal, args json.RawMessage) (any, error) {
		a, err := decodeBody[mcpListTasksArgs](args)
		if err != nil {
			return nil, err
		}
		// The arguments are read as GET /v1/tasks reads its query, with the same limits.
		q := url.Values{}
		if a.Status != nil {
			q.Set("status", *a.Status)
		}
		if a.Page != nil {
			q.Set("page", strconv.Itoa(*a.Page))
		}
		if a.PageSize != nil {
			q.Set("pageSize", strconv.Itoa(*a.PageSize))
		}
		status, page, size, err := taskListParams(q)
		if err != nil {
			return nil, err
		}
		tasks, total, err := s.db.ListTasks(ctx, p.OrgID, status, page, size)
		if err != nil {
			return nil, err
		}
		list := struct {
			Data  []json.RawMessage `json:"data"`
			Total int64             `json:"total"`
		}{Data: make([]json.RawMessage, 0, len(tasks)), Total: total}
		for _, t := range tasks {
			list.Data = append(list.Data, t.AppendJSON(nil))
		}
		return list, nil
	}))

	srv.AddTool(&mcp.Tool{
		Name:  "get_balance",
		Title: "Get the credit balance",
		Description: "Read the organization's credit balance (what enrichments can still spend) and the ledger's totals it is derived from: " +
			"granted, charged, refunded and expired. Free of charge.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		OutputSchema: mcpOutputSchema(mcpBalanceSchema),
		Annotations:  readAnnotations,
	}, s.mcpTool(func(ctx context.Context, p *store.Principal, args json.RawMessage) (any, error) {
		if _, err := decodeBody[struct{}](args); err != nil {
			return nil, err
		}
		org, err := s.db.GetOrg(ctx, p.OrgID)
		if err != nil {
			return nil, err
		}
		return s.db.CreditBalance(ctx, org.Name)
	}))
}

// mcpActor is who a tool call acts as, for the audit log: the MCP client, through its
// API key, named by the key and by the client's own name when it gives one.
func mcpActor(p *store.Principal, client *mcp.Implementation) store.Actor {
	a := store.KeyActor(p)
	a.Kind = store.ActorMCP
	if client != nil {
		if name := clip(strings.TrimSpace(client.Name), 100); name != "" && enrich.CheckText("the client's name", name) == nil {
			full := *a.Name + " (" + name + ")"
			a.Name = &full
		}
	}
	return a
}

// mcpEnrich submits the task as the API's enrichment endpoints do, bound to the
// idempotency_key argument as they bind the Idempotency-Key header, then waits for it
// to settle.
func (s *Server) mcpEnrich(ctx context.Context, p *store.Principal, a mcpEnrichArgs, tr taskRequest) (any, error) {
	wait, err := a.wait()
	if err != nil {
		return nil, err
	}
	if a.IdempotencyKey != nil {
		if err := checkIdempotencyKey("idempotency_key", *a.IdempotencyKey); err != nil {
			return nil, err
		}
		tr.IdempotencyKey = *a.IdempotencyKey
	}
	tr.OrgID = p.OrgID
	res, err := s.submitTask(ctx, tr)
	if err != nil {
		return nil, err
	}
	t, err := s.awaitTask(ctx, p.OrgID, res.Task, wait)
	if err != nil {
		return nil, err
	}
	return taskResult(t, res.Replayed), nil
}

// awaitTask reads the task until it settles, wait runs out or the workers stop, and
// returns it as it was last read, with its result once settled. A task settled by
// another replica is seen as well as one settled here.
func (s *Server) awaitTask(ctx context.Context, orgID string, t *store.Task, wait time.Duration) (*store.Task, error) {
	deadline := time.Now().Add(wait)
	poll := mcpPoll.first
	stopping := s.bg.Stopping() // nil, which never fires, when no workers run
	for {
		if t.Settled() {
			// The enqueue answer holds no result; the stored task does.
			return s.db.GetTask(ctx, orgID, t.ID)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return t, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-mcpRequestDone(ctx):
			// Nobody is left to answer; the task carries on, for get_task.
			return nil, errors.New("the client left while the tool waited for its task")
		case <-stopping:
			// Shutting down: the task is answered as it is, to be read with get_task
			// from a replica still running, or from this one once it is back.
			return s.db.GetTask(ctx, orgID, t.ID)
		case <-time.After(min(poll, left)):
		}
		poll = min(poll*2, mcpPoll.max)
		next, err := s.db.GetTask(ctx, orgID, t.ID)
		if err != nil {
			return nil, err
		}
		t = next
	}
}

// taskResult is what get_task and the enrichment tools answer for a task.
func taskResult(t *store.Task, replayed bool) mcpTaskResult {
	out := mcpTaskResult{Task: t.AppendJSON(nil), Replayed: replayed}
	if t.Settled() {
		out.Provenance, out.Sources = taskTrace(t)
	}
	switch {
	case t.Status == store.StatusSucceeded:
		out.Data = t.Data
	case t.Status == store.StatusFailed:
		out.Error = t.Error
	case !t.Settled():
		out.Next = fmt.Sprintf("The task is %s. Call get_task with task_id %q in a few seconds to read its result; it is not charged again.", t.Status, t.ID)
	}
	return out
}

// mcpTool makes a tool's handler: it finds the request's organization, which authed
// put in the context, runs the tool, recovering from a panic, and answers with its
// result, or with its error as a tool error the agent reads.
func (s *Server) mcpTool(run func(ctx context.Context, p *store.Principal, args json.RawMessage) (any, error)) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		ri, _ := ctx.Value(requestInfoKey).(*requestInfo)
		if ri == nil {
			ri = &requestInfo{}
		}
		defer func() {
			if v := recover(); v != nil {
				s.panicked("mcp tool "+req.Params.Name, v, "requestId", ri.id)
				ri.panicked = true // a bug of ours, even when the client has gone
				res, err = s.mcpError(ctx, ri, fmt.Errorf("panic: %v", v)), nil
			}
		}()
		p, ok := ctx.Value(principalKey).(*store.Principal)
		if !ok {
			return nil, errors.New("the MCP endpoint is served without authentication")
		}
		args := req.Params.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}") // a tool called without arguments
		}
		ctx = acting(ctx, store.By{Actor: mcpActor(p, req.ClientInfo()), RequestID: ri.id})
		out, err := run(ctx, p, args)
		if err != nil {
			return s.mcpError(ctx, ri, err), nil
		}
		raw, err := json.Marshal(out)
		if err != nil {
			return s.mcpError(ctx, ri, err), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(raw)}}, StructuredContent: json.RawMessage(raw)}, nil
	}
}

// mcpError is the tool error for err: the API's error body and words, or for a failure
// of ours, the API's 500 sentence with the requestId the log line carries.
func (s *Server) mcpError(ctx context.Context, ri *requestInfo, err error) *mcp.CallToolResult {
	var e *enrich.Error
	var out mcpToolError
	if errors.As(err, &e) && e.Kind != enrich.KindInternal {
		out.Status, out.errorBody = errorBodyOf(e)
		out.RetryAfter = e.RetryAfter
	} else {
		// The request's log line says why; a client that left is its own doing.
		ri.err, ri.clientClosed = err, mcpClientLeft(ctx) && !ri.panicked
		out.Status = http.StatusInternalServerError
		out.errorBody = errorBody{Error: "something went wrong on our side; retrying is safe, and quoting the requestId helps us find it", RequestID: ri.id}
	}
	text := out.Error
	if out.Code != "" {
		text += " (" + out.Code + ")"
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: out}
}

// mcpOutputSchema is a tool's output schema: its answer, or the tool error any tool may
// answer instead. A client may hold a tool error's structured content to the schema
// too (the TypeScript SDK's client does, and throws where it does not fit), so the
// schema admits both.
func mcpOutputSchema(answer string) json.RawMessage {
	return json.RawMessage(`{"type": "object", "anyOf": [` + answer + `, ` + mcpToolErrorSchema + `]}`)
}

const mcpToolErrorSchema = `{
  "type": "object",
  "description": "A tool error (isError true): the API's error body, and the HTTP status the API would have answered.",
  "properties": {
    "error": {"type": "string", "description": "What is wrong, in the API's words."},
    "code": {"type": "string", "description": "The API's error code, such as invalid_input, insufficient_credits or not_found."},
    "status": {"type": "integer"},
    "creditsRemaining": {"type": "integer"},
    "queuedTasks": {"type": "integer"},
    "retryAfter": {"type": "integer", "description": "Seconds to wait before trying again."},
    "requestId": {"type": "string"}
  },
  "required": ["error", "status"]
}`

const mcpEnrichProps = `
    "idempotency_key": {"type": "string", "maxLength": 255, "description": "Any string you choose for this request, at most 255 characters. Calling again with the same key and the same input returns the first task instead of creating and charging another; the same key with another input is refused. Shared with the HTTP API's Idempotency-Key header."},
    "wait_seconds": {"type": "integer", "minimum": 0, "maximum": 60, "default": 20, "description": "How long to wait for the task to settle before answering: 0 to 60 seconds, 20 when left out. A task that has not settled is answered with its id, to read later with get_task."},
    "loop_id": {"type": "string", "format": "uuid", "description": "Optional: the id of a Loop (a webhook destination set up in enrichd) to post the result to as well."}`

const mcpCompanySchema = `{
  "type": "object",
  "properties": {
    "domain": {"type": "string", "description": "The company's website domain, such as acme.com (a URL is accepted and reduced to its domain)."},
    "networkUrl": {"type": "string", "description": "The company's page URL on the professional network."},` + mcpEnrichProps + `
  },
  "additionalProperties": false
}`

const mcpPersonSchema = `{
  "type": "object",
  "properties": {
    "networkUrl": {"type": "string", "description": "The person's profile URL on the professional network (1 credit)."},
    "email": {"type": "string", "description": "The person's work email address (3 credits). Personal mailboxes and role addresses are refused."},
    "fullName": {"type": "string", "description": "With email only: the person's full name, a hint that breaks a tie."},
    "title": {"type": "string", "description": "With email only: the person's job title, a hint that breaks a tie."},
    "location": {"type": "string", "description": "With email only: where the person is, a hint that breaks a tie."},` + mcpEnrichProps + `
  },
  "additionalProperties": false
}`

const mcpGetTaskSchema = `{
  "type": "object",
  "properties": {
    "task_id": {"type": "string", "format": "uuid", "description": "The task's id, as task.id of an enrichment's answer or of list_tasks."}
  },
  "required": ["task_id"],
  "additionalProperties": false
}`

const mcpListTasksSchema = `{
  "type": "object",
  "properties": {
    "status": {"type": "string", "enum": ["queued", "running", "succeeded", "failed", "canceled"], "description": "Only tasks of this status."},
    "page": {"type": "integer", "minimum": 0, "default": 0, "description": "The page, from 0."},
    "pageSize": {"type": "integer", "minimum": 1, "maximum": 100, "default": 25, "description": "Tasks a page."}
  },
  "additionalProperties": false
}`

const mcpTaskObject = `{
      "type": "object",
      "description": "The task, as the HTTP API shows it.",
      "properties": {
        "id": {"type": "string"},
        "object_type": {"type": "string", "enum": ["company", "person"]},
        "status": {"type": "string", "enum": ["queued", "running", "succeeded", "failed", "canceled"]},
        "target": {"type": "string", "description": "The normalized input the task resolved to."},
        "credits_charged": {"type": "integer", "description": "What the task cost; refunded if it fails."}
      },
      "required": ["id", "object_type", "status", "target", "credits_charged"]
    }`

const mcpTaskSchema = `{
  "type": "object",
  "properties": {
    "task": ` + mcpTaskObject + `,
    "data": {"type": "object", "description": "The result, once the task succeeded: the company or the person."},
    "error": {"type": "object", "description": "Why the task failed, once failed: code and message.", "properties": {"code": {"type": "string"}, "message": {"type": "string"}}},
    "replayed": {"type": "boolean", "description": "True when idempotency_key named an earlier task, which is returned and not charged again."},
    "next": {"type": "string", "description": "When the task has not settled: how to read its result later."}
  },
  "required": ["task"]
}`

const mcpTaskListSchema = `{
  "type": "object",
  "properties": {
    "data": {"type": "array", "items": ` + mcpTaskObject + `},
    "total": {"type": "integer", "description": "The tasks there are, on every page."}
  },
  "required": ["data", "total"]
}`

const mcpBalanceSchema = `{
  "type": "object",
  "properties": {
    "balance": {"type": "integer", "description": "Credits left to spend."},
    "granted": {"type": "integer"},
    "charged": {"type": "integer"},
    "refunded": {"type": "integer"},
    "expired": {"type": "integer"}
  },
  "required": ["balance"]
}`
