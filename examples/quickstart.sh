#!/usr/bin/env bash
# The Quickstart of the README, which a test runs as written. From the repository root:
#   bash examples/quickstart.sh
# It builds ./enrichd if missing, serves it on a fresh database in a temporary
# directory, imports the sample dataset, enriches a company and a person, and stops the
# server. ENRICHD (the binary) and ADDR (the listen address) override the defaults.
set -euo pipefail
ENRICHD=${ENRICHD:-./enrichd}
ADDR=${ADDR:-127.0.0.1:8080}
[ -x "$ENRICHD" ] || go build -o "$ENRICHD" .             # compiles for a minute the first time
DIR=$(mktemp -d)
export ENRICHD_DB=$DIR/enrichd.db                         # every command below uses this file

"$ENRICHD" orgs create acme
KEY=$("$ENRICHD" keys create --org acme)                  # stdout: the key alone
"$ENRICHD" credits grant --org acme --amount 100
"$ENRICHD" import examples/people-and-companies.jsonl     # the dataset source's records

"$ENRICHD" serve --addr "$ADDR" 2>"$DIR/serve.log" &      # API + workers; JSON log lines
SERVER=$!                                                 # the server itself, not a go run wrapper
trap 'kill $SERVER; wait $SERVER || true; rm -rf "$DIR"' EXIT
for _ in $(seq 50); do curl -fs "http://$ADDR/readyz" >/dev/null && break; sleep 0.2; done

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
