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

# DEBUGINFOD_URLS is emptied: symbolication tests must not ask servers on the network (the debuginfod
# test starts its own on 127.0.0.1 and names it itself).
# A warning fails the build step (the compilers' warnings do not stop a build): every source and test
# target is compiled before the tests run, and the log is searched. On a fresh checkout (CI) that is
# every file; an incremental build shows only what it recompiles.
test: tools
	@log=$$(mktemp) && trap 'rm -f "$$log" "$$log.status"' EXIT && \
	  { $(SWIFT) build --build-tests 2>&1; echo $$? > "$$log.status"; } | tee "$$log" && \
	  status=$$(cat "$$log.status") && if [ "$$status" != 0 ]; then exit "$$status"; fi && \
	  if grep -q 'warning:' "$$log"; then echo 'make test: the build printed warnings (above)' >&2; exit 1; fi
	DEBUGINFOD_URLS= $(SWIFT) test --skip-build

# --disable-local-rpath: the executables need no $ORIGIN search path (imagelog links the Swift runtime in),
# and without one the loader does not probe a dozen missing folders under it at every start.
RELEASE_FLAGS = -c release --disable-local-rpath

bench:
	$(SWIFT) build $(RELEASE_FLAGS)
	$(SWIFT) run $(RELEASE_FLAGS) ImageLogBenchmarks

# Regenerates the committed fixtures (needs clang, ld.lld, ld64.lld-14, llvm-lipo-14, python3; the DWARF ones
# also gcc, g++, swiftc, dwz, binutils and dsymutil-14).
fixtures:
	Scripts/make-elf-fixtures
	Scripts/make-fixtures
	Scripts/make-dwarf-fixtures
	Scripts/make-hostile-fixtures
	Scripts/make-dwarf-reader-fixtures
	Scripts/make-breakpad-fixtures
	Scripts/make-minidump-fixtures
	Scripts/make-linux-report-fixtures

# libFuzzer over BinaryFile.parse, the core reader and the minidump reader: Tests/Fuzz/*.swift compiled with
# Sources/ImageReaders (and the hostile minidump shapes' builder) into one module (no package target), seeded with every committed fixture (minidumps
# included); then the unwinder's C engine (Tests/Fuzz/FuzzUnwind.c
# with Sources/CImageLogUnwind, clang -fsanitize=fuzzer,address,undefined) over the same seeds, each read as a
# process's memory. FUZZ_SECONDS=600 make fuzz for a longer run (each target gets FUZZ_SECONDS).
FUZZ_SECONDS ?= 60
FUZZ_DIR ?= .build-fuzz
CLANG ?= clang
fuzz:
	mkdir -p $(FUZZ_DIR)/corpus $(FUZZ_DIR)/corpus-unwind $(FUZZ_DIR)/artifacts
	swiftc -O -sanitize=fuzzer,address -parse-as-library -module-name ImageReadersFuzz -package-name imagelog \
	  $$(find Sources/ImageReaders -name '*.swift' | sort) Tests/Fuzz/*.swift Tests/ImageLogTestSupport/MinidumpShapes.swift \
	  -o $(FUZZ_DIR)/fuzz-binary-file
	$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -I Sources/CImageLogUnwind/include Sources/CImageLogUnwind/*.c Tests/Fuzz/FuzzUnwind.c \
	  -o $(FUZZ_DIR)/fuzz-unwind
	cd Tests/ImageReadersTests/Fixtures && find . -type f ! -name '.*' | while read -r f; do \
	  cp "$$f" "$(CURDIR)/$(FUZZ_DIR)/corpus/seed-$$(echo "$${f#./}" | tr / -)"; done
	# The DWARF fixtures too: compilers' .eh_frame/.debug_info for the DWARF reader and the unwinder.
	cd Tests/SymbolicationTests/Fixtures/dwarf && find . -type f ! -name '.*' | while read -r f; do \
	  cp "$$f" "$(CURDIR)/$(FUZZ_DIR)/corpus/seed-dwarf-$$(echo "$${f#./}" | tr / -)"; done
	cp $(FUZZ_DIR)/corpus/seed-* $(FUZZ_DIR)/corpus-unwind/
	$(FUZZ_DIR)/fuzz-binary-file -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 \
	  -artifact_prefix=$(FUZZ_DIR)/artifacts/ $(FUZZ_DIR)/corpus
	$(FUZZ_DIR)/fuzz-unwind -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
	  -artifact_prefix=$(FUZZ_DIR)/artifacts/ $(FUZZ_DIR)/corpus-unwind

install:
	$(SWIFT) build $(RELEASE_FLAGS) --product imagelog
	$(SWIFT) build $(RELEASE_FLAGS) --product ImageLogAudit
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/imagelog
	install -m 755 .build/release/imagelog $(DESTDIR)$(PREFIX)/bin/imagelog
	install -m 644 .build/release/libImageLogAudit.so $(DESTDIR)$(PREFIX)/lib/imagelog/libImageLogAudit.so
	@# imagelog core-handler turns the kernel's cores into reports once /proc/sys/kernel/core_pattern pipes
	@# them to it. Installing never changes that setting (it is the machine's: systemd-coredump, apport):
	@# the line is printed for the administrator to write (README.md, "Core handler").
	@echo "imagelog core-handler: to have the kernel pipe every core to it, write this line to /proc/sys/kernel/core_pattern:"
	@Scripts/print-core-pattern --prefix $(PREFIX)

clean:
	$(SWIFT) package clean
