// Package dashboard is the browser's side of the same service: server-rendered pages
// over the same store methods as the API, each page readable without JavaScript, with
// htmx (vendored, embedded) making forms and polling nicer where it runs. Every change
// a page makes goes through package server's own checks and task submission (the
// surface in server/pages.go), so a page and an endpoint cannot differ; the server
// mounts the pages (server/routes.go lists their paths) and runs their middleware.
// Its HTTP tests (package dashboard_test) drive the pages in a real server through
// server/servertest, the helpers they share with the API's tests.
package dashboard

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
)

//go:embed all:templates static
var dashboardFiles embed.FS

// dashboardPages are parsed once, each page with the layout and the shared partials, so
// that every page defines its own "content" (and fragments htmx asks for by name).
type dashboardPages map[string]*template.Template

func parseDashboardPages() dashboardPages {
	shared := template.Must(template.New("").Funcs(dashboardFuncs).ParseFS(dashboardFiles, "templates/_*.html"))
	names, err := fs.Glob(dashboardFiles, "templates/*.html")
	if err != nil {
		panic(err)
	}
	pages := dashboardPages{}
	for _, name := range names {
		base := path.Base(name)
		if strings.HasPrefix(base, "_") {
			continue
		}
		t := template.Must(template.Must(shared.Clone()).ParseFS(dashboardFiles, name))
		pages[strings.TrimSuffix(base, ".html")] = t
	}
	return pages
}

// view is what every page's template gets: who is signed in, where they are, and the
// page's own data.
type view struct {
	User    *store.User
	Title   string
	Section string // the navigation entry to highlight
	Notice  string // a one-line confirmation shown at the top
	Data    any
	Now     time.Time
}

// IsAdmin is read by templates to show or hide what a viewer may not do.
func (v view) IsAdmin() bool { return v.User != nil && v.User.Role == store.RoleAdmin }

// render writes a whole page, or only the named fragment when htmx asks for one with
// the HX-Target it swaps (a template of that name in the page).
func (s *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, page string, v view) {
	t, ok := s.dashboard.pages[page]
	if !ok {
		s.dashError(w, r, fmt.Errorf("no dashboard page %q", page))
		return
	}
	v.User, v.Now = dashUser(r), s.db.Now()
	name := "layout"
	if target := r.Header.Get("HX-Target"); r.Header.Get("HX-Request") == "true" && target != "" && t.Lookup("#"+target) != nil {
		name = "#" + target
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, v); err != nil {
		s.dashError(w, r, fmt.Errorf("rendering %s: %w", page, err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// dashError answers an error as a page: the status the API would give (statusOf, the
// one mapping), the message when it is meant for people, and the requestId for a 500.
func (s *Dashboard) dashError(w http.ResponseWriter, r *http.Request, err error) {
	var e *enrich.Error
	status, msg := http.StatusInternalServerError, ""
	if errors.As(err, &e) && e.Kind != enrich.KindInternal {
		status, msg = server.StatusOf[e.Kind], e.Message
		if e.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
		}
	} else {
		id, closed := server.NoteInternalError(r, err)
		if closed {
			w.WriteHeader(server.StatusClientClosed)
			return
		}
		msg = "Something went wrong on our side. Retrying is safe; quoting request " + id + " helps us find it."
	}
	if status == http.StatusNotFound && msg == "" {
		msg = "There is nothing here."
	}
	t := s.dashboard.pages["error"]
	// htmx swaps the answer into the part of the page it asked for (the layout sets it
	// to swap errors too): there, the message alone.
	name, target := "layout", ""
	if r.Header.Get("HX-Request") == "true" {
		name, target = "#error", server.Clip(r.Header.Get("HX-Target"), 100)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, view{User: dashUser(r), Title: http.StatusText(status), Now: s.db.Now(),
		Data: map[string]any{"Status": status, "Message": msg, "Target": target}}); err != nil {
		http.Error(w, msg, status)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// maxForm bounds a dashboard form, as maxBody bounds an API request.
const maxForm = 64 << 10

// parseForm reads a urlencoded form of at most maxForm bytes whose every value is valid
// UTF-8 and at most maxLen characters.
func parseForm(w http.ResponseWriter, r *http.Request, maxLen int) error {
	// A declared length over the limit is refused unread, before 100 Continue.
	if r.ContentLength > maxForm {
		return enrich.Errorf(enrich.KindInvalid, "the form is larger than %d KiB", maxForm>>10)
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return enrich.Errorf(enrich.KindInvalid, "the form is larger than %d KiB", maxForm>>10)
		}
		return enrich.Errorf(enrich.KindInvalid, "the form could not be read: %v", err)
	}
	for name, vals := range r.PostForm {
		for _, v := range vals {
			if !utf8.ValidString(v) {
				return enrich.Errorf(enrich.KindInvalid, "%s is not valid UTF-8", server.Clip(name, 40))
			}
			if utf8.RuneCountInString(v) > maxLen {
				return enrich.Errorf(enrich.KindInvalid, "%s is longer than %d characters", server.Clip(name, 40), maxLen)
			}
		}
	}
	return nil
}

// formValue is a form field trimmed, or nil when it was left empty: the API's "not sent".
func formValue(r *http.Request, name string) *string {
	v := strings.TrimSpace(r.PostFormValue(name))
	if v == "" {
		return nil
	}
	return &v
}

// seeOther sends the browser on after a form, with a notice for the next page, signed
// for the user and the page it goes to (see notice).
func seeOther(w http.ResponseWriter, r *http.Request, to, notice string) {
	if notice != "" {
		u, _ := url.Parse(to)
		q := u.Query()
		q.Set("notice", notice)
		q.Set("sig", noticeSig(dashUser(r), u.Path, notice))
		u.RawQuery = q.Encode()
		to = u.String()
	}
	if r.Header.Get("HX-Request") == "true" {
		w.Header().Set("HX-Location", to)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// notice is the confirmation a redirect carried, when seeOther signed it for this user
// and this page: the dashboard shows no text a link made up (a line under the site's
// own name telling people to call a number), nor one said to someone else.
func notice(r *http.Request) string {
	q := r.URL.Query()
	n, sig := q.Get("notice"), q.Get("sig")
	if n == "" || len(n) > maxNotice || !hmac.Equal([]byte(sig), []byte(noticeSig(dashUser(r), r.URL.Path, n))) {
		return ""
	}
	return n
}

// maxNotice bounds a notice read back: the longest the dashboard says names a Loop
// and a task's target.
const maxNotice = 4096

// noticeKey signs notices. It lives as long as the process: a notice is read by the
// page a redirect leads to, moments later, and one a restart voids is merely not shown.
var noticeKey = func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(err)
	}
	return k
}()

func noticeSig(u *store.User, path, notice string) string {
	userID := ""
	if u != nil {
		userID = u.ID
	}
	mac := hmac.New(sha256.New, noticeKey)
	mac.Write([]byte(userID + "\x00" + path + "\x00" + notice))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

var dashboardFuncs = template.FuncMap{
	"words": shellWords,
	"when": func(t any) string {
		switch t := t.(type) {
		case time.Time:
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		case *time.Time:
			if t == nil {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		return ""
	},
	"day": func(t time.Time) string { return t.UTC().Format("Jan 2") },
	"ago": func(now time.Time, t any) string {
		var at time.Time
		switch t := t.(type) {
		case time.Time:
			at = t
		case *time.Time:
			if t == nil {
				return "never"
			}
			at = *t
		}
		return ago(now, at)
	},
	"pretty": func(v any) string {
		var raw []byte
		switch v := v.(type) {
		case json.RawMessage:
			raw = v
		case []byte:
			raw = v
		case string:
			raw = []byte(v)
		default:
			b, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				return fmt.Sprint(v)
			}
			return string(b)
		}
		var out bytes.Buffer
		if json.Indent(&out, raw, "", "  ") != nil {
			return string(raw)
		}
		return out.String()
	},
	"deref": func(v any) any {
		switch v := v.(type) {
		case *string:
			if v == nil {
				return ""
			}
			return *v
		case *int:
			if v == nil {
				return ""
			}
			return *v
		}
		return v
	},
	"percent": func(part, whole int64) string {
		if whole == 0 {
			return "—"
		}
		return strconv.FormatFloat(math.Round(float64(part)*1000/float64(whole))/10, 'f', -1, 64) + "%"
	},
	"prose":          prose,
	"plural":         plural,
	"addi":           func(a, b int64) int64 { return a + b },
	"addf":           func(a, b float64) float64 { return a + b },
	"subf":           func(a, b float64) float64 { return a - b },
	"recentFailures": func() int { return recentFailures },
	"lookupName":     lookupName,
	"query": func(pairs ...string) template.URL {
		q := url.Values{}
		for i := 0; i+1 < len(pairs); i += 2 {
			if pairs[i+1] != "" {
				q.Set(pairs[i], pairs[i+1])
			}
		}
		return template.URL(q.Encode())
	},
}

// prose shows a message meant for people, whose commands and names are quoted as
// Markdown quotes code (`enrichd serve`), with those quotes shown as code.
func prose(msg string) template.HTML {
	parts := strings.Split(msg, "`")
	if len(parts)%2 == 0 { // an unpaired quote: shown as it is
		return template.HTML(template.HTMLEscapeString(msg))
	}
	var b strings.Builder
	for i, part := range parts {
		if i%2 == 1 && part != "" {
			b.WriteString("<code>" + template.HTMLEscapeString(part) + "</code>")
			continue
		}
		b.WriteString(template.HTMLEscapeString(part))
	}
	return template.HTML(b.String())
}

// plural words a count of things: "1 watch", "2 watches".
func plural(n any, one, many string) string {
	s := fmt.Sprint(n)
	if s == "1" {
		return "1 " + one
	}
	return s + " " + many
}

func ago(now, t time.Time) string {
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = strconv.Itoa(int(d.Seconds())) + " s"
	case d < time.Hour:
		s = strconv.Itoa(int(d.Minutes())) + " min"
	case d < 48*time.Hour:
		s = strconv.Itoa(int(d.Hours())) + " h"
	default:
		s = strconv.Itoa(int(d.Hours()/24)) + " days"
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

// serveDashboardStatic serves the embedded CSS and JavaScript. Their names do not
// change between versions, so a day of caching is the most a stale file can last.
func serveDashboardStatic() http.Handler {
	static, err := fs.Sub(dashboardFiles, "static")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix("/dashboard/static/", http.FileServerFS(static))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=86400")
		files.ServeHTTP(w, r)
	})
}
