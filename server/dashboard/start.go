package dashboard

import (
	"context"
	"net/url"
	"strings"

	"enrichd/server"
	"enrichd/store"
)

// startStep is one line of the overview's "getting started" list: what to do, the
// exact command that does it, and whether it is done.
type startStep struct {
	Done  bool
	Title string
	// Commands run beside the serve that shows the list, in another terminal.
	Commands []string
	// Restart is a serve command that takes the running one's place, shown as such:
	// a second serve beside the first would find its address taken.
	Restart  string
	Link     string // a dashboard page that does the same, if any
	LinkText string
}

// gettingStarted is the list an organization sees on its overview until it has
// credits, a source that can find something, and an API key; nil once it has all
// three. Shell quoting is left out: an organization's name needs none.
func (s *Dashboard) gettingStarted(ctx context.Context, u *store.User, balance int64) ([]startStep, error) {
	keys, err := s.db.ListKeys(ctx, u.OrgName)
	if err != nil {
		return nil, err
	}
	hasKey := false
	for _, k := range keys {
		hasKey = hasKey || k.RevokedAt == nil
	}
	// The dataset finds only what was imported; any other source looks things up.
	canFind := false
	for _, src := range s.cfg.Sources {
		if src.Name() != "dataset" {
			canFind = true
		}
	}
	if !canFind {
		if canFind, err = s.db.HasRecords(ctx, store.OriginDataset); err != nil {
			return nil, err
		}
	}
	if balance > 0 && canFind && hasKey {
		return nil, nil
	}
	db := dbArg(s.cfg.Database)
	key := "" // the key file serve was given: an import hashes the people it writes under it
	if s.cfg.SecretKeyFile != "" {
		key = " --secret-key-file " + shellQuote(s.cfg.SecretKeyFile)
	}
	return []startStep{
		{Done: balance > 0, Title: "Grant credits: each enrichment costs 1 or more",
			Commands: []string{"./enrichd credits grant" + db + " --org " + u.OrgName + " --amount 1000"}},
		{Done: canFind, Title: "Give enrichd a source that can find something: import your records, or serve with sources that look things up",
			Commands: []string{"./enrichd import" + db + key + " examples/people-and-companies.jsonl"},
			Restart:  "./enrichd serve" + db + key + addrArg(s.cfg.Addr) + " --sources dataset,web"},
		{Done: hasKey, Title: "Create an API key for your code",
			Commands: []string{"./enrichd keys create" + db + " --org " + u.OrgName + " --name first"},
			Link:     "/dashboard/settings/keys", LinkText: "or on Settings → API Keys"},
	}, nil
}

// dbArg is the " --db …" the commands need to reach the service's database, shell
// quoted; "" for the default file. A URL's password is left out: every signed-in
// user sees these commands, and the operator who runs them knows it (or has it in
// PGPASSWORD, which the driver reads).
func dbArg(database string) string {
	if database == "" || database == "./enrichd.db" {
		return ""
	}
	if u, err := url.Parse(database); err == nil && u.User != nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if _, has := u.User.Password(); has {
			u.User = url.User(u.User.Username())
			database = u.String()
		}
	}
	return " --db " + shellQuote(database)
}

// addrArg is the " --addr …" a serve started again needs to listen where this one
// does; "" for the default address.
func addrArg(addr string) string {
	if addr == "" || addr == server.DefaultConfig().Addr {
		return ""
	}
	return " --addr " + shellQuote(addr)
}

// shellWords splits a command shellQuote wrote as the shell reads it: at spaces outside
// single quotes and not escaped, the quotes kept.
func shellWords(command string) []string {
	var words []string
	var word strings.Builder
	quoted, escaped := false, false
	for _, r := range command {
		switch {
		case escaped:
			escaped = false
		case r == '\\' && !quoted:
			escaped = true
		case r == '\'':
			quoted = !quoted
		case r == ' ' && !quoted:
			if word.Len() > 0 {
				words = append(words, word.String())
				word.Reset()
			}
			continue
		}
		word.WriteRune(r)
	}
	if word.Len() > 0 {
		words = append(words, word.String())
	}
	return words
}

// shellQuote leaves a word of safe characters as it is and single-quotes any other.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
