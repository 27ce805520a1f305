-- enrichd schema. Each "-- migration N: title" line starts one migration; migrations
-- are applied in order, once, inside a transaction, and recorded in schema_migrations.
-- Never edit an applied migration: add a new one below it.
-- Times are integer milliseconds since the Unix epoch, UTC.

-- migration 1: organizations, keys, credits, tasks, queue, records
CREATE TABLE orgs (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL UNIQUE,
    created_at        INTEGER NOT NULL
);

-- The organizations that have queued tasks, in the order they get their next turn: a
-- claim serves the lowest seq and sends that organization to the back of the line.
-- Idle organizations have no row, so a claim never walks past them.
CREATE TABLE queue_turns (
    org_id   TEXT PRIMARY KEY REFERENCES orgs(id),
    seq      INTEGER NOT NULL UNIQUE
) WITHOUT ROWID;

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    name         TEXT NOT NULL DEFAULT '',
    prefix       TEXT NOT NULL,
    hash         BLOB NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER
);
CREATE INDEX api_keys_org ON api_keys(org_id, created_at);

-- Each grant keeps what is left of it so a charge can take from the grant that expires
-- first; the ledger below stays the source of truth and always adds up to the same sum.
CREATE TABLE credit_grants (
    id           INTEGER PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    amount       INTEGER NOT NULL CHECK (amount > 0),
    remaining    INTEGER NOT NULL CHECK (remaining >= 0),
    expires_at   INTEGER,
    expired_at   INTEGER,
    created_at   INTEGER NOT NULL
);
CREATE INDEX credit_grants_spendable ON credit_grants(org_id, expired_at, expires_at);

-- Append-only. kind: grant, charge, refund, expiry. amount is always positive.
CREATE TABLE credit_ledger (
    id           INTEGER PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    kind         TEXT NOT NULL CHECK (kind IN ('grant', 'charge', 'refund', 'expiry')),
    amount       INTEGER NOT NULL CHECK (amount >= 0),
    grant_id     INTEGER NOT NULL REFERENCES credit_grants(id),
    task_id      TEXT,
    created_at   INTEGER NOT NULL
);
CREATE INDEX credit_ledger_org ON credit_ledger(org_id, id);
CREATE INDEX credit_ledger_task ON credit_ledger(task_id) WHERE task_id IS NOT NULL;

CREATE TABLE tasks (
    id                TEXT PRIMARY KEY,          -- UUIDv7: time-ordered
    org_id            TEXT NOT NULL REFERENCES orgs(id),
    object_type       TEXT NOT NULL CHECK (object_type IN ('company', 'person')),
    operation         TEXT NOT NULL DEFAULT 'enrich',
    status            TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'canceled')),
    lookup            TEXT NOT NULL,             -- domain, company_url, person_url or email
    input             TEXT NOT NULL,             -- the request fields as sent (JSON)
    target            TEXT NOT NULL,
    credits_charged   INTEGER NOT NULL,
    loop_id           TEXT,
    idempotency_key   TEXT,
    created_at        INTEGER NOT NULL,
    queued_at         INTEGER,
    started_at        INTEGER,
    finished_at       INTEGER,
    expires_at        INTEGER NOT NULL,
    lease_token       TEXT,
    lease_until       INTEGER,
    attempts          INTEGER NOT NULL DEFAULT 0,
    result            TEXT,                      -- Company or Person result (JSON) once succeeded
    error             TEXT                       -- TaskError (JSON) once failed
);
-- GET /v1/tasks newest first, and the backlog count
CREATE INDEX tasks_org_created ON tasks(org_id, created_at DESC, id DESC);
-- GET /v1/tasks?status=, FIFO claims within an organization, queued backlog counts
CREATE INDEX tasks_org_status_created ON tasks(org_id, status, created_at, id);
-- expiry sweep and lease recovery only ever look at unsettled tasks
CREATE INDEX tasks_unsettled_expiry ON tasks(expires_at) WHERE status IN ('queued', 'running');
CREATE INDEX tasks_running_lease ON tasks(lease_until) WHERE status = 'running';

CREATE TABLE idempotency_keys (
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    key          TEXT NOT NULL,
    body_hash    TEXT NOT NULL,
    task_id      TEXT NOT NULL REFERENCES tasks(id),
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (org_id, key)
) WITHOUT ROWID;

-- Company and person records. origin 'store' is the 30-day store of enriched records;
-- origin 'dataset' holds what the team imported, read by the dataset source.
CREATE TABLE records (
    id                 INTEGER PRIMARY KEY,
    origin             TEXT NOT NULL CHECK (origin IN ('store', 'dataset')),
    object_type        TEXT NOT NULL CHECK (object_type IN ('company', 'person')),
    data               TEXT NOT NULL,
    last_enriched_at   INTEGER NOT NULL,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
);

-- Every way a record is looked up: domain:<d>, company:<url>, person:<url>, email:<addr>.
-- redirect is set on a domain that is not the company's canonical one: 1 when the domain
-- HTTP-redirects to the canonical one, 0 when the two were matched another way.
CREATE TABLE record_keys (
    origin       TEXT NOT NULL,
    key          TEXT NOT NULL,
    record_id    INTEGER NOT NULL REFERENCES records(id) ON DELETE CASCADE,
    redirect     INTEGER,
    PRIMARY KEY (origin, key)
) WITHOUT ROWID;
CREATE INDEX record_keys_record ON record_keys(record_id);

-- A person's positions, kept beside the JSON so people can be found by employer.
CREATE TABLE positions (
    record_id             INTEGER NOT NULL REFERENCES records(id) ON DELETE CASCADE,
    ord                   INTEGER NOT NULL,
    title                 TEXT,
    company_name          TEXT,
    company_network_url   TEXT,
    company_domain        TEXT,
    is_current            INTEGER NOT NULL,
    PRIMARY KEY (record_id, ord)
) WITHOUT ROWID;
CREATE INDEX positions_current_by_company_url ON positions(company_network_url, is_current);
CREATE INDEX positions_current_by_company_domain ON positions(company_domain, is_current);

-- migration 2: loops and webhook deliveries
-- A Loop is a webhook destination. Its signing secret is kept as is because every
-- delivery is signed with it: the database file is therefore as sensitive as the
-- secrets, and enrichd creates it readable by its owner only.
CREATE TABLE loops (
    id            TEXT PRIMARY KEY,
    org_id        TEXT NOT NULL REFERENCES orgs(id),
    name          TEXT NOT NULL,
    slug          TEXT NOT NULL,
    object_type   TEXT NOT NULL CHECK (object_type IN ('company', 'person')),
    operation     TEXT NOT NULL DEFAULT 'enrich',
    enabled       INTEGER NOT NULL,
    webhook_url   TEXT NOT NULL,
    secret        TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    UNIQUE (org_id, slug)
);
CREATE INDEX loops_org_created ON loops(org_id, created_at, id);

-- One event to send to one Loop. payload is the exact body, fixed when the event
-- happens, so every attempt sends the same bytes. A pending delivery is due at
-- next_attempt_at; lease_until marks one being sent, so a crash mid-send makes it due
-- again once the lease runs out, with the same attempt number.
CREATE TABLE deliveries (
    id                 TEXT PRIMARY KEY,          -- UUIDv7, the X-Service-Delivery-Id
    loop_id            TEXT NOT NULL REFERENCES loops(id) ON DELETE CASCADE,
    org_id             TEXT NOT NULL REFERENCES orgs(id),
    event              TEXT NOT NULL,
    task_id            TEXT,
    payload            TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts           INTEGER NOT NULL DEFAULT 0,
    next_attempt_at    INTEGER,
    lease_until        INTEGER,
    last_attempt_at    INTEGER,
    last_status_code   INTEGER,
    last_error         TEXT,
    created_at         INTEGER NOT NULL
);
-- the sender's "what is due" scan
CREATE INDEX deliveries_due ON deliveries(next_attempt_at) WHERE status = 'pending';
-- GET /v1/loops/{id}/deliveries newest first
CREATE INDEX deliveries_loop_created ON deliveries(loop_id, created_at DESC, id DESC);

-- migration 3: email lookups
-- What an email lookup that fit several people gathered, kept by address (in the form
-- enrich.AddressKey gives) so that a retry with a tie-break hint is decided against the
-- same profiles without a new search. Rows older than the freshness window are not
-- read, and are deleted as new gatherings are kept.
CREATE TABLE email_gatherings (
    address       TEXT PRIMARY KEY,
    company       TEXT NOT NULL,             -- the Company the domain was identified as (JSON)
    gathered_at   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX email_gatherings_gathered ON email_gatherings(gathered_at);

CREATE TABLE email_candidates (
    address       TEXT NOT NULL REFERENCES email_gatherings(address) ON DELETE CASCADE,
    ord           INTEGER NOT NULL,
    method        TEXT NOT NULL CHECK (method IN ('inferred', 'resolved')),
    pattern       TEXT NOT NULL,
    person        TEXT NOT NULL,             -- the Person as retrieved (JSON)
    retrieved_at  INTEGER NOT NULL,
    PRIMARY KEY (address, ord)
) WITHOUT ROWID;

-- People by the name of a current employer, for positions that carry neither a company
-- page nor a domain; compared without case, the rest of the folding is done in Go.
CREATE INDEX positions_current_by_company_name ON positions(company_name COLLATE NOCASE, is_current);

-- migration 4: task counts per organization and status
-- GET /v1/tasks reports how many tasks match, and every enqueue checks the queued
-- backlog; counting index entries costs time in proportion to the tasks an
-- organization has. Triggers keep these counts with every change of a task's status,
-- so they cannot drift from the table.
CREATE TABLE task_counts (
    org_id   TEXT NOT NULL,
    status   TEXT NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (org_id, status)
) WITHOUT ROWID;

INSERT INTO task_counts (org_id, status, n) SELECT org_id, status, count(*) FROM tasks GROUP BY org_id, status;

CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
    INSERT INTO task_counts (org_id, status, n) VALUES (NEW.org_id, NEW.status, 1)
        ON CONFLICT (org_id, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER task_counts_update AFTER UPDATE OF status ON tasks WHEN OLD.status IS NOT NEW.status BEGIN
    UPDATE task_counts SET n = n - 1 WHERE org_id = OLD.org_id AND status = OLD.status;
    INSERT INTO task_counts (org_id, status, n) VALUES (NEW.org_id, NEW.status, 1)
        ON CONFLICT (org_id, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
    UPDATE task_counts SET n = n - 1 WHERE org_id = OLD.org_id AND status = OLD.status;
END;
-- migration 5: retention
-- The retention sweep deletes settled tasks and settled deliveries oldest first, in
-- small batches: each walks one of these indexes, which hold only what it may delete.
CREATE INDEX tasks_settled_finished ON tasks(finished_at) WHERE status IN ('succeeded', 'failed', 'canceled');
CREATE INDEX deliveries_settled_last_attempt ON deliveries(last_attempt_at) WHERE status IN ('succeeded', 'failed');
-- A task's idempotency key, deleted with it; deleting a task also looks here to check
-- the foreign key, which without this index would scan every key.
CREATE INDEX idempotency_keys_task ON idempotency_keys(task_id);

-- migration 6: dashboard users and sessions
-- People who sign in to the dashboard, each in one organization. email is kept trimmed
-- and lower-cased, so it is unique whatever case it was typed in. password_hash is
-- the argon2id string the server made; it stays NULL until the user sets a password
-- through a set-password link.
CREATE TABLE users (
    id              TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL REFERENCES orgs(id),
    email           TEXT NOT NULL UNIQUE,
    role            TEXT NOT NULL CHECK (role IN ('admin', 'viewer')),
    password_hash   TEXT,
    created_at      INTEGER NOT NULL,
    disabled_at     INTEGER,
    last_login_at   INTEGER
);
-- `enrichd users list --org` in email order
CREATE INDEX users_org_email ON users(org_id, email);

-- Set-password links and sessions keep only the sha256 of their token, as api_keys
-- do: a copy of the file signs nobody in. A new link voids the user's earlier ones,
-- so there is at most one link per user and the purge of expired ones scans little.
CREATE TABLE user_links (
    hash         BLOB PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    expires_at   INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX user_links_user ON user_links(user_id);

-- expires_at is the absolute end of a session; last_seen_at, refreshed at most once a
-- minute, decides the idle one.
CREATE TABLE sessions (
    hash           BLOB PRIMARY KEY,
    user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at     INTEGER NOT NULL,
    last_seen_at   INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX sessions_user ON sessions(user_id);
CREATE INDEX sessions_expires ON sessions(expires_at);
CREATE INDEX sessions_last_seen ON sessions(last_seen_at);

-- migration 7: what the dashboard reads
-- When each key was last used, written at most once a minute per key: the settings
-- page shows it; a write per request would cost more than it tells.
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;

-- The task list filtered by type or by Loop, newest first, paged by (created_at, id);
-- the filter by status has tasks_org_status_created already.
CREATE INDEX tasks_org_type_created ON tasks(org_id, object_type, created_at, id);
CREATE INDEX tasks_org_loop_created ON tasks(org_id, loop_id, created_at, id) WHERE loop_id IS NOT NULL;
-- A task's page lists its deliveries.
CREATE INDEX deliveries_task ON deliveries(task_id) WHERE task_id IS NOT NULL;
-- The grants, newest first, without sorting them.
CREATE INDEX credit_grants_org ON credit_grants(org_id, id);

-- Credits by organization, UTC day (days since the epoch) and ledger kind, for the
-- chart of the last 30 days: summing the ledger would read every row of the period.
-- A trigger adds each ledger row as it is appended (the ledger is append-only), so the
-- sums cannot drift from it; the rows already there are added up once here.
CREATE TABLE credit_days (
    org_id   TEXT NOT NULL,
    day      INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    amount   INTEGER NOT NULL,
    PRIMARY KEY (org_id, day, kind)
) WITHOUT ROWID;

INSERT INTO credit_days (org_id, day, kind, amount)
    SELECT org_id, created_at / 86400000, kind, sum(amount) FROM credit_ledger GROUP BY org_id, created_at / 86400000, kind;

CREATE TRIGGER credit_days_insert AFTER INSERT ON credit_ledger BEGIN
    INSERT INTO credit_days (org_id, day, kind, amount) VALUES (NEW.org_id, NEW.created_at / 86400000, NEW.kind, NEW.amount)
        ON CONFLICT (org_id, day, kind) DO UPDATE SET amount = amount + excluded.amount;
END;

-- migration 8: fewer bytes per task
-- A task's result, kept once however many tasks have the same one: every store hit
-- on a company gives the same bytes, and each task row had a copy of them. hash is the
-- sha256 of data. refs counts the tasks that point here; triggers (below, with the
-- tasks table) keep it with every change of tasks.result_id, and delete a result once
-- no task points at it: retention deletes tasks in small batches, and with them the
-- results only they had. A count costs a write to the result's row per task; an index
-- on tasks(result_id), its alternative, would cost an entry per task, kept as long as
-- the task is, to find the same thing. tasks.result_id has no REFERENCES clause for
-- the same reason: deleting a result would look its tasks up by result_id, which only
-- that index could serve.
CREATE TABLE task_results (
    id     INTEGER PRIMARY KEY,
    hash   BLOB NOT NULL UNIQUE,
    refs   INTEGER NOT NULL CHECK (refs >= 0),
    data   TEXT NOT NULL                  -- the Company or Person (JSON), as the task shows it
);

INSERT INTO task_results (hash, refs, data)
    SELECT sha256(result), 1, result FROM tasks WHERE result IS NOT NULL ORDER BY rowid
    ON CONFLICT (hash) DO UPDATE SET refs = refs + 1;

-- An idempotency key's binding keeps the sha256 of the request as its 32 bytes, not as
-- 64 hex digits, and the endpoint beside it rather than in front of it ("POST /v1/...
-- <hex>", or the hex alone for a key kept before endpoints were: NULL endpoint now).
-- A hash that is not 64 hex digits (never the server's) is kept as its bytes.
-- The key no longer REFERENCES its task: checking that on every deletion of a task
-- took an index on task_id, a copy of every key; retention finds a task's key by
-- tasks.idempotency_key instead, which the primary key serves.
CREATE TABLE idempotency_keys_8 (
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    key          TEXT NOT NULL,
    endpoint     TEXT,
    body_hash    BLOB NOT NULL,
    task_id      TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (org_id, key)
) WITHOUT ROWID;

-- rtrim(b, replace(b, ' ', '')) is b up to its last space, that space included.
INSERT INTO idempotency_keys_8 (org_id, key, endpoint, body_hash, task_id, created_at)
    SELECT org_id, key, nullif(substr(prefix, 1, length(prefix) - 1), ''),
        CASE WHEN length(hash) = 64 AND unhex(hash) IS NOT NULL THEN unhex(hash) ELSE CAST(hash AS BLOB) END,
        task_id, created_at
    FROM (SELECT *, substr(body_hash, length(prefix) + 1) AS hash
        FROM (SELECT *, rtrim(body_hash, replace(body_hash, ' ', '')) AS prefix FROM idempotency_keys));
DROP TABLE idempotency_keys;
ALTER TABLE idempotency_keys_8 RENAME TO idempotency_keys;

-- The tasks table, copied into a new one: without its results, which task_results
-- keeps, and without operation, which said 'enrich' on every row (a second operation
-- would add it back with that DEFAULT, which costs the rows already there nothing).
-- Dropping the two columns in place would leave every page of the table as long as
-- before and mostly empty; a copy is written packed, and so are its indexes, built
-- anew. Nothing refers to tasks any more, so the old table can be dropped; its
-- triggers go with it and are made again below, as they were.
CREATE TABLE tasks_8 (
    id                TEXT PRIMARY KEY,          -- UUIDv7: time-ordered
    org_id            TEXT NOT NULL REFERENCES orgs(id),
    object_type       TEXT NOT NULL CHECK (object_type IN ('company', 'person')),
    status            TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'canceled')),
    lookup            TEXT NOT NULL,             -- domain, company_url, person_url or email
    input             TEXT NOT NULL,             -- the request fields as sent (JSON)
    target            TEXT NOT NULL,
    credits_charged   INTEGER NOT NULL,
    loop_id           TEXT,
    idempotency_key   TEXT,
    created_at        INTEGER NOT NULL,
    queued_at         INTEGER,
    started_at        INTEGER,
    finished_at       INTEGER,
    expires_at        INTEGER NOT NULL,
    lease_token       TEXT,
    lease_until       INTEGER,
    attempts          INTEGER NOT NULL DEFAULT 0,
    result_id         INTEGER,                   -- task_results(id) once succeeded
    error             TEXT                       -- TaskError (JSON) once failed
);

INSERT INTO tasks_8 (rowid, id, org_id, object_type, status, lookup, input, target, credits_charged, loop_id,
        idempotency_key, created_at, queued_at, started_at, finished_at, expires_at, lease_token, lease_until,
        attempts, result_id, error)
    SELECT rowid, id, org_id, object_type, status, lookup, input, target, credits_charged, loop_id,
        idempotency_key, created_at, queued_at, started_at, finished_at, expires_at, lease_token, lease_until,
        attempts, (SELECT id FROM task_results WHERE hash = sha256(tasks.result)), error
    FROM tasks ORDER BY rowid;
DROP TABLE tasks;
ALTER TABLE tasks_8 RENAME TO tasks;

-- The indexes of migrations 1, 5 and 7, but tasks_org_created ascending: a DESC
-- index takes every new row at its left edge, where a page that splits keeps half of
-- its rows and never fills again (half of its pages were empty). An ascending one
-- takes new rows at the right edge of their range, and SQLite walks it backwards for
-- ORDER BY created_at DESC, id DESC all the same.
CREATE INDEX tasks_org_created ON tasks(org_id, created_at, id);
CREATE INDEX tasks_org_status_created ON tasks(org_id, status, created_at, id);
CREATE INDEX tasks_unsettled_expiry ON tasks(expires_at) WHERE status IN ('queued', 'running');
CREATE INDEX tasks_running_lease ON tasks(lease_until) WHERE status = 'running';
CREATE INDEX tasks_settled_finished ON tasks(finished_at) WHERE status IN ('succeeded', 'failed', 'canceled');
CREATE INDEX tasks_org_type_created ON tasks(org_id, object_type, created_at, id);
CREATE INDEX tasks_org_loop_created ON tasks(org_id, loop_id, created_at, id) WHERE loop_id IS NOT NULL;

CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
    INSERT INTO task_counts (org_id, status, n) VALUES (NEW.org_id, NEW.status, 1)
        ON CONFLICT (org_id, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER task_counts_update AFTER UPDATE OF status ON tasks WHEN OLD.status IS NOT NEW.status BEGIN
    UPDATE task_counts SET n = n - 1 WHERE org_id = OLD.org_id AND status = OLD.status;
    INSERT INTO task_counts (org_id, status, n) VALUES (NEW.org_id, NEW.status, 1)
        ON CONFLICT (org_id, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
    UPDATE task_counts SET n = n - 1 WHERE org_id = OLD.org_id AND status = OLD.status;
END;

CREATE TRIGGER task_results_insert AFTER INSERT ON tasks WHEN NEW.result_id IS NOT NULL BEGIN
    UPDATE task_results SET refs = refs + 1 WHERE id = NEW.result_id;
END;

CREATE TRIGGER task_results_update AFTER UPDATE OF result_id ON tasks WHEN OLD.result_id IS NOT NEW.result_id BEGIN
    UPDATE task_results SET refs = refs + 1 WHERE id = NEW.result_id;
    UPDATE task_results SET refs = refs - 1 WHERE id = OLD.result_id;
    DELETE FROM task_results WHERE id = OLD.result_id AND refs = 0;
END;

CREATE TRIGGER task_results_delete AFTER DELETE ON tasks WHEN OLD.result_id IS NOT NULL BEGIN
    UPDATE task_results SET refs = refs - 1 WHERE id = OLD.result_id;
    DELETE FROM task_results WHERE id = OLD.result_id AND refs = 0;
END;

-- GET /v1/loops/{id}/deliveries newest first, ascending for the same reason.
DROP INDEX deliveries_loop_created;
CREATE INDEX deliveries_loop_created ON deliveries(loop_id, created_at, id);

-- migration 9: watches
-- A watch enqueues a task for its target every every_days and sends its Loop what
-- changed since the result it kept (baseline). Deleting the Loop deletes its watches;
-- a deleted watch leaves its tasks (tasks.watch_id has no foreign key). The same
-- columns as PostgreSQL's migration 2, so that enrichd migrate copies rows unchanged.
CREATE TABLE watches (
    id                 TEXT PRIMARY KEY,          -- UUIDv7
    org_id             TEXT NOT NULL REFERENCES orgs(id),
    object_type        TEXT NOT NULL CHECK (object_type IN ('company', 'person')),
    lookup             TEXT NOT NULL,             -- domain, company_url, person_url or email
    target             TEXT NOT NULL,             -- the normalized input
    input              TEXT NOT NULL,             -- the request fields, normalized (JSON)
    loop_id            TEXT NOT NULL REFERENCES loops(id) ON DELETE CASCADE,
    every_days         INTEGER NOT NULL,
    fields             TEXT,                      -- JSON array; NULL watches every field
    notify_unchanged   INTEGER NOT NULL,
    enabled            INTEGER NOT NULL,
    paused_reason      TEXT,
    not_found_streak   INTEGER NOT NULL DEFAULT 0,
    next_run_at        INTEGER,
    claimed_due_at     INTEGER,                   -- the due time a claim took, until its check is recorded
    last_run_at        INTEGER,
    last_task_id       TEXT,
    baseline           TEXT,                      -- the last result kept (JSON)
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    UNIQUE (org_id, loop_id, lookup, target)
);
-- GET /v1/watches, and the same filtered by Loop
CREATE INDEX watches_org_created ON watches(org_id, created_at, id);
CREATE INDEX watches_org_loop_created ON watches(org_id, loop_id, created_at, id);
-- the scheduler's "what is due": only the watches that can run are in it
CREATE INDEX watches_due ON watches(next_run_at) WHERE enabled = 1 AND paused_reason IS NULL;
-- deleting a Loop finds its watches here (the other indexes start with org_id)
CREATE INDEX watches_loop ON watches(loop_id);

ALTER TABLE tasks ADD COLUMN watch_id TEXT;
-- the month's spend of an organization's watch tasks, against its cap
CREATE INDEX tasks_org_watch_created ON tasks(org_id, created_at) WHERE watch_id IS NOT NULL;

ALTER TABLE orgs ADD COLUMN watch_monthly_cap INTEGER;

-- migration 10: webhook receivers heard, and secrets rotated with a grace period
-- previous_secret is the secret the last rotation replaced; it signs deliveries beside
-- the new one until previous_secret_expires_at. A receiver's 410 Gone (or a request)
-- disables the destination: destination_disabled_at and its reason, NULL when enabled.
-- delivery_failures counts the failed attempts since the last acknowledged one.
ALTER TABLE loops ADD COLUMN previous_secret TEXT;
ALTER TABLE loops ADD COLUMN previous_secret_expires_at INTEGER;
ALTER TABLE loops ADD COLUMN destination_disabled_at INTEGER;
ALTER TABLE loops ADD COLUMN destination_disabled_reason TEXT;
ALTER TABLE loops ADD COLUMN delivery_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE loops ADD COLUMN last_delivery_error TEXT;
ALTER TABLE loops ADD COLUMN last_delivery_error_at INTEGER;
-- /metrics counts the failing Loops and those whose destination is disabled.
CREATE INDEX loops_failing ON loops(id) WHERE delivery_failures >= 3;
CREATE INDEX loops_destination_disabled ON loops(id) WHERE destination_disabled_at IS NOT NULL;
-- Disabling a destination fails the Loop's pending deliveries.
CREATE INDEX deliveries_loop_pending ON deliveries(loop_id) WHERE status = 'pending';

-- migration 11: the first-start link
-- While the database has no user, each start of `enrichd serve` prints a link whose
-- page creates the first organization and its admin. Only the sha256 of its token is
-- kept, as for the other links; a new link voids the earlier one, so there is at most
-- one row.
CREATE TABLE install_links (
    hash         BLOB PRIMARY KEY,
    expires_at   INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
) WITHOUT ROWID;

-- migration 12: batches
-- An uploaded list (CSV or JSON Lines), one row each in batch_rows with its values as
-- uploaded and the request its task is made from. A row is pending until its task is
-- made (task_id, set in the task's own transaction) or it is refused then (error).
-- The same columns as PostgreSQL's migration 5.
CREATE TABLE batches (
    id                TEXT PRIMARY KEY,          -- UUIDv7
    org_id            TEXT NOT NULL REFERENCES orgs(id),
    object_type       TEXT NOT NULL CHECK (object_type IN ('company', 'person')),
    name              TEXT NOT NULL,
    columns           TEXT NOT NULL,             -- JSON array of the header
    row_count         INTEGER NOT NULL,
    credits_estimate  INTEGER NOT NULL,
    idempotency_key   TEXT,
    body_hash         BLOB,
    created_at        INTEGER NOT NULL,
    UNIQUE (org_id, idempotency_key)
);
-- GET /v1/batches, newest first
CREATE INDEX batches_org_created ON batches(org_id, created_at, id);
-- retention: the oldest batches first
CREATE INDEX batches_created ON batches(created_at);

CREATE TABLE batch_rows (
    batch_id    TEXT NOT NULL REFERENCES batches(id) ON DELETE CASCADE,
    row_number  INTEGER NOT NULL,               -- from 1, in upload order
    vals        TEXT NOT NULL,                  -- JSON array, one value per column
    request     TEXT NOT NULL,                  -- the enrichment request's fields (JSON)
    task_id     TEXT,
    error       TEXT,                           -- why the row got no task (JSON)
    PRIMARY KEY (batch_id, row_number)
) WITHOUT ROWID;
-- the feeder's "rows still without a task": only those are in it
CREATE INDEX batch_rows_pending ON batch_rows(batch_id, row_number) WHERE task_id IS NULL AND error IS NULL;

-- migration 13: where a result's fields came from
-- A task keeps, beside its result, the source that gave each field (provenance, a JSON
-- object) and what each source was asked (sources, a JSON array); a stored record
-- keeps the provenance it was stored with, which a store hit's task shows. NULL on
-- tasks and records from before: shown as {} and [].
ALTER TABLE tasks ADD COLUMN provenance TEXT;
ALTER TABLE tasks ADD COLUMN sources TEXT;
ALTER TABLE records ADD COLUMN provenance TEXT;

-- migration 14: fill lists
-- The fields the sources are asked in turn to fill for an organization, per object
-- type: field names, comma-separated. NULL keeps the server's default (--fill-company,
-- --fill-person). Each task reads its organization's row by primary key.
-- The same columns as PostgreSQL's migration 7.
CREATE TABLE fill_lists (
    org_id      TEXT PRIMARY KEY REFERENCES orgs(id),
    company     TEXT,
    person      TEXT,
    updated_at  INTEGER NOT NULL
) WITHOUT ROWID;

-- migration 15: what the sources cost each organization, and their monthly budgets
-- source_spend adds up, per organization, source, UTC day (day: its start, ms) and
-- whose key the calls went out with (own_key 1: the organization's own vendor key),
-- the asks by outcome, the requests sent upstream and the vendor credits they cost.
-- source_budgets caps the vendor credits of a source a month: org_id '' is the
-- installation's cap, over every organization's calls made with its keys.
-- The same columns as PostgreSQL's migration 9.
CREATE TABLE source_spend (
    org_id    TEXT NOT NULL REFERENCES orgs(id),
    source    TEXT NOT NULL,
    day       INTEGER NOT NULL,
    own_key   INTEGER NOT NULL CHECK (own_key IN (0, 1)),
    calls     INTEGER NOT NULL,
    hits      INTEGER NOT NULL,
    misses    INTEGER NOT NULL,
    errors    INTEGER NOT NULL,
    credits   INTEGER NOT NULL,
    PRIMARY KEY (org_id, source, day, own_key)
) WITHOUT ROWID;
-- an installation budget's month: the installation's keys' calls of one source, every
-- organization's
CREATE INDEX source_spend_installation ON source_spend(source, day) WHERE own_key = 0;

CREATE TABLE source_budgets (
    org_id           TEXT NOT NULL,
    source           TEXT NOT NULL,
    monthly_credits  INTEGER NOT NULL CHECK (monthly_credits > 0),
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (org_id, source)
) WITHOUT ROWID;

-- migration 16: organizations' own vendor keys, and records kept for one organization
-- An organization's own API key for a vendor source, sealed with AES-256-GCM under the
-- installation's secret key file (package secret), never in clear. key_id names the
-- key file it was sealed under, so a database restored without it says so. last4 is
-- all that is ever shown of it. failing_at is set when the vendor refused it (401,
-- 402, 403), with the vendor's words; setting a key again clears it. generation grows
-- with each set, so a refusal of an older key never marks a newer one.
CREATE TABLE org_source_keys (
    org_id          TEXT NOT NULL REFERENCES orgs(id),
    source          TEXT NOT NULL,
    sealed          TEXT NOT NULL,
    key_id          TEXT NOT NULL,
    last4           TEXT NOT NULL,
    allow_fallback  INTEGER NOT NULL,
    generation      INTEGER NOT NULL,
    failing_at      INTEGER,
    failing_reason  TEXT,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (org_id, source)
) WITHOUT ROWID;
-- A record fetched with an organization's own key is that organization's alone: its
-- keys are under the origin 'store:<org id>' rather than 'store', and org_id says
-- whose it is. NULL: fetched with the installation's keys, served to everyone.
ALTER TABLE records ADD COLUMN org_id TEXT REFERENCES orgs(id);

-- migration 17: what the priced sources did not know
-- A priced source's miss of a subject (subject: the lookup's record key, as
-- record_keys has it) is remembered, so that within the freshness window the source is
-- not asked, nor paid, for it again. org_id is '' for a miss found with the
-- installation's keys, which counts for every organization, or the organization whose
-- own vendor key found it. A task reads a subject's rows by the primary key; a source
-- that answers for the subject deletes its rows; retention deletes those past the
-- window, oldest first, through source_misses_missed.
-- The same columns as PostgreSQL's migration 11.
CREATE TABLE source_misses (
    subject    TEXT NOT NULL,
    source     TEXT NOT NULL,
    org_id     TEXT NOT NULL,
    missed_at  INTEGER NOT NULL,
    PRIMARY KEY (subject, source, org_id)
) WITHOUT ROWID;
CREATE INDEX source_misses_missed ON source_misses(missed_at);

-- migration 18: retention of stored records
-- A record of the store that no source has refreshed for --retain-records is deleted,
-- with its keys and positions, oldest first, in small batches: the purge walks this
-- index, which holds the store's records only. The dataset is the team's import, and
-- no retention deletes it. The same index as PostgreSQL's migration 12.
CREATE INDEX records_store_enriched ON records(last_enriched_at) WHERE origin = 'store';

-- migration 19: batches of contacts
-- A batch's rows may be of both kinds (mixed): each row then says its own kind, and a
-- person row may have its company looked up too (?enrich=company,person), in the
-- company_ columns: its request, task and why it got none, as request, task_id and
-- error are for the row's own. A mixed batch keeps object_type 'person', the kind of
-- its results' unprefixed columns. A row refused at the upload with ?on_error=skip is
-- kept with its values, skipped = 1 and why in error: it gets no task. line is the line
-- of the file a row starts on (NULL on rows from before). The new columns live and go
-- with their batch row, as its values do.
-- The same columns as PostgreSQL's migration 13.
ALTER TABLE batches ADD COLUMN mixed INTEGER NOT NULL DEFAULT 0 CHECK (mixed IN (0, 1));
ALTER TABLE batch_rows ADD COLUMN kind TEXT CHECK (kind IN ('company', 'person'));
ALTER TABLE batch_rows ADD COLUMN line INTEGER;
ALTER TABLE batch_rows ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0 CHECK (skipped IN (0, 1));
ALTER TABLE batch_rows ADD COLUMN company_request TEXT;
ALTER TABLE batch_rows ADD COLUMN company_task_id TEXT;
ALTER TABLE batch_rows ADD COLUMN company_error TEXT;
-- the feeder's "companies still without a task", as batch_rows_pending for the rows'
CREATE INDEX batch_rows_company_pending ON batch_rows(batch_id, row_number)
    WHERE company_request IS NOT NULL AND company_task_id IS NULL AND company_error IS NULL;
-- a batch's skipped rows, listed by GET /v1/batches/{id}
CREATE INDEX batch_rows_skipped ON batch_rows(batch_id, row_number) WHERE skipped = 1;

-- migration 20: the asks of priced sources on the books before they are sent
-- An ask of a priced source is written here, pending, before its first request leaves,
-- and each further request it sends is added before it leaves: calls and credits are
-- the requests sent or about to be, each at its full price by the vendor's published
-- price. Its answer settles it: the row goes, and what the ask cost is added to
-- source_spend, in one transaction. owner is the process that asks (the server's
-- replica name); a pending ask whose process is gone is settled as unknown, at its
-- full price (source_spend.unknown counts them). The budgets count these rows, every
-- process's, beside source_spend; day is the UTC day the ask is counted on, booked_at
-- when its first request was booked (ms).
-- The same columns as PostgreSQL's migration 14.
CREATE TABLE source_asks (
    id         TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL REFERENCES orgs(id),
    source     TEXT NOT NULL,
    day        INTEGER NOT NULL,
    own_key    INTEGER NOT NULL CHECK (own_key IN (0, 1)),
    owner      TEXT NOT NULL,
    calls      INTEGER NOT NULL,
    credits    INTEGER NOT NULL,
    booked_at  INTEGER NOT NULL
) WITHOUT ROWID;
-- an organization's budget and its GET /v1/sources
CREATE INDEX source_asks_org ON source_asks(org_id, source, day);
-- an installation budget: the installation's keys' asks of one source
CREATE INDEX source_asks_installation ON source_asks(source, day) WHERE own_key = 0;
-- the sweep of the asks whose process is gone, oldest first
CREATE INDEX source_asks_booked ON source_asks(booked_at);
ALTER TABLE source_spend ADD COLUMN unknown INTEGER NOT NULL DEFAULT 0;

-- migration 21: subjects by keyed hash, and suppressions
-- Every row that holds a person's data carries the keyed hashes of whom it is about
-- (HMAC-SHA256 under the subject key the secret key file gives, enrich.Subjects), so
-- that everything about one person is a lookup of an index on each table (the
-- registry of store/privacy.go lists them): subject_hash names what was asked (an
-- address, a profile, a domain), answer_hash whom the data turned out to be about,
-- where that differs (the person an address belongs to, a company's canonical domain).
-- An empty hash says the row names no subject (a company's page, a test event); NULL
-- says it was not hashed yet: the rows from before this migration, which enrichd
-- hashes when it opens the database with the key (store's backfill), finding them
-- through the *_unhashed indexes, which are empty once it is done.
ALTER TABLE tasks ADD COLUMN subject_hash BLOB;
ALTER TABLE tasks ADD COLUMN answer_hash BLOB;
CREATE INDEX tasks_subject ON tasks(subject_hash);
CREATE INDEX tasks_answer ON tasks(answer_hash) WHERE answer_hash IS NOT NULL;
CREATE INDEX tasks_unhashed ON tasks(id) WHERE subject_hash IS NULL;

ALTER TABLE task_results ADD COLUMN subject_hash BLOB;
CREATE INDEX task_results_subject ON task_results(subject_hash);
CREATE INDEX task_results_unhashed ON task_results(id) WHERE subject_hash IS NULL;

ALTER TABLE records ADD COLUMN subject_hash BLOB;
CREATE INDEX records_subject ON records(subject_hash);
CREATE INDEX records_unhashed ON records(id) WHERE subject_hash IS NULL;

-- subject_hash the identifier a key names (the address of an email: key), answer_hash
-- its record's subject where that differs (the person the address is on record for).
ALTER TABLE record_keys ADD COLUMN subject_hash BLOB;
ALTER TABLE record_keys ADD COLUMN answer_hash BLOB;
CREATE INDEX record_keys_subject ON record_keys(subject_hash);
CREATE INDEX record_keys_answer ON record_keys(answer_hash) WHERE answer_hash IS NOT NULL;
CREATE INDEX record_keys_unhashed ON record_keys(origin, key) WHERE subject_hash IS NULL;

ALTER TABLE positions ADD COLUMN subject_hash BLOB;
CREATE INDEX positions_subject ON positions(subject_hash);
CREATE INDEX positions_unhashed ON positions(record_id, ord) WHERE subject_hash IS NULL;

ALTER TABLE deliveries ADD COLUMN subject_hash BLOB;
ALTER TABLE deliveries ADD COLUMN answer_hash BLOB;
CREATE INDEX deliveries_subject ON deliveries(subject_hash);
CREATE INDEX deliveries_answer ON deliveries(answer_hash) WHERE answer_hash IS NOT NULL;
CREATE INDEX deliveries_unhashed ON deliveries(id) WHERE subject_hash IS NULL;

ALTER TABLE email_gatherings ADD COLUMN subject_hash BLOB;
CREATE INDEX email_gatherings_subject ON email_gatherings(subject_hash);
CREATE INDEX email_gatherings_unhashed ON email_gatherings(address) WHERE subject_hash IS NULL;

-- subject_hash the address asked, answer_hash the candidate's profile.
ALTER TABLE email_candidates ADD COLUMN subject_hash BLOB;
ALTER TABLE email_candidates ADD COLUMN answer_hash BLOB;
CREATE INDEX email_candidates_subject ON email_candidates(subject_hash);
CREATE INDEX email_candidates_answer ON email_candidates(answer_hash) WHERE answer_hash IS NOT NULL;
CREATE INDEX email_candidates_unhashed ON email_candidates(address, ord) WHERE subject_hash IS NULL;

ALTER TABLE batch_rows ADD COLUMN subject_hash BLOB;
CREATE INDEX batch_rows_subject ON batch_rows(subject_hash);
CREATE INDEX batch_rows_unhashed ON batch_rows(batch_id, row_number) WHERE subject_hash IS NULL;

ALTER TABLE source_misses ADD COLUMN subject_hash BLOB;
CREATE INDEX source_misses_subject_hash ON source_misses(subject_hash);
CREATE INDEX source_misses_unhashed ON source_misses(subject, source, org_id) WHERE subject_hash IS NULL;

ALTER TABLE watches ADD COLUMN subject_hash BLOB;
ALTER TABLE watches ADD COLUMN answer_hash BLOB;
CREATE INDEX watches_subject ON watches(subject_hash);
CREATE INDEX watches_answer ON watches(answer_hash) WHERE answer_hash IS NOT NULL;
CREATE INDEX watches_unhashed ON watches(id) WHERE subject_hash IS NULL;

-- The key the hashes are made under, by an id that gives nothing of it away: a
-- process given another key file is refused, since its hashes would name nobody the
-- rows name (and no suppression would hold). One row.
CREATE TABLE subject_key (
    id           TEXT PRIMARY KEY,
    created_at   INTEGER NOT NULL
) WITHOUT ROWID;

-- People and companies an organization must not enrich (do-not-enrich, an objection):
-- kept by the keyed hash of the address, profile or domain alone, with a masked hint
-- to recognize it by, never the value. org_id '' is the installation's, which holds
-- for every organization (enrichd suppressions add --all-orgs). Every enrichment looks
-- its subjects up here, by (org_id, hash), before the store and any source. added_by
-- says who: an API key (its id and name), a dashboard user (id and email), the CLI.
-- The same columns as PostgreSQL's migration 15.
CREATE TABLE suppressions (
    id              TEXT PRIMARY KEY,          -- UUIDv7
    org_id          TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('email', 'profile', 'domain')),
    hash            BLOB NOT NULL,
    hint            TEXT NOT NULL,
    reason          TEXT,
    added_by_kind   TEXT NOT NULL CHECK (added_by_kind IN ('key', 'user', 'cli')),
    added_by_id     TEXT,
    added_by_name   TEXT,
    created_at      INTEGER NOT NULL,
    UNIQUE (org_id, hash)
);
-- GET /v1/suppressions, newest first
CREATE INDEX suppressions_org_created ON suppressions(org_id, created_at, id);
-- every organization's entries for one subject (an export, an erasure across them)
CREATE INDEX suppressions_hash ON suppressions(hash);

-- migration 22: erasures
-- An erasure removes a person from everything an organization holds (org_id '': every
-- organization's, enrichd erase --all-orgs) by walking the registry of personal data
-- (store/privacy.go), and is kept by the keyed hash of what was asked and a masked
-- hint, never the value: hints are the other identifiers found for the person, masked
-- (JSON array); removed the rows deleted or redacted, by table (JSON object); loops
-- the Loops told, [{loop_id, name, delivery_id}] (JSON). completed_at is set once
-- every person.erased event it queued was delivered or failed for good and the
-- database's files were rid of the erased bytes (the write-ahead log checkpointed and
-- truncated). A task it erased keeps its row and charge, with erased_at; a delivery
-- names the erasure it announces (event person.erased) or whose payload it erased.
-- The same columns as PostgreSQL's migration 16.
CREATE TABLE erasures (
    id                 TEXT PRIMARY KEY,          -- UUIDv7
    org_id             TEXT NOT NULL,
    kind               TEXT NOT NULL CHECK (kind IN ('email', 'profile')),
    hash               BLOB NOT NULL,
    hint               TEXT NOT NULL,
    hints              TEXT NOT NULL,
    requested_by_kind  TEXT NOT NULL CHECK (requested_by_kind IN ('key', 'user', 'cli')),
    requested_by_id    TEXT,
    requested_by_name  TEXT,
    removed            TEXT NOT NULL,
    loops              TEXT NOT NULL,
    created_at         INTEGER NOT NULL,
    completed_at       INTEGER
);
-- GET /v1/erasures, newest first
CREATE INDEX erasures_org_created ON erasures(org_id, created_at, id);
-- the erasures of one subject (an export, the registry's find)
CREATE INDEX erasures_hash ON erasures(hash);
-- those not completed yet, which maintenance completes
CREATE INDEX erasures_incomplete ON erasures(created_at) WHERE completed_at IS NULL;
ALTER TABLE tasks ADD COLUMN erased_at INTEGER;
ALTER TABLE deliveries ADD COLUMN erasure_id TEXT;
-- an erasure's events, which it waits for before it completes
CREATE INDEX deliveries_erasure ON deliveries(erasure_id) WHERE erasure_id IS NOT NULL;

-- migration 23: the audit log
-- Every access to people's data and every change to who may access it, per
-- organization (org_id '' for the installation's own acts, from the CLI), appended and
-- never changed by enrichd but for an erasure, which blanks subject. Entries form one
-- hash chain per organization, in seq order (1, 2, ...), and at never goes back along
-- a chain (an entry takes the time of the one before when the clock is behind it), so
-- that the primary key's order is the chain's and serves its walk, the lists newest
-- first and their time ranges. hash is the SHA-256 of prev_hash (the previous entry's
-- hash; 32 zero bytes before the first, or the checkpoint retention left) and of every
-- other column but subject: the subject is covered by subject_seal, the keyed hash of
-- its text as sent, so that an erasure blanks it (NULL, the seal kept) and the chain
-- holds. subject_hash is the keyed hash of the subject normalized (empty: none), which
-- finds an entry by person; subject_seal empty: no subject text was kept. detail is a
-- JSON object of the act's own figures, never the data of a person looked up.
-- The same columns as PostgreSQL's migration 17.
CREATE TABLE audit_log (
    org_id        TEXT NOT NULL,
    at            INTEGER NOT NULL,
    seq           INTEGER NOT NULL,
    actor_kind    TEXT NOT NULL,
    actor_id      TEXT,
    actor_name    TEXT,
    action        TEXT NOT NULL,
    subject       TEXT,
    subject_hash  BLOB NOT NULL,
    subject_seal  BLOB NOT NULL,
    task_id       TEXT,
    batch_id      TEXT,
    object_id     TEXT,
    credits       INTEGER NOT NULL,
    request_id    TEXT,
    detail        TEXT,
    prev_hash     BLOB NOT NULL,
    hash          BLOB NOT NULL,
    PRIMARY KEY (org_id, at, seq)
) WITHOUT ROWID;
-- GET /v1/audit?subject=, and a person's entries for an export or an erasure
CREATE INDEX audit_log_subject ON audit_log(subject_hash, org_id, at, seq);
-- GET /v1/audit?action= of any action but enrichments, which are most entries: those
-- are read from the primary key, and an enrichment writes no entry here
CREATE INDEX audit_log_org_action ON audit_log(org_id, action, at, seq) WHERE action <> 'task.created';

-- The head of each organization's chain (its last entry's place, time and hash), which
-- the transaction that appends updates (PostgreSQL's replicas hold its row, FOR
-- UPDATE, until they commit: they append to one chain in turn), and the checkpoint
-- retention leaves: base_* are the last entry it deleted, from which the chain is
-- verified.
CREATE TABLE audit_heads (
    org_id     TEXT PRIMARY KEY,
    seq        INTEGER NOT NULL,
    at         INTEGER NOT NULL,
    hash       BLOB NOT NULL,
    base_seq   INTEGER NOT NULL,
    base_at    INTEGER NOT NULL,
    base_hash  BLOB NOT NULL
) WITHOUT ROWID;
-- An entry moves its chain's head to itself as it is inserted, in the same statement.
CREATE TRIGGER audit_log_head AFTER INSERT ON audit_log BEGIN
    UPDATE audit_heads SET seq = NEW.seq, at = NEW.at, hash = NEW.hash WHERE org_id = NEW.org_id;
END;

-- migration 24: HubSpot destinations
-- A Loop's destination is a webhook (webhook_url, signed with secret) or HubSpot's CRM
-- (destination_kind 'hubspot'): its private app token sealed under the secret key file
-- (package secret, bound to the Loop's id; key_id names the key file) and shown by its
-- last four characters alone; hubspot_options the Loop's choices (JSON: refresh,
-- provenance, gdpr_delete, mapping). A delivery's summary says what the destination
-- did with it (the object created or the properties filled, or why it was skipped).
-- hubspot_writes keeps, per Loop and subject (keyed hash), the HubSpot object enrichd
-- wrote and keyed hashes of the values it wrote, so a refresh rewrites only its own
-- values and a retry finds the object it created: in the registry of personal data.
-- The same columns as PostgreSQL's migration 18.
ALTER TABLE loops ADD COLUMN destination_kind TEXT NOT NULL DEFAULT 'webhook';
ALTER TABLE loops ADD COLUMN hubspot_token TEXT;
ALTER TABLE loops ADD COLUMN hubspot_token_key_id TEXT;
ALTER TABLE loops ADD COLUMN hubspot_token_last4 TEXT;
ALTER TABLE loops ADD COLUMN hubspot_options TEXT;
ALTER TABLE deliveries ADD COLUMN summary TEXT;
CREATE TABLE hubspot_writes (
    loop_id       TEXT NOT NULL REFERENCES loops(id) ON DELETE CASCADE,
    subject_hash  BLOB NOT NULL,
    org_id        TEXT NOT NULL,
    object_type   TEXT NOT NULL,
    object_id     TEXT NOT NULL,
    written       TEXT NOT NULL,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (loop_id, subject_hash)
);
-- the registry's find, by subject
CREATE INDEX hubspot_writes_subject ON hubspot_writes(subject_hash);

-- migration 25: fewer index entries a task
-- A store hit is written settled, and it wrote an entry in every index on tasks. The
-- unfiltered list and the filters by status and by type now walk one index,
-- tasks_org_created, which carries status and object_type after its key so that a
-- filter is checked on the index entry, without reading the task's row. The claims'
-- FIFO walk of an organization's queued tasks keeps an index of its own that holds
-- queued tasks alone: a task written settled never enters it. The same indexes as
-- PostgreSQL's migration 19.
DROP INDEX tasks_org_status_created;
DROP INDEX tasks_org_type_created;
DROP INDEX tasks_org_created;
CREATE INDEX tasks_org_created ON tasks(org_id, created_at, id, status, object_type);
CREATE INDEX tasks_org_queued ON tasks(org_id, created_at, id) WHERE status = 'queued';
