# Build, test and lint enrichd. `make` builds ./enrichd, a static binary that prints
# the version stamped here with `enrichd version`.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BINARY  ?= enrichd
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build test race lint clean

# CGO_ENABLED=0: SQLite is pure Go, so the binary needs no C library and runs on any
# Linux of the same architecture, or on a scratch image.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BINARY) .

# The README's test command.
test:
	$(GO) test ./...

race:
	$(GO) test -race ./...

lint:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then \
		echo "gofmt would change these files:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -f $(BINARY)
