# imagelog: build, test, bench, fuzz, install. `make test` is what CI runs.
SWIFT ?= swift
PREFIX ?= /usr/local
CONFIG ?= debug

.PHONY: all build test tools bench fuzz install clean fixtures

all: build

build:
	$(SWIFT) build -c $(CONFIG)

# The peers tests compare against (readelf, llvm-*-14, eu-unstrip, ld64.lld) come from Debian packages;
# Scripts/install-test-tools installs the missing ones when it can (root with apt), else says which tests skip.
tools:
	Scripts/install-test-tools

test: tools
	$(SWIFT) build
	$(SWIFT) test

bench:
	$(SWIFT) build -c release
	$(SWIFT) run -c release ImageLogBenchmarks

fixtures:
	Scripts/make-fixtures

install:
	$(SWIFT) build -c release --product imagelog
	$(SWIFT) build -c release --product ImageLogAudit
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/imagelog
	install -m 755 .build/release/imagelog $(DESTDIR)$(PREFIX)/bin/imagelog
	install -m 644 .build/release/libImageLogAudit.so $(DESTDIR)$(PREFIX)/lib/imagelog/libImageLogAudit.so

clean:
	$(SWIFT) package clean
