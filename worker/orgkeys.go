package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"enrichd/enrich"
	"enrichd/enrich/source"
	"enrichd/secret"
	"enrichd/store"
)

// OrgKeyRefresh is how long a serve process goes on using what it read of an
// organization's own key for a source before reading it again: a key set, cleared or
// marked failing elsewhere (the CLI, the dashboard, another replica) is in use within
// it.
const OrgKeyRefresh = 5 * time.Second

// orgKeys is the pipeline's enrich.SourceKeys: for an organization that set its own
// key for a vendor source, the adapter built with that key (one per organization and
// source, built again when the key changes), else the installation's.
type orgKeys struct {
	db  *store.DB
	box *secret.Box // nil: no secret key file, so no organization's key can be opened
	log *slog.Logger
	now func() time.Time
	// refresh is how long an entry is used before the key is read again.
	refresh time.Duration

	mu      sync.Mutex
	entries map[orgKeyOf]*orgKeyEntry
}

type orgKeyOf struct{ org, source string }

// orgKeyEntry is what was last read of one organization's key for one source, and the
// adapter built with it.
type orgKeyEntry struct {
	readAt time.Time
	key    *store.SourceKey // nil: the organization has none
	built  enrich.Source    // built for key.Generation; nil until first asked
}

func newOrgKeys(db *store.DB, box *secret.Box, log *slog.Logger, refresh time.Duration) *orgKeys {
	if refresh <= 0 {
		refresh = OrgKeyRefresh
	}
	return &orgKeys{db: db, box: box, log: log, now: time.Now, refresh: refresh, entries: map[orgKeyOf]*orgKeyEntry{}}
}

// For gives src with the organization's own key when it has a working one; the
// installation's src when it has none, or when its key is failing and it allows the
// fallback; else skip ReasonKeyFailing.
func (k *orgKeys) For(ctx context.Context, org string, src enrich.Source) (enrich.Source, bool, string) {
	keyed, ok := src.(source.Keyed)
	if !ok || org == "" {
		return src, false, ""
	}
	id := orgKeyOf{org, src.Name()}
	entry, err := k.read(ctx, id)
	if err != nil {
		// Not knowing whether the organization has a key of its own, asking with the
		// installation's would spend the installation's account on a task that may
		// have been meant for the organization's: the source is not asked.
		k.log.Error("reading an organization's own vendor key", "org", org, "source", id.source, "err", err.Error())
		return src, false, enrich.ReasonKeyFailing
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if entry.key == nil {
		return src, false, ""
	}
	if !entry.key.Failing() && entry.built == nil {
		if entry.built, err = k.build(keyed, entry.key); err != nil {
			// Kept here only: the key file may be put back, and the key then opens.
			k.failing(entry, err.Error(), false)
		}
	}
	if key := entry.key; key.Failing() {
		if key.AllowFallback {
			return src, false, ""
		}
		return src, false, enrich.ReasonKeyFailing
	}
	return entry.built, true, ""
}

// read returns the entry of id, reading the key again when what was read is older than
// OrgKeyRefresh. A key whose generation has not changed keeps the adapter built for it.
func (k *orgKeys) read(ctx context.Context, id orgKeyOf) (*orgKeyEntry, error) {
	now := k.now()
	k.mu.Lock()
	entry := k.entries[id]
	k.mu.Unlock()
	if entry != nil && now.Sub(entry.readAt) < k.refresh {
		return entry, nil
	}
	key, err := k.db.OrgSourceKey(ctx, id.org, id.source)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	fresh := &orgKeyEntry{readAt: now, key: key}
	if old := k.entries[id]; old != nil && old.key != nil && key != nil && old.key.Generation == key.Generation && old.built != nil {
		fresh.built = old.built // the same key: its limiter and meter go on
	}
	k.entries[id] = fresh
	return fresh, nil
}

// build opens the organization's key and builds the source with it; a refusal of the
// key by the vendor marks it failing.
func (k *orgKeys) build(keyed source.Keyed, key *store.SourceKey) (enrich.Source, error) {
	if k.box == nil {
		return nil, errors.New("enrichd was started without its secret key file, so the organization's own key cannot be read")
	}
	if key.KeyID != k.box.ID() {
		return nil, errors.New("the organization's own key was sealed under another secret key file than this one (a database restored without its key file?): set it again")
	}
	plain, err := k.box.Open(key.Sealed, store.SourceKeyLabel(key.OrgID, key.Source))
	if err != nil {
		return nil, err
	}
	org, name, gen := key.OrgID, key.Source, key.Generation
	return keyed.WithAPIKey(string(plain), func(reason string) { k.refused(org, name, gen, reason) })
}

// failing marks the entry's key failing for why, here at once, and with persist in the
// database for every replica. The caller holds k.mu.
func (k *orgKeys) failing(entry *orgKeyEntry, why string, persist bool) {
	key := *entry.key
	now := k.now().UTC()
	key.FailingAt, key.FailingReason = &now, why
	entry.key, entry.built = &key, nil
	k.log.Warn("an organization's own vendor key is failing", "org", key.OrgID, "source", key.Source,
		"fallback", key.AllowFallback, "reason", why)
	if persist {
		go k.mark(key.OrgID, key.Source, key.Generation, why)
	}
}

// refused is the vendor's refusal of an organization's key of generation gen.
func (k *orgKeys) refused(org, name string, gen int64, reason string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if entry := k.entries[orgKeyOf{org, name}]; entry != nil && entry.key != nil && entry.key.Generation == gen && !entry.key.Failing() {
		k.failing(entry, reason, true)
		return
	}
	go k.mark(org, name, gen, reason)
}

// mark records a failing key in the database; its own goroutine, so the write is never
// made under k.mu nor inside the caller's request to the vendor.
func (k *orgKeys) mark(org, name string, gen int64, why string) {
	defer func() {
		if r := recover(); r != nil {
			k.log.Error("marking an organization's key failing panicked", "panic", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.db.MarkSourceKeyFailing(ctx, org, name, gen, why); err != nil && !store.IsStorageFault(err) {
		k.log.Error("marking an organization's own vendor key failing", "org", org, "source", name, "err", err.Error())
	}
}

// KeyInfo says whose key src uses for the organization's tasks (enrich.KeyInfos), for
// GET /v1/sources and the dashboard: never the key, only its last 4 characters.
func (k *orgKeys) KeyInfo(ctx context.Context, org, name string) (enrich.KeyInfo, error) {
	key, err := k.db.OrgSourceKey(ctx, org, name)
	if err != nil || key == nil {
		return enrich.KeyInfo{}, err
	}
	return enrich.KeyInfo{Own: true, Last4: key.Last4, Failing: key.Failing(), Fallback: key.AllowFallback}, nil
}
