# Build, test and lint enrichd. `make` builds ./enrichd, a static binary that prints
# the version stamped here with `enrichd version`.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BINARY  ?= enrichd
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build test race lint fuzz clean

# CGO_ENABLED=0: SQLite is pure Go, so the binary needs no C library and runs on any
# Linux of the same architecture, or on a scratch image.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BINARY) .

# The README's test command.
test:
	$(GO) test ./...

# SQLite's own code is built without the race detector's instrumentation: see .ci/run.
race:
	$(GO) test -race -gcflags=modernc.org/sqlite/lib=-race=false ./...

# Runs every Fuzz function of every package for FUZZTIME each (go test runs only one
# fuzzer at a time). A crasher is written to the package's testdata/fuzz/FuzzXxx/,
# where plain `go test` then replays it: fix it and commit the file. New inputs are
# minimized for at most FUZZMINIMIZETIME each (go test's default, 60s, can leave a
# fuzzer minimizing for its whole run).
FUZZTIME ?= 30s
FUZZMINIMIZETIME ?= 5s
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for fn in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$fn ($(FUZZTIME))"; \
			$(GO) test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME); \
		done; \
	done

lint:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then \
		echo "gofmt would change these files:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -f $(BINARY)
