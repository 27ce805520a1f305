package e2e

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"enrichd/cli"
)

// markdownLink is an inline link or image: [text](target), the target without spaces.
var markdownLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)

// TestDocsLinksResolve checks every relative link of README.md and docs/: the file it
// names exists, and a #fragment names a heading of that file, as a reader's click on
// the repository's web page would find it.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join("..", "README.md")}, files...)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(b))
		anchors[path] = a
		return a
	}
	checked := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range outsideCodeBlocks(string(b)) {
			for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, fragment, _ := strings.Cut(target, "#")
				resolved := file
				if path != "" {
					resolved = filepath.Join(filepath.Dir(file), path)
					if _, err := os.Stat(resolved); err != nil {
						t.Errorf("%s:%d: link %q: %s does not exist", file, n+1, target, resolved)
						continue
					}
				}
				if fragment != "" {
					if !strings.HasSuffix(resolved, ".md") {
						t.Errorf("%s:%d: link %q: a fragment on a file that is not Markdown", file, n+1, target)
					} else if !anchorsOf(resolved)[fragment] {
						t.Errorf("%s:%d: link %q: %s has no heading #%s", file, n+1, target, resolved, fragment)
					}
				}
				checked++
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d links: is the link pattern still right?", checked)
	}
}

// outsideCodeBlocks is a Markdown file's lines with those inside ``` blocks blanked,
// keeping line numbers.
func outsideCodeBlocks(text string) []string {
	lines := strings.Split(text, "\n")
	inCode := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
			lines[i] = ""
			continue
		}
		if inCode {
			lines[i] = ""
		}
	}
	return lines
}

// headingAnchors are the fragments GitHub gives a file's headings: lower case,
// punctuation but '-' and '_' dropped, spaces as '-', a repeat suffixed -1, -2, ...
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	drop := regexp.MustCompile(`[^\p{L}\p{N}\-_ ]`)
	for _, line := range outsideCodeBlocks(text) {
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
			continue
		}
		title := strings.ToLower(strings.TrimSpace(line[level:]))
		title = markdownLink.ReplaceAllStringFunc(title, func(s string) string { return s[1:strings.Index(s, "]")] })
		a := strings.ReplaceAll(drop.ReplaceAllString(title, ""), " ", "-")
		if n := seen[a]; n > 0 {
			anchors[a+"-"+itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

// TestCLIDocsMatchTheCommands checks docs/cli.md against the commands `enrichd --help`
// lists: every command and flag the page names exists, and every command and flag
// that exists is named there, so the page cannot fall behind the binary.
func TestCLIDocsMatchTheCommands(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	root := cli.NewRootCommand(cli.Program{Schema: schema, Version: version}, io.Discard, io.Discard)

	commands := map[string]bool{} // "keys create"
	flags := map[string]bool{}    // "db"
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c != root {
			commands[strings.TrimPrefix(c.CommandPath(), root.Name()+" ")] = true
		}
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Name != "help" {
				flags[f.Name] = true
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	// Named in the page: `enrichd WORD [WORD]` at the start of a code span, and --flags.
	namedCommand := regexp.MustCompile("`enrichd ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?[\\s`|]")
	namedFlag := regexp.MustCompile(`(?:^|[^\w-])--([a-z][a-z0-9-]+)`)
	for _, m := range namedCommand.FindAllStringSubmatch(doc, -1) {
		name := m[1]
		if m[2] != "" && commands[m[1]+" "+m[2]] {
			name = m[1] + " " + m[2]
		}
		if !commands[name] {
			t.Errorf("docs/cli.md names `enrichd %s`, which is no command", name)
		}
	}
	for _, m := range namedFlag.FindAllStringSubmatch(doc, -1) {
		if !flags[m[1]] {
			t.Errorf("docs/cli.md names --%s, which no command has", m[1])
		}
	}

	var missing []string
	for c := range commands {
		if !strings.Contains(doc, "`enrichd "+c) && !commandInTable(doc, c) {
			missing = append(missing, "enrichd "+c)
		}
	}
	for f := range flags {
		if !regexp.MustCompile(`(?:^|[^\w-])--` + regexp.QuoteMeta(f) + `\b`).MatchString(doc) {
			missing = append(missing, "--"+f)
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("docs/cli.md does not name %s", m)
	}
}

// commandInTable reports whether the page names a subcommand as the docs write a
// group of them: `enrichd loops enable|disable` or `/ get / delete` after its group.
func commandInTable(doc, command string) bool {
	group, sub, ok := strings.Cut(command, " ")
	if !ok {
		return false
	}
	for _, line := range strings.Split(doc, "\n") {
		if !strings.Contains(line, "`enrichd "+group+" ") {
			continue
		}
		for _, w := range regexp.MustCompile(`[a-z-]+`).FindAllString(line, -1) {
			if w == sub {
				return true
			}
		}
	}
	return false
}

// etcPath is a path under /etc/enrichd/ as the docs and the deploy files write it.
var etcPath = regexp.MustCompile(`/etc/enrichd/[A-Za-z0-9._-]*`)

// TestEnvironmentFileHasOneName: the environment file the systemd unit reads is the
// one every doc, deploy file and the Dockerfile name; a reader who follows the docs
// puts the keys where the service looks.
func TestEnvironmentFileHasOneName(t *testing.T) {
	t.Parallel()
	unit, err := os.ReadFile(filepath.Join("..", "deploy", "enrichd.service"))
	if err != nil {
		t.Fatal(err)
	}
	var envFile string
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, "EnvironmentFile="); ok {
			envFile = strings.TrimPrefix(v, "-") // "-": a missing file is not an error
		}
	}
	if !strings.HasPrefix(envFile, "/etc/enrichd/") {
		t.Fatalf("deploy/enrichd.service reads EnvironmentFile %q, not a file under /etc/enrichd/", envFile)
	}
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := filepath.Glob(filepath.Join("..", "deploy", "*"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(append(files, deploy...), filepath.Join("..", "README.md"), filepath.Join("..", "Dockerfile"), filepath.Join("..", "compose.yaml"))
	named := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			for _, p := range etcPath.FindAllString(line, -1) {
				named++
				if p != envFile {
					t.Errorf("%s:%d names %s; the unit reads %s", f, n+1, p, envFile)
				}
			}
		}
	}
	if named < 3 {
		t.Errorf("only %d mentions of %s found: the check reads the wrong files", named, envFile)
	}
}
