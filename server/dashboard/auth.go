package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"

	"golang.org/x/crypto/argon2"
	"golang.org/x/time/rate"
)

// Password rules: long enough to resist guessing offline, bounded so that hashing a
// pasted novel cannot be made to cost the server.
const (
	minPassword = 12
	maxPassword = 256
	maxEmail    = 254
)

// argonCost is what an argon2id hash spends: passes, memory in KiB, lanes. A hash
// records its cost, and a password is checked at the cost its hash records.
type argonCost struct {
	time, memory uint32
	threads      uint8
}

// productionCost is OWASP's recommendation for argon2id (19 MiB, 2 passes, 1 lane),
// about 30 ms on one core.
var productionCost = argonCost{time: 2, memory: 19 * 1024, threads: 1}

// passwordCost is the cost hashPassword spends: productionCost, which only this
// package's tests lower (export_test.go).
var passwordCost = productionCost

const argonKeyLen = 32

// Sign-in attempts are limited per client address and per account named, counting
// every attempt, so that guessing is slow whether it walks passwords or accounts, and
// the limit says nothing about whether an account exists.
var (
	loginRateAddr    = server.Rate{Limit: rate.Every(6 * time.Second), Burst: 10}
	loginRateAccount = server.Rate{Limit: rate.Every(time.Minute), Burst: 5}
)

// dashboardState is what the dashboard keeps beside the API's.
type dashboardState struct {
	pages          dashboardPages
	loginByAddr    *server.Limiter
	loginByAccount *server.Limiter
	crossOrigin    *http.CrossOriginProtection
	// hashing bounds the password hashes computed at once: each takes 19 MiB, so a
	// burst of sign-ins from many addresses queues here instead of exhausting memory.
	hashing chan struct{}
}

// Dashboard serves the pages. It reads the store the API's handlers read and makes
// every change through the server's own checks (server/pages.go lists them).
type Dashboard struct {
	srv       *server.Server
	db        *store.DB
	cfg       server.Config
	log       *slog.Logger
	dashboard *dashboardState
}

// New makes the dashboard of srv; serve passes it as server.Config.Dashboard.
func New(srv *server.Server) server.Pages {
	s := &Dashboard{srv: srv, db: srv.DB(), cfg: srv.Config(), log: srv.Log()}
	s.dashboard = s.newDashboard()
	return s
}

func (s *Dashboard) newDashboard() *dashboardState {
	d := &dashboardState{
		pages:          parseDashboardPages(),
		loginByAddr:    server.NewLimiter(loginRateAddr),
		loginByAccount: server.NewLimiter(loginRateAccount),
		crossOrigin:    http.NewCrossOriginProtection(),
		hashing:        make(chan struct{}, runtime.GOMAXPROCS(0)),
	}
	// Behind a proxy that passes its own Host on, a browser without Sec-Fetch-Site
	// sends forms whose Origin is the public URL's, not the Host's: this same site.
	if u, err := url.Parse(s.cfg.PublicURL); err == nil && u.Scheme != "" && u.Host != "" {
		if err := d.crossOrigin.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
			s.log.Warn("the public URL's origin is not trusted for dashboard forms", "public_url", s.cfg.PublicURL, "err", err.Error())
		}
	}
	d.crossOrigin.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.dashError(w, r, &enrich.Error{Kind: enrich.KindForbidden, Code: "cross_origin",
			Message: "This form was sent from another site, so it was refused. Open the dashboard and send it from there."})
	}))
	dummyHash() // computed before the first sign-in, which would otherwise take twice as long
	return d
}

// dummyHash is verified against when the account named does not exist, so that a
// wrong email costs the same time as a wrong password. Its password is no one's and
// its salt random, so one serves every server in the process (a test binary starts
// hundreds, and each hash takes 19 MiB).
var dummyHash = sync.OnceValue(func() string {
	h, _ := hashPassword("not a password of anyone's")
	return h
})

// withHashSlot runs f, a password hash, once one of the slots for hashing is free, or
// fails when the request ends first.
func (d *dashboardState) withHashSlot(ctx context.Context, f func()) error {
	select {
	case d.hashing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-d.hashing }()
	f()
	return nil
}

// hashPassword returns the argon2id hash of a password in the PHC string format.
func hashPassword(password string) (string, error) { return hashPasswordAt(password, passwordCost) }

func hashPasswordAt(password string, cost argonCost) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, cost.time, cost.memory, cost.threads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, cost.memory, cost.time, cost.threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// passwordMatches checks a password against a hash hashPassword made, with the cost
// the hash records.
func passwordMatches(encoded, password string) bool {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var version int
	var mem, iters uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &iters, &threads); err != nil ||
		mem == 0 || mem > 1<<20 || iters == 0 || iters > 16 || threads == 0 {
		return false
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return false
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(want) == 0 || len(want) > 64 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, iters, mem, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

func checkNewPassword(password, confirm string) error {
	switch n := utf8.RuneCountInString(password); {
	case n < minPassword:
		return enrich.Errorf(enrich.KindInvalid, "The password must be at least %d characters.", minPassword)
	case n > maxPassword:
		return enrich.Errorf(enrich.KindInvalid, "The password must be at most %d characters.", maxPassword)
	case password != confirm:
		return enrich.Errorf(enrich.KindInvalid, "The two passwords differ.")
	}
	return nil
}

// secureCookies says whether the session cookie must be Secure: the request came over
// TLS, or the public URL people reach the service at is https (TLS ends at a proxy).
func (s *Dashboard) secureCookies(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(strings.ToLower(s.cfg.PublicURL), "https://")
}

// sessionCookie is the cookie's name: with Secure, the __Host- prefix makes the
// browser refuse it from plain http and from any other host or path.
func (s *Dashboard) sessionCookie(r *http.Request) string {
	if s.secureCookies(r) {
		return "__Host-enrichd_session"
	}
	return "enrichd_session"
}

func (s *Dashboard) setSessionCookie(w http.ResponseWriter, r *http.Request, token string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: s.sessionCookie(r), Value: token, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.secureCookies(r), SameSite: http.SameSiteLaxMode})
}

type dashUserKey struct{}

// dashUser is the signed-in user of a dashboard request, nil on the public pages.
func dashUser(r *http.Request) *store.User {
	u, _ := r.Context().Value(dashUserKey{}).(*store.User)
	return u
}

// Who may use a dashboard route.
const (
	anyone = iota // the sign-in and set-password pages
	viewer        // any signed-in user
	admin         // signed-in admins
)

// dashPage wraps a dashboard handler: the headers every page carries, cross-origin
// protection on anything that is not a read, the session (an API key never counts),
// and the role.
func (s *Dashboard) dashPage(route string, who int, next http.Handler) http.Handler {
	guarded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if who != anyone {
			u, err := s.sessionUser(r)
			if err != nil {
				var e *enrich.Error
				if errors.As(err, &e) && e.Kind == enrich.KindUnauthorized {
					s.setSessionCookie(w, r, "", -1)
					to := "/dashboard/login"
					if r.Method == http.MethodGet && r.URL.RequestURI() != "/dashboard/" {
						to += "?next=" + url.QueryEscape(r.URL.RequestURI())
					}
					seeOther(w, r, to, "")
					return
				}
				s.dashError(w, r, err)
				return
			}
			server.SetRequestOrg(r, u.OrgID)
			r = server.ActAs(r.WithContext(context.WithValue(r.Context(), dashUserKey{}, u)), store.UserActor(u))
			if who == admin && u.Role != store.RoleAdmin {
				s.dashError(w, r, &enrich.Error{Kind: enrich.KindForbidden, Code: "forbidden",
					Message: "Your role is viewer: you can read everything here but change nothing. An admin of your organization can do this."})
				return
			}
		}
		if who == anyone {
			// Signing in, setting a password, the first start: their entries say who.
			r = server.ActAs(r, store.Actor{Kind: store.ActorSystem})
		}
		// An address whose id is no id names no object: not found, the store unasked.
		if err := server.RefusedID(r); err != nil {
			s.dashError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
	var h http.Handler = guarded
	h = s.dashboard.crossOrigin.Handler(h) // passes GET and HEAD, refuses cross-site writes
	return s.srv.Route(route, s.srv.LimitIP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setDashHeaders(w)
		h.ServeHTTP(w, r)
	})))
}

// setDashHeaders sets the headers every dashboard page carries, its error pages too.
func setDashHeaders(w http.ResponseWriter) {
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	// The set-password link carries its token in the URL: no page sends it on.
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
}

// withSessionUser is r with its signed-in user, when its session cookie holds one: for
// the answers outside any page (no such page, no such method), which show the
// navigation to someone signed in and nothing more to anyone else.
func (s *Dashboard) withSessionUser(r *http.Request) *http.Request {
	u, err := s.sessionUser(r)
	if err != nil || u == nil {
		return r
	}
	server.SetRequestOrg(r, u.OrgID)
	return r.WithContext(context.WithValue(r.Context(), dashUserKey{}, u))
}

func (s *Dashboard) sessionUser(r *http.Request) (*store.User, error) {
	c, err := r.Cookie(s.sessionCookie(r))
	if err != nil || c.Value == "" || len(c.Value) > 100 {
		return nil, enrich.Errorf(enrich.KindUnauthorized, "sign in")
	}
	return s.db.SessionUser(r.Context(), c.Value, s.cfg.SessionIdle)
}

// safeNext is where to go after signing in: a dashboard path of this site only, so
// that a link cannot send a user elsewhere with their session.
func safeNext(next string) string {
	if strings.HasPrefix(next, "/dashboard/") && !strings.HasPrefix(next, "//") && !strings.ContainsAny(next, "\\\r\n") && len(next) <= 2048 {
		return next
	}
	return "/dashboard/"
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func handleLoginPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, err := s.sessionUser(r); err == nil && u != nil {
			http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
			return
		}
		// Nobody to sign in yet: the page says where the first admin comes from. The
		// hint is left out, not the page failed, when the database cannot tell.
		has, err := s.db.HasUsers(r.Context())
		s.render(w, r, http.StatusOK, "login", view{Title: "Sign in", Notice: notice(r),
			Data: map[string]any{"Next": safeNext(r.URL.Query().Get("next")), "Email": prefillEmail(r.URL.Query().Get("email")),
				"NoUsers": err == nil && !has}})
	})
}

// prefillEmail is the address the sign-in form starts with, from its link (the
// set-password page sends people on with theirs): a plausible address only, else none.
func prefillEmail(email string) string {
	if len(email) > maxEmail || !utf8.ValidString(email) || !strings.Contains(email, "@") ||
		strings.IndexFunc(email, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 {
		return ""
	}
	return email
}

func handleLogin(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := parseForm(w, r, maxPassword); err != nil {
			s.dashError(w, r, err)
			return
		}
		email := strings.ToLower(strings.TrimSpace(r.PostFormValue("email")))
		password := r.PostFormValue("password")
		next := safeNext(r.PostFormValue("next"))
		again := func(status int, msg string) {
			s.render(w, r, status, "login", view{Title: "Sign in",
				Data: map[string]any{"Next": next, "Email": email, "Error": msg}})
		}
		wait, ok := s.dashboard.loginByAddr.Allow(clientAddr(r))
		if ok {
			wait, ok = s.dashboard.loginByAccount.Allow(email)
		}
		if !ok {
			secs := int(wait.Seconds()) + 1
			w.Header().Set("Retry-After", fmt.Sprint(secs))
			again(http.StatusTooManyRequests, fmt.Sprintf("Too many sign-in attempts. Try again in %d seconds.", secs))
			return
		}
		wrong := "The email or the password is wrong."
		if email == "" || password == "" || len(email) > maxEmail {
			again(http.StatusUnauthorized, wrong)
			return
		}
		u, hash, err := s.db.UserForLogin(r.Context(), email)
		var e *enrich.Error
		if err != nil && !(errors.As(err, &e) && e.Kind == enrich.KindUnauthorized) {
			s.dashError(w, r, err)
			return
		}
		if err != nil {
			hash = dummyHash() // the same work as for a real account
		}
		var matches bool
		if err := s.dashboard.withHashSlot(r.Context(), func() { matches = passwordMatches(hash, password) }); err != nil {
			s.dashError(w, r, err)
			return
		}
		if !matches || err != nil {
			again(http.StatusUnauthorized, wrong)
			return
		}
		// The session the browser held ends here: its cookie is about to be replaced,
		// and a session no browser holds is only of use to whoever copied it.
		if err := s.endSessionOf(r); err != nil {
			s.dashError(w, r, err)
			return
		}
		token, err := s.db.CreateSession(r.Context(), server.ActingOf(r.Context()), u.ID, s.cfg.SessionMax)
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		s.setSessionCookie(w, r, token, int(s.cfg.SessionMax.Seconds()))
		server.SetRequestOrg(r, u.OrgID)
		http.Redirect(w, r, next, http.StatusSeeOther)
	})
}

func handleLogout(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.endSessionOf(r); err != nil {
			s.dashError(w, r, err)
			return
		}
		s.setSessionCookie(w, r, "", -1)
		seeOther(w, r, "/dashboard/login", "You are signed out.")
	})
}

// endSessionOf ends, on the server, the session of the request's cookie, if it has one.
func (s *Dashboard) endSessionOf(r *http.Request) error {
	c, err := r.Cookie(s.sessionCookie(r))
	if err != nil || c.Value == "" || len(c.Value) > 100 {
		return nil
	}
	return s.db.EndSession(r.Context(), c.Value)
}

// The set-password page is where the link `enrichd users create` and `users
// reset-password` print leads: the token is checked when the page is shown and again,
// and used up, when the password is set.
func handleSetupPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := server.Clip(r.URL.Query().Get("token"), 100)
		u, err := s.db.LinkUser(r.Context(), token)
		if err != nil {
			s.dashError(w, r, linkError(err))
			return
		}
		s.render(w, r, http.StatusOK, "setup", view{Title: "Set your password", Data: map[string]any{"Token": token, "Email": u.Email, "Min": minPassword}})
	})
}

func handleSetup(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := parseForm(w, r, maxPassword+1); err != nil {
			s.dashError(w, r, err)
			return
		}
		token := server.Clip(r.PostFormValue("token"), 100)
		u, err := s.db.LinkUser(r.Context(), token)
		if err != nil {
			s.dashError(w, r, linkError(err))
			return
		}
		password := r.PostFormValue("password")
		if err := checkNewPassword(password, r.PostFormValue("confirm")); err != nil {
			var e *enrich.Error
			errors.As(err, &e)
			s.render(w, r, http.StatusBadRequest, "setup", view{Title: "Set your password",
				Data: map[string]any{"Token": token, "Email": u.Email, "Min": minPassword, "Error": e.Message}})
			return
		}
		var hash string
		if slotErr := s.dashboard.withHashSlot(r.Context(), func() { hash, err = hashPassword(password) }); slotErr != nil {
			err = slotErr
		}
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		if _, err := s.db.SetPassword(r.Context(), token, hash); err != nil {
			s.dashError(w, r, linkError(err))
			return
		}
		seeOther(w, r, "/dashboard/login?email="+url.QueryEscape(u.Email), "Your password is set. Sign in with it.")
	})
}

// linkError words a dead set-password link for the person holding it.
func linkError(err error) error {
	var e *enrich.Error
	if errors.As(err, &e) && e.Kind == enrich.KindNotFound {
		return &enrich.Error{Kind: enrich.KindNotFound, Code: e.Code,
			Message: "This link is not valid: it was used already, is more than 24 hours old, or was replaced by a newer one. Ask an operator for a new link (enrichd users reset-password)."}
	}
	return err
}
