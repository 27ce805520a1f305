package client

import (
	"os/exec"
	"strings"
	"testing"
)

// The client is imported into programs that only call the API: it must not drag in
// the database driver or the server.
func TestLinksNothingOfTheServer(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the dependencies with")
	}
	out, err := exec.Command(goTool, "list", "-deps", "enrichd/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "modernc.org/") || dep == "enrichd/store" || dep == "enrichd/server" || dep == "enrichd/enrich" {
			t.Errorf("enrichd/client depends on %s", dep)
		}
	}
}
