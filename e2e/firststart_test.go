package e2e

import (
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// shownCommand is a command the getting started list shows.
var shownCommand = regexp.MustCompile(`<code class="cmd">(.*?)</code>`)

// restartCommand is the serve the getting started list shows to take the running
// one's place.
var restartCommand = regexp.MustCompile(`<code class="cmd restart">(.*?)</code>`)

// commandText is a shown command as a reader copies it: its text, without the
// markup that keeps its words whole.
func commandText(shown string) string {
	return html.UnescapeString(markup.ReplaceAllString(shown, ""))
}

var markup = regexp.MustCompile(`<[^>]*>`)

// firstStartLink is the link serve prints on a database with no user.
var firstStartLink = regexp.MustCompile(`http://127\.0\.0\.1:\d+/dashboard/install\?token=[A-Za-z0-9_-]{43}`)

// startBinary runs the binary's serve on db until it is stopped or the test ends, and
// returns it once it listens.
func startBinary(t *testing.T, bin, db string, extra ...string) *serveProcess {
	t.Helper()
	return startBinaryServe(t, bin, "serve", nil, append([]string{"--db", db}, extra...)...)
}

// link waits for the first-start link on stderr.
func (s *serveProcess) link(t *testing.T) string {
	t.Helper()
	return waitFirstStartLink(t, s.log)
}

// waitFirstStartLink waits for the first-start link serve prints on stderr just after
// it logs that it listens.
func waitFirstStartLink(t *testing.T, stderr *syncBuffer) string {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		if l := firstStartLink.FindString(stderr.String()); l != "" {
			return l
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no first-start link on stderr:\n%s", stderr.String())
	return ""
}

// TestFirstStartOfTheBinary starts the real binary on a fresh database, as a new user
// does: it prints where the API and the dashboard are and a one-time link; a restart
// prints a new one and the old one stops working; the link's form, sent over HTTP,
// creates the organization and its admin and signs them in, to an overview that lists
// what is left to do, ticked as the CLI does it; the link is refused a second time;
// and once a user exists serve prints nothing of it.
func TestFirstStartOfTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	bin := enrichdBinary(t)
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		firstStart(t, bin, newDBPath(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		firstStart(t, bin, storetest.PostgresURL(t))
	})
}

func firstStart(t *testing.T, bin, db string) {
	is := is.New(t)
	cli := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append(args, "--db", db)...).CombinedOutput()
		if err != nil {
			t.Fatalf("enrichd %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	// Beside a SQLite database serve makes its key file; PostgreSQL has no file beside
	// it, and serve is given one.
	keyFile, keyArgs := db+".secret-key", []string(nil)
	if store.Engine(db) != "sqlite" {
		keyFile = filepath.Join(t.TempDir(), "enrichd.secret-key")
		keyArgs = []string{"--secret-key-file", keyFile}
	}
	s := startBinary(t, bin, db, keyArgs...)
	old := s.link(t)
	out := s.stop(t)
	is.True(strings.HasPrefix(old, s.base+"/dashboard/install?token="))
	contains(t, out, "This database has no user yet.")
	contains(t, out, "API:        "+s.base+"/v1/")
	contains(t, out, "Dashboard:  "+s.base+"/dashboard/")
	contains(t, out, "It works once, for\n1 hour")
	is.Equal(strings.Count(out, "/dashboard/install?token="), 1) // once a start
	// The first start made the key that seals organizations' own vendor keys and names
	// the people the database holds data about, readable by its owner alone, and
	// logged where it is.
	info, err := os.Stat(keyFile)
	is.NoErr(err)
	is.Equal(info.Mode().Perm(), os.FileMode(0o600))
	sealingKey, err := os.ReadFile(keyFile)
	is.NoErr(err)
	abs, err := filepath.Abs(keyFile)
	is.NoErr(err)
	contains(t, out, `"msg":"created the secret key file (mode 0600): back it up with the database`)
	contains(t, out, `"path":"`+abs+`"`)
	is.True(!strings.Contains(out, strings.TrimSpace(string(sealingKey)))) // its contents are not logged

	s = startBinary(t, bin, db, keyArgs...)
	link := s.link(t)
	is.True(link != old) // a new one each start
	jar, err := cookiejar.New(nil)
	is.NoErr(err)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	get := func(u string) (int, string) {
		t.Helper()
		res, err := client.Get(u)
		is.NoErr(err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		is.NoErr(err)
		return res.StatusCode, string(body)
	}
	oldToken := old[strings.Index(old, "/dashboard/"):]
	status, body := get(s.base + oldToken) // the last start's link, on this one's port
	is.Equal(status, http.StatusNotFound)
	contains(t, body, "first-start link is not valid")

	// The root leads to the dashboard, which asks to sign in; the icon is served.
	status, body = get(s.base + "/")
	is.Equal(status, http.StatusOK)
	contains(t, body, `action="/dashboard/login"`)
	status, _ = get(s.base + "/favicon.ico")
	is.Equal(status, http.StatusOK)

	status, body = get(link)
	is.Equal(status, http.StatusOK)
	contains(t, body, `action="/dashboard/install"`)
	token := strings.TrimPrefix(link, s.base+"/dashboard/install?token=")
	form := url.Values{"token": {token}, "org": {"acme"}, "email": {"owner@acme.com"},
		"password": {"correct horse battery staple"}, "confirm": {"correct horse battery staple"}}
	res, err := client.PostForm(s.base+"/dashboard/install", form)
	is.NoErr(err)
	page, err := io.ReadAll(res.Body)
	res.Body.Close()
	is.NoErr(err)
	is.Equal(res.StatusCode, http.StatusOK) // followed to the overview, signed in
	is.True(strings.HasPrefix(res.Request.URL.String(), s.base+"/dashboard/?notice="))
	overview := string(page)
	contains(t, overview, "acme · admin")
	contains(t, overview, "Getting started")
	// The commands name the database serve runs on, so they work where it runs.
	shown := map[string]string{}
	for _, m := range shownCommand.FindAllStringSubmatch(overview, -1) {
		c := commandText(m[1])
		words := strings.Fields(c)
		is.True(len(words) > 3 && words[0] == "./enrichd" && (words[2] == "--db" || words[3] == "--db"))
		shown[strings.Join(words[1:2], " ")+" "+words[len(words)-1]] = c
	}
	grant, imp, key := shown["credits 1000"], shown["import examples/people-and-companies.jsonl"], shown["keys first"]
	is.True(strings.HasSuffix(grant, " --org acme --amount 1000"))
	is.True(strings.HasSuffix(key, " --org acme --name first"))
	// The commands are run in another terminal, beside the serve showing them: a
	// second serve there would find its address taken. Serving other sources is a
	// restart of this one, shown as such, on its database and its address.
	for _, c := range shown {
		if strings.Fields(c)[1] == "serve" {
			t.Errorf("the list shows %q among the commands to run beside the running serve", c)
		}
	}
	m := restartCommand.FindStringSubmatch(overview)
	if m == nil {
		t.Fatalf("the list shows no serve to restart with sources that look things up:\n%s", overview)
	}
	restart := commandText(m[1])
	contains(t, restart, " --addr 127.0.0.1:0 --sources dataset,web")
	is.Equal(strings.Count(overview, `<li class="todo">`), 3)

	// A second use is refused, and makes nobody.
	res, err = http.PostForm(s.base+"/dashboard/install", url.Values{"token": {token}, "org": {"evil"},
		"email": {"eve@evil.com"}, "password": {"another long password"}, "confirm": {"another long password"}})
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusNotFound)
	status, _ = get(link)
	is.Equal(status, http.StatusNotFound)
	contains(t, cli("users", "list"), "owner@acme.com")
	is.True(!strings.Contains(cli("users", "list"), "eve@evil.com"))

	// The list's commands, run as shown, tick its steps; with all three it is gone.
	asShown := func(command string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", strings.Replace(command, "./enrichd", bin, 1))
		cmd.Dir = ".." // the checkout, where a reader runs them
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", command, err, out)
		}
	}
	asShown(grant)
	asShown(imp)
	_, overview = get(s.base + "/dashboard/")
	is.Equal(strings.Count(overview, `<li class="done">`), 2)
	is.Equal(strings.Count(overview, `<li class="todo">`), 1)
	asShown(key)
	_, overview = get(s.base + "/dashboard/")
	contains(t, overview, `id="balance">1000<`)
	is.True(!strings.Contains(overview, "Getting started"))
	s.stop(t)

	// Stopped, the serve the list showed takes its place, on the same database.
	restartCmd := exec.Command("sh", "-c", "exec "+strings.Replace(restart, "./enrichd", bin, 1))
	restartCmd.Dir = ".."
	restarted := startServeProcess(t, "the restart shown", restartCmd)
	contains(t, restarted.stop(t), `"sources":"dataset,web"`)

	// A user exists: the next start prints nothing of a first start.
	s = startBinary(t, bin, db, keyArgs...)
	time.Sleep(200 * time.Millisecond) // what would be printed follows the listening line at once
	out = s.stop(t)
	is.True(!strings.Contains(out, "no user yet"))
	is.True(!strings.Contains(out, "/dashboard/install"))
	is.True(!strings.Contains(out, "created the secret key file")) // made once, then read
	again, err := os.ReadFile(keyFile)
	is.NoErr(err)
	is.Equal(again, sealingKey)
	for _, l := range lines(out) {
		is.True(strings.HasPrefix(l, "{")) // the JSON log alone
	}
}
