package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// No tool can be made to panic or fail inside from outside, so a tool's handler is
// driven here with a body that does: the agent gets the API's 500 sentence with the
// requestId, as a tool error, and the log says what happened.
func TestAToolThatPanicsOrFailsAnswersAToolError(t *testing.T) {
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "enrichd.db"), storetest.Schema(t), store.WithSubjectKey(storetest.SubjectKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var logs bytes.Buffer
	cfg := DefaultConfig()
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	s := New(db, cfg)

	for name, run := range map[string]func(context.Context, *store.Principal, json.RawMessage) (any, error){
		"a panic": func(context.Context, *store.Principal, json.RawMessage) (any, error) { panic("a bug in a tool") },
		"an internal error": func(context.Context, *store.Principal, json.RawMessage) (any, error) {
			return nil, errors.New("disk on fire")
		},
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			ri := &requestInfo{id: "req-" + strings.ReplaceAll(name, " ", "-")}
			ctx := context.WithValue(context.WithValue(t.Context(), requestInfoKey, ri), principalKey, &store.Principal{OrgID: "org"})
			res, err := s.mcpTool(run)(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "boom"}})
			is.NoErr(err) // a tool error, not a protocol error
			is.True(res.IsError)
			out := res.StructuredContent.(mcpToolError)
			is.Equal(out.Status, 500)
			is.Equal(out.RequestID, ri.id)
			is.True(strings.HasPrefix(out.Error, "something went wrong on our side"))
			is.True(ri.err != nil) // the request's log line is an ERROR with the cause
		})
	}
	is := is.New(t)
	is.True(strings.Contains(logs.String(), `"msg":"recovered from a panic in mcp tool boom"`))
	is.True(strings.Contains(logs.String(), `"requestId":"req-a-panic"`))
}
