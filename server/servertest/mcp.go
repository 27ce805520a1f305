package servertest

import (
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// withKey sets the API key on every request of an MCP client, as an agent's
// configuration of headers does.
type withKey struct {
	key  string
	base http.RoundTripper
}

func (k withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if k.key != "" {
		r.Header.Set("Authorization", "Bearer "+k.key)
	}
	return k.base.RoundTrip(r)
}

// MCPConnect connects the SDK's client to url with key ("" sends none).
func MCPConnect(t testing.TB, url, key string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "enrichd-test", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: withKey{key: key, base: Transport}}}
	cs, err := client.Connect(t.Context(), transport, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func (e *Env) MCP(key string) *mcp.ClientSession {
	e.T.Helper()
	cs, err := MCPConnect(e.T, e.HTTP.URL, key)
	if err != nil {
		e.T.Fatalf("connecting to /mcp: %v", err)
	}
	return cs
}
