#!/usr/bin/env bash
# The Quickstart of the README, which a test runs as written. From the repository root:
#   bash examples/quickstart.sh
# It builds ./enrichd if missing, serves it on a fresh database in a temporary
# directory, imports the sample dataset, enriches a company and a person, and stops the
# server. ENRICHD (the binary) and ADDR (the listen address) override the defaults; it
# stops with a message when something already listens on ADDR or the server does not start.
set -euo pipefail
ENRICHD=${ENRICHD:-./enrichd}
ADDR=${ADDR:-127.0.0.1:8080}
if curl -s --max-time 1 -o /dev/null "http://$ADDR/"; then   # a server from an earlier step?
  echo "something already listens on $ADDR; stop it or set ADDR=127.0.0.1:8081" >&2; exit 1
fi
[ -x "$ENRICHD" ] || go build -o "$ENRICHD" .             # the first build takes a minute or more (see the README)
DIR=$(mktemp -d)
SERVER=                                                   # on any exit: stop the server, remove $DIR
trap '[ -z "$SERVER" ] || { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" || true; }; rm -rf "$DIR"' EXIT
export ENRICHD_DB=$DIR/enrichd.db                         # every command below uses this file

"$ENRICHD" orgs create acme
KEY=$("$ENRICHD" keys create --org acme)                  # stdout: the key alone
"$ENRICHD" credits grant --org acme --amount 100
"$ENRICHD" import examples/people-and-companies.jsonl     # the dataset source's records

"$ENRICHD" serve --addr "$ADDR" 2>"$DIR/serve.log" &      # API + workers; JSON log lines
SERVER=$!                                                 # the server itself, not a go run wrapper
READY=
for _ in $(seq 50); do                                    # ready: this server listens and answers
  kill -0 "$SERVER" 2>/dev/null || break                  # it exited (port taken?): its log says why
  grep -q 'enrichd listening' "$DIR/serve.log" &&
    curl -fs --max-time 1 "http://$ADDR/readyz" >/dev/null && READY=1 && break
  sleep 0.2
done
[ -n "$READY" ] || { echo "enrichd serve did not become ready; its log:" >&2; cat "$DIR/serve.log" >&2; exit 1; }

api() { curl -sS --max-time 10 -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' "$@"; }
enrich() { # POST a lookup (202: a queued task), then GET the task until it settles
  local resp id task
  resp=$(api -d "$2" "http://$ADDR/v1/$1/enrich")
  id=$(echo "$resp" | grep -o '"id":"[^"]*"' | head -1 | cut -d'"' -f4) || { echo "$resp" >&2; return 1; }
  for _ in $(seq 50); do
    task=$(api "http://$ADDR/v1/tasks/$id")
    case $task in
      *'"status":"queued"'* | *'"status":"running"'*) sleep 0.2 ;;
      *) echo "$task"; return ;;
    esac
  done
  echo "task $id did not settle within 10 s" >&2; return 1
}
enrich companies '{"domain":"acme.com"}'
enrich people '{"email":"jane@acme.com"}'
