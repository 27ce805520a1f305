package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"enrichd/server/servertest"

	// The runtime the generated client imports. Importing it here keeps it, at the
	// version go.sum vouches for, among the module's requirements, so the generated
	// client below builds from the module cache alone.
	_ "github.com/oapi-codegen/runtime"
)

// TestAGeneratedGoClientCompiles generates a Go client from the document with
// oapi-codegen (the version the go.mod's tool directive pins) at its default settings
// and builds and vets it. Generators read a document more literally than validators:
// schemas referenced only from webhooks are pruned away, a const without a type
// becomes interface{}, an enum holding null becomes a bogus constant.
func TestAGeneratedGoClientCompiles(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("generates and compiles a client")
	}
	moduleRoot, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing but the package, what to generate and where: every other setting is the
	// generator's default (pruning of unused components included).
	write("oapi-codegen.yaml", "package: enrichclient\ngenerate:\n  client: true\n  models: true\noutput: "+
		filepath.Join(dir, "client.gen.go")+"\n")
	doc, err := filepath.Abs(servertest.OpenAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	// go.mod and go.sum are taken as they are. The generator's own modules may still
	// have to come from the module proxy (nothing this module builds imports them);
	// the client's build fetches nothing: building this test brought in what it needs.
	env := append(os.Environ(), "GOFLAGS="+os.Getenv("GOFLAGS")+" -mod=readonly", "GOWORK=off")
	offline := append(env[:len(env):len(env)], "GOPROXY=off")
	goIn := func(env []string, dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run := func(dir string, args ...string) string {
		t.Helper()
		return goIn(offline, dir, args...)
	}
	goIn(env, moduleRoot, "tool", "oapi-codegen", "-config", filepath.Join(dir, "oapi-codegen.yaml"), doc)

	// A module of its own for the client, requiring what it imports at the versions
	// this module resolved, checked against this module's go.sum.
	var mods []struct{ Path, Version string }
	dec := json.NewDecoder(strings.NewReader(run(moduleRoot, "list", "-m", "-json",
		"github.com/oapi-codegen/runtime", "github.com/google/uuid", "github.com/apapsch/go-jsonmerge/v2")))
	for dec.More() {
		var m struct{ Path, Version string }
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		mods = append(mods, m)
	}
	goVersion := strings.TrimSpace(run(moduleRoot, "list", "-m", "-f", "{{.GoVersion}}"))
	goMod := "module enrichclient\n\ngo " + goVersion + "\n\nrequire (\n"
	for _, m := range mods {
		goMod += "\t" + m.Path + " " + m.Version + "\n"
	}
	write("go.mod", goMod+")\n")
	sum, err := os.ReadFile(filepath.Join(moduleRoot, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))
	run(dir, "build", "./...")
	run(dir, "vet", "./...")

	// The event schemas a receiver decodes are there, typed.
	gen, err := os.ReadFile(filepath.Join(dir, "client.gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"type WebhookEvent struct", "type TaskSucceededEvent struct", "type TaskFailedEvent struct", "type TestEvent struct",
		"type DatePrecision string", "StartDatePrecision *DatePrecision", `PaymentRequiredErrorCode = "credits_expired"`,
		`NotFoundErrorCode = "not_found"`} {
		if !strings.Contains(string(gen), want) {
			t.Errorf("the generated client has no %q", want)
		}
	}
	if strings.Contains(string(gen), `"<nil>"`) {
		t.Error("an enum holding null became a constant")
	}
}

// TestTheDocumentSaysWhatGeneratorsNeed checks the document for what validators let
// pass and generators trip on: a const or an enum whose schema names no type, an enum
// holding null (say "or null" with anyOf instead), and a tag used by an operation but
// not declared.
func TestTheDocumentSaysWhatGeneratorsNeed(t *testing.T) {
	t.Parallel()
	s := loadOpenAPI(t)
	var doc any
	if err := json.Unmarshal(s.Raw, &doc); err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, tag := range doc.(map[string]any)["tags"].([]any) {
		declared[tag.(map[string]any)["name"].(string)] = true
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			_, typed := v["type"]
			if _, ok := v["const"]; ok && !typed {
				t.Errorf("%s: a const with no type", path)
			}
			if enum, ok := v["enum"].([]any); ok {
				if !typed {
					t.Errorf("%s: an enum with no type", path)
				}
				for _, e := range enum {
					if e == nil {
						t.Errorf("%s: an enum holding null", path)
					}
				}
			}
			if _, isOp := v["operationId"]; isOp {
				tags, _ := v["tags"].([]any)
				for _, tag := range tags {
					if !declared[tag.(string)] {
						t.Errorf("%s: tag %q is not declared", path, tag)
					}
				}
			}
			for k, child := range v {
				walk(path+"/"+k, child)
			}
		case []any:
			for i, child := range v {
				walk(fmt.Sprintf("%s/%d", path, i), child)
			}
		}
	}
	walk("#", doc)
}
