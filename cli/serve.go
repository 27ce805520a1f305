package cli

import (
	"context"
	"enrichd/wire"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/hubspot"
	"enrichd/server"
	"enrichd/server/dashboard"
	"enrichd/store"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/time/rate"
)

func newServeCommand() *cobra.Command {
	def := server.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the API and run the task workers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			logger, err := newLogger(cmd)
			if err != nil {
				return err
			}
			tuneGC(os.Getenv)
			cfg := server.DefaultConfig()
			cfg.Logger = logger
			cfg.Workers, _ = f.GetInt("workers")
			cfg.TaskTTL, _ = f.GetDuration("task-ttl")
			cfg.MaxBacklog, _ = f.GetInt64("max-backlog")
			cfg.Lease, _ = f.GetDuration("lease")
			cfg.NetworkHost, _ = f.GetString("network-host")
			cfg.EmailMaxRetrievals, _ = f.GetInt("email-max-retrievals")
			cfg.ShutdownGrace, _ = f.GetDuration("shutdown-grace")
			cfg.Addr, _ = f.GetString("addr")
			cfg.PublicURL, _ = f.GetString("public-url")
			cfg.Database, _ = f.GetString("db")
			cfg.SecretKeyFile, _ = f.GetString("secret-key-file")
			cfg.SessionIdle, _ = f.GetDuration("session-idle")
			cfg.SessionMax, _ = f.GetDuration("session-max")
			cfg.HTTP.ReadHeaderTimeout, _ = f.GetDuration("read-header-timeout")
			cfg.HTTP.ReadTimeout, _ = f.GetDuration("read-timeout")
			cfg.HTTP.WriteTimeout, _ = f.GetDuration("write-timeout")
			cfg.HTTP.IdleTimeout, _ = f.GetDuration("idle-timeout")
			cfg.HTTP.MaxHeaderBytes, _ = f.GetInt("max-header-bytes")
			cfg.HTTP.MaxConns, _ = f.GetInt("max-conns")
			cfg.HTTP.MaxConnsPerAddr, _ = f.GetInt("max-conns-per-addr")
			retentionFlags(f, &cfg)
			adminAddr, _ := f.GetString("admin-addr")
			cfg.SeparateAdmin = adminAddr != ""
			if cfg.RateIP, err = rateFlag(cmd, logger, "rate-ip"); err != nil {
				return err
			}
			if cfg.RateKey, err = rateFlag(cmd, logger, "rate-key"); err != nil {
				return err
			}
			if cfg.Sources, err = sources(cmd); err != nil {
				return err
			}
			if cfg.SourceBudgets, cfg.CreditUSD, err = sourceEconomics(cmd); err != nil {
				return err
			}
			if cfg.Fill, err = fillFlags(cmd); err != nil {
				return err
			}
			if err := checkServeConfig(cmd, cfg); err != nil {
				return err
			}
			// The database is opened, and created when missing, only once every flag
			// is known good, so a refused command leaves no file behind. The key file
			// comes first: the subjects of the rows about people are hashed under it,
			// those from before as the database opens.
			if cfg.Secrets, err = openSecrets(cmd, logger); err != nil {
				return err
			}
			cacheMiB, _ := f.GetInt("cache-size")
			readers, _ := f.GetInt("readers")
			path, _ := f.GetString("db")
			db, err := store.Open(cmd.Context(), path, program(cmd).Schema, store.WithCacheSize(cacheMiB), store.WithReaders(readers),
				store.WithSubjectKey(cfg.Secrets.SubjectKey()))
			if err != nil {
				return err
			}
			defer db.Close()
			warnSealedElsewhere(cmd.Context(), db, cfg.Secrets, logger)
			for i, s := range cfg.Sources {
				if s == nil {
					cfg.Sources[i] = db.Dataset()
				}
			}
			linkWeb(cfg.Sources)
			cfg.WebhookPolicy = webhookPolicy(cmd)
			cfg.HubSpotURL, _ = cmd.Flags().GetString("hubspot-url")
			if cfg.WebhookPolicy.AllowPrivate {
				logger.Warn("--allow-private-webhooks is on: webhooks may be sent over plain http and to loopback and private addresses; use it only for local development")
			}
			return serve(cmd.Context(), adminAddr, db, cfg, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.String("addr", def.Addr, "address to listen on")
	f.Int("workers", def.Workers, "task workers")
	f.Duration("task-ttl", def.TaskTTL, "lifetime of a task: one unsettled by then fails as timed_out and is refunded")
	f.Int64("max-backlog", def.MaxBacklog, "queued tasks an organization may have before new requests get 429 queue_full")
	f.Duration("lease", def.Lease, "how long a worker's claim on a task lasts unless extended; a crashed worker's tasks are requeued after it")
	addSourcesFlag(f)
	f.String("fill-company", "", "company fields the sources are asked in turn to fill, comma-separated (known: "+strings.Join(enrich.CompanyFields, ", ")+
		"); an organization's own list replaces it; empty: the first source that knows the company answers alone")
	f.String("fill-person", "", "person fields the sources are asked in turn to fill, comma-separated (known: "+strings.Join(enrich.PersonFields, ", ")+
		"); an organization's own list replaces it; empty: the first source that knows the person answers alone")
	f.String("rate-ip", rateString(def.RateIP), "rate limit per client address: requests per second/burst; a rate alone has a burst of twice it (50 is 50/100); 0 turns it off")
	f.String("rate-key", rateString(def.RateKey), "rate limit per API key: requests per second/burst; a rate alone has a burst of twice it (50 is 50/100); 0 turns it off")
	f.String("network-host", def.NetworkHost, "host of the professional network whose URLs are accepted")
	f.Int("email-max-retrievals", def.EmailMaxRetrievals, "profiles one email lookup retrieves at most to confirm who the address belongs to")
	f.Duration("sim-latency", 0, "sim source: latency added to every call")
	f.Float64("sim-failure-rate", 0, "sim source: share of calls (0 to 1) that fail as unavailable")
	f.Int64("sim-credits", 0, "sim source: vendor credits each answer that knows its subject costs, to try spend and budgets")
	f.String("sim-names", source.SimNamesLists, "sim source: where its staff's names come from: "+source.SimNamesLists+
		" (names enrichd's lists hold) or "+source.SimNamesHeldOut+" (names of 21 Latin-script cultures no list holds)")
	f.String("log-format", "json", "log format: json or text")
	f.Bool("allow-private-webhooks", false, allowPrivateHelp)
	f.String("hubspot-url", hubspot.DefaultURL, "base URL of HubSpot's API, which HubSpot Loops write into")
	f.String("public-url", "", "the URL people reach the service at, when a proxy ends TLS in front of it; "+
		"https makes the dashboard's session cookie Secure")
	f.Duration("session-idle", def.SessionIdle, "a dashboard session unused this long ends")
	f.Duration("session-max", def.SessionMax, "a dashboard session ends this long after sign-in, used or not")
	f.Int("cache-size", store.DefaultCacheSize, "SQLite page cache in MiB, over all database connections: the writer takes half, the readers share the rest; "+
		"resident memory under load is up to about twice it, given back when the service is idle")
	f.Int("readers", store.DefaultReaders(), "database connections for reads: one a core, from 2 to 16, unless given")
	addOpsFlags(f, def)
	addSourceFlags(f)
	addSecretKeyFlag(f)
	addHTTPFlags(f, def.HTTP)
	return cmd
}

// addHTTPFlags adds the bounds of every connection, on --addr and on --admin-addr.
func addHTTPFlags(f *pflag.FlagSet, def server.HTTPLimits) {
	f.Duration("read-header-timeout", def.ReadHeaderTimeout, "a connection is dropped when a request's headers take longer than this to arrive")
	f.Duration("read-timeout", def.ReadTimeout, "a connection is dropped when a whole request, body included, takes longer than this to arrive")
	f.Duration("write-timeout", def.WriteTimeout, "a connection is dropped when its response is not written this long after the request headers; must exceed --read-timeout")
	f.Duration("idle-timeout", def.IdleTimeout, "a keep-alive connection is closed after waiting this long for its next request")
	f.Int("max-header-bytes", def.MaxHeaderBytes, "largest request line and headers accepted, in bytes; larger gets 431")
	f.Int("max-conns", def.MaxConns, "connections open at once, per listener; past it the longest idle keep-alive connection is closed, and with none idle new ones wait until one closes")
	f.Int("max-conns-per-addr", def.MaxConnsPerAddr, "connections one client address (an IPv6 client: its /64) may hold open at once, per listener; one more is closed at once "+
		"(behind a reverse proxy every client has the proxy's address: raise it to --max-conns)")
}

// rateString is the flag form of r, the inverse of rateFlag.
func rateString(r server.Rate) string {
	if r.Limit == 0 {
		return "0"
	}
	return strconv.FormatFloat(float64(r.Limit), 'f', -1, 64) + "/" + strconv.Itoa(r.Burst)
}

// checkServeConfig refuses values that would make the service misbehave rather than
// quietly replacing them.
func checkServeConfig(cmd *cobra.Command, cfg server.Config) error {
	latency, _ := cmd.Flags().GetDuration("sim-latency")
	failures, _ := cmd.Flags().GetFloat64("sim-failure-rate")
	simCredits, _ := cmd.Flags().GetInt64("sim-credits")
	simNames, _ := cmd.Flags().GetString("sim-names")
	cacheMiB, _ := cmd.Flags().GetInt("cache-size")
	readers, _ := cmd.Flags().GetInt("readers")
	switch {
	case cfg.Workers < 1:
		return fmt.Errorf("--workers must be at least 1")
	case cfg.TaskTTL < time.Second:
		return fmt.Errorf("--task-ttl must be at least 1s")
	case cfg.SessionIdle < time.Minute || cfg.SessionMax < cfg.SessionIdle:
		return fmt.Errorf("--session-idle must be at least 1m and --session-max at least --session-idle")
	case cfg.PublicURL != "" && !strings.HasPrefix(cfg.PublicURL, "https://") && !strings.HasPrefix(cfg.PublicURL, "http://"):
		return fmt.Errorf("--public-url must start with https:// or http://")
	case cfg.Lease < time.Second:
		return fmt.Errorf("--lease must be at least 1s")
	case cfg.MaxBacklog < 1:
		return fmt.Errorf("--max-backlog must be at least 1")
	case cfg.EmailMaxRetrievals < 1:
		return fmt.Errorf("--email-max-retrievals must be at least 1")
	case cfg.ShutdownGrace < 0:
		return fmt.Errorf("--shutdown-grace cannot be negative")
	case cfg.HTTP.ReadHeaderTimeout <= 0, cfg.HTTP.ReadTimeout <= 0, cfg.HTTP.WriteTimeout <= 0, cfg.HTTP.IdleTimeout <= 0:
		return fmt.Errorf("--read-header-timeout, --read-timeout, --write-timeout and --idle-timeout must be more than 0: a connection must not be held open for ever")
	case cfg.HTTP.WriteTimeout <= cfg.HTTP.ReadTimeout:
		return fmt.Errorf("--write-timeout (%s) must be longer than --read-timeout (%s): it runs from the end of the headers, so it covers reading the body too", cfg.HTTP.WriteTimeout, cfg.HTTP.ReadTimeout)
	case cfg.HTTP.MaxHeaderBytes < 4<<10:
		return fmt.Errorf("--max-header-bytes must be at least 4096")
	case cfg.HTTP.MaxConns < 1:
		return fmt.Errorf("--max-conns must be at least 1")
	case cfg.HTTP.MaxConnsPerAddr < 1:
		return fmt.Errorf("--max-conns-per-addr must be at least 1")
	case latency < 0:
		return fmt.Errorf("--sim-latency cannot be negative")
	case !(failures >= 0 && failures <= 1):
		return fmt.Errorf("--sim-failure-rate must be from 0 to 1")
	case simCredits < 0 || simCredits > 1000:
		return fmt.Errorf("--sim-credits must be from 0 to 1000")
	case simNames != source.SimNamesLists && simNames != source.SimNamesHeldOut:
		return fmt.Errorf("--sim-names must be %s or %s, not %q", source.SimNamesLists, source.SimNamesHeldOut, simNames)
	case cacheMiB < 1 || cacheMiB > store.MaxCacheSize:
		return fmt.Errorf("--cache-size must be from 1 to %d (MiB), not %d", store.MaxCacheSize, cacheMiB)
	case readers < 1 || readers > store.MaxReaders:
		return fmt.Errorf("--readers must be from 1 to %d, not %d", store.MaxReaders, readers)
	}
	return nil
}

func newLogger(cmd *cobra.Command) (*slog.Logger, error) {
	format, _ := cmd.Flags().GetString("log-format")
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil)), nil
	case "text":
		return slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)), nil
	}
	return nil, fmt.Errorf("--log-format must be json or text, not %q", format)
}

// rateFlag reads "RATE/BURST", or "RATE" with a burst of twice the rate, which it logs
// so the burst in force is never a guess.
func rateFlag(cmd *cobra.Command, logger *slog.Logger, name string) (server.Rate, error) {
	raw, _ := cmd.Flags().GetString(name)
	bad := fmt.Errorf("--%s %q: want requests per second and an optional burst of at least 1, such as 100/200", name, raw)
	limit, burst, hasBurst := strings.Cut(raw, "/")
	l, err := strconv.ParseFloat(strings.TrimSpace(limit), 64)
	if err != nil || math.IsNaN(l) || math.IsInf(l, 0) || l < 0 {
		return server.Rate{}, bad
	}
	r := server.Rate{Limit: rate.Limit(l), Burst: max(1, int(2*l))}
	if hasBurst {
		if r.Burst, err = strconv.Atoi(strings.TrimSpace(burst)); err != nil || r.Burst < 1 {
			return server.Rate{}, bad
		}
	} else if l > 0 {
		logger.Info("rate limit given without a burst: the burst is twice the rate; give RATE/BURST to choose it",
			"flag", "--"+name, "rate", l, "burst", r.Burst)
	}
	return r, nil
}

// addSourcesFlag adds --sources: serve and `privacy report` read it alike.
func addSourcesFlag(f *pflag.FlagSet) {
	f.StringSlice("sources", []string{"dataset"}, "sources to ask, in order, first hit wins: "+knownSources)
}

// sourceNames are the names --sources gives, in order, each known and named once.
func sourceNames(cmd *cobra.Command) ([]string, error) {
	names, _ := cmd.Flags().GetStringSlice("sources")
	var out []string
	for _, name := range names {
		name = strings.TrimSpace(name)
		if slices.Contains(out, name) {
			return nil, fmt.Errorf("--sources: %q is named twice", name)
		}
		if _, known := source.Disclosures[name]; !known {
			return nil, fmt.Errorf("--sources: unknown source %q (known: %s)", name, knownSources)
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		return nil, errors.New("--sources: name at least one source")
	}
	return out, nil
}

// sources builds the sources --sources names, in order, leaving nil in the dataset's
// place: the dataset needs the database, which is opened after every flag is checked.
// The caller fills it in and then links the web source to the others with linkWeb.
func sources(cmd *cobra.Command) ([]enrich.Source, error) {
	names, err := sourceNames(cmd)
	if err != nil {
		return nil, err
	}
	host, _ := cmd.Flags().GetString("network-host")
	var out []enrich.Source
	for _, name := range names {
		switch name {
		case "dataset":
			out = append(out, nil) // the dataset, once the database is open
		case "sim":
			latency, _ := cmd.Flags().GetDuration("sim-latency")
			failures, _ := cmd.Flags().GetFloat64("sim-failure-rate")
			credits, _ := cmd.Flags().GetInt64("sim-credits")
			names, _ := cmd.Flags().GetString("sim-names")
			out = append(out, &source.Sim{NetworkHost: host, Latency: latency, FailureRate: failures, Credits: credits, Names: names})
		default:
			src, err := extraSource(cmd, name)
			if err != nil {
				return nil, err
			}
			out = append(out, src)
		}
	}
	return out, nil
}

// fillFlags reads --fill-company and --fill-person, refusing an unknown field with the
// known ones.
func fillFlags(cmd *cobra.Command) (enrich.FillLists, error) {
	var lists enrich.FillLists
	for _, v := range []struct {
		flag, object string
		list         *[]string
	}{{"fill-company", enrich.ObjectCompany, &lists.Company}, {"fill-person", enrich.ObjectPerson, &lists.Person}} {
		raw, _ := cmd.Flags().GetString(v.flag)
		fields, err := enrich.ParseFields(v.object, raw)
		if err != nil {
			return enrich.FillLists{}, fmt.Errorf("--%s: %w", v.flag, err)
		}
		*v.list = fields
	}
	return lists, nil
}

// serve runs the API on cfg.Addr and the workers until ctx ends, then stops accepting, and gives
// requests in flight and tasks already claimed cfg.ShutdownGrace to finish; tasks
// still running then go back to the queue. With an adminAddr, /healthz, /readyz and
// /metrics are served there instead of on addr. On a database with no user yet, it
// prints to stderr where the API and the dashboard are and the first-start link.
func serve(ctx context.Context, adminAddr string, db *store.DB, cfg server.Config, stderr io.Writer) error {
	cfg.Dashboard = dashboard.New
	srv, work := wire.New(db, cfg)
	ln, err := srv.Listen(cfg.Addr, cfg.HTTP)
	if err != nil {
		return err
	}
	errLog := slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)
	servers := []*http.Server{ln.HTTPServer(srv, errLog)}
	listeners := []net.Listener{ln}
	if adminAddr != "" {
		adminLn, err := srv.Listen(adminAddr, cfg.HTTP)
		if err != nil {
			ln.Close()
			return fmt.Errorf("--admin-addr: %w", err)
		}
		servers = append(servers, adminLn.HTTPServer(srv.AdminHandler(), errLog))
		listeners = append(listeners, adminLn)
	}
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	workersDone := make(chan struct{})
	go func() {
		defer close(workersDone)
		work.RunWorkers(workCtx)
	}()
	serveErr := make(chan error, len(servers))
	for i, hs := range servers {
		go func() { serveErr <- hs.Serve(listeners[i]) }()
	}
	names := make([]string, len(cfg.Sources))
	for i, s := range cfg.Sources {
		names[i] = s.Name()
	}
	attrs := []any{"addr", "http://" + ln.Addr().String(), "workers", cfg.Workers, "sources", strings.Join(names, ",")}
	if len(cfg.Fill.Company) > 0 || len(cfg.Fill.Person) > 0 {
		attrs = append(attrs, "fill_company", strings.Join(cfg.Fill.Company, ","), "fill_person", strings.Join(cfg.Fill.Person, ","))
	}
	if adminAddr != "" {
		attrs = append(attrs, "admin_addr", "http://"+listeners[1].Addr().String())
	}
	cfg.Logger.Info("enrichd listening", attrs...)
	if err := printFirstStart(ctx, stderr, db, siteURL(cfg.PublicURL, ln.Addr())); err != nil {
		// The service runs all the same: the next start tries again.
		cfg.Logger.Error("making the first-start link", "err", err.Error())
	}

	select {
	case err = <-serveErr:
	case <-ctx.Done():
		cfg.Logger.Info("shutting down", "grace", cfg.ShutdownGrace.String())
	}
	// Workers stop claiming and drain while the listeners stop accepting and drain.
	stopWork()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), max(cfg.ShutdownGrace, time.Second))
	for _, hs := range servers {
		if serr := hs.Shutdown(shutdownCtx); serr != nil {
			hs.Close() // the grace ran out: cut what is left
			if errors.Is(serr, context.DeadlineExceeded) {
				// A shutdown that had to cut requests is still the stop asked for.
				cfg.Logger.Warn("shutdown grace ran out: requests still in flight were cut", "grace", cfg.ShutdownGrace.String())
			} else if err == nil {
				err = serr
			}
		}
	}
	cancel()
	<-workersDone
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err == nil {
		cfg.Logger.Info("stopped")
	}
	return err
}

// printFirstStart prints, in plain words and once, on a database that has no user yet,
// the addresses of the API and the dashboard and a new first-start link (valid
// store.InstallLinkTTL, for one use) whose page creates the first organization and its
// admin. Once a user exists it prints nothing.
func printFirstStart(ctx context.Context, w io.Writer, db *store.DB, base string) error {
	token, err := db.NewInstallLink(ctx)
	if err != nil || token == "" {
		return err
	}
	_, err = fmt.Fprintf(w, `
enrichd is running. This database has no user yet.

  API:        %[1]s/v1/
  Dashboard:  %[1]s/dashboard/

Open this link to create your organization and its first admin. It works once, for
%[3]d hour; until someone has used it, each start of enrichd prints a new one:

  %[1]s/dashboard/install?token=%[2]s

`, base, url.QueryEscape(token), int(store.InstallLinkTTL.Hours()))
	return err
}

// siteURL is the address people open the service at: the --public-url when given,
// else the listener's, with a wildcard host made the loopback one a browser on this
// machine can open.
func siteURL(publicURL string, addr net.Addr) string {
	if publicURL != "" {
		return strings.TrimRight(publicURL, "/")
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}
