# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
# netactivity: `make run` and `make test` do all set-up on a fresh Debian machine.
PREFIX ?= /usr/local
DESTDIR ?=
# SwiftPM leaves a few TemporaryDirectory.* folders in $TMPDIR on every run: they go to the build
# tree instead, which `make clean` empties (nothing outside it is left behind).
SWIFT_TMP = $(CURDIR)/.build/tmp
SWIFT ?= env TMPDIR=$(SWIFT_TMP) swift
PYTHON ?= /usr/bin/python3
DEBUG_BIN = .build/debug
# Debug builds (make build, run, test) carry no DWARF: a cold build takes a tenth to a sixth less
# CPU, and a crash's backtrace still names its functions. `SWIFT_DEBUG=` puts it back
# for lldb (every debug build must use the same flags, or each rebuilds the others' modules).
SWIFT_DEBUG ?= -Xswiftc -gnone
RELEASE_BIN = .build/release
# What each part of make test costs, printed as it ends (scripts/timed.sh).
TIMED = scripts/timed.sh

# The parts of make test (see there).
.PHONY: deb-binaries test-build test-unit test-suites test-timed-last debian13-root debian13-base test-desktop test-bus test-broker test-timed check check-desktop
.PHONY: pictures print-lib-file gobject-calls install-lib extension extension-zip all setup decoder gtk-example lib lib-docs lib-examples build release run test unit format lint locale pot contract integration example readme-snippets bench install uninstall clean asan tsan check-sanitize soak check-layering deb deb-test deb-install-test

all: build

setup:
	@scripts/setup.sh
	@mkdir -p $(SWIFT_TMP)

build: setup locale decoder
	$(SWIFT) build $(SWIFT_DEBUG)
	@install -m 0755 $(DECODER) $(DEBUG_BIN)/

# The image decoder is plain C built with the system's compiler, not SwiftPM (which would link the
# Swift runtime into it): it needs nothing but its image libraries, libseccomp and libc, all in /usr,
# so bubblewrap can run it with /usr alone in its root. Each build puts it beside the agent, where
# the agent looks first.
DECODER = .build/decoder/netactivity-decoder
DECODER_SOURCES = Sources/netactivity-decoder/decoder.c Sources/CDecoder/protocol.c
DECODER_CC ?= $(shell command -v cc 2>/dev/null || command -v clang 2>/dev/null)
DECODER_CFLAGS ?= -O2 -g
DECODER_HARDENING = -std=gnu11 -Wall -Wextra -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIE -pie -Wl,-z,relro,-z,now -Wl,--as-needed
decoder: setup
	@$(MAKE) --no-print-directory $(DECODER)
$(DECODER): $(DECODER_SOURCES) Sources/CDecoder/include/decoder_protocol.h
	@mkdir -p $(dir $@)
	$(DECODER_CC) $(DECODER_CFLAGS) $(DECODER_HARDENING) -ISources/CDecoder/include -o $@ $(DECODER_SOURCES) \
	    -DAVIF_SONAME='"'$$(scripts/soname.sh libavif)'"' -DJXL_SONAME='"'$$(scripts/soname.sh libjxl)'"' \
	    $$(pkg-config --cflags libavif libjxl librsvg-2.0) \
	    $$(pkg-config --cflags --libs spng libjpeg libwebp libseccomp libwebpdemux libheif lcms2 zlib) -lgif -lm

# Translations (gettext, domain netactivity): po/LANG.po compiled into .build/share/locale, where
# the binaries of a build look (make install puts them in $(PREFIX)/share/locale and the GNOME
# extension's locale folder). `make pot` extracts po/netactivity.pot from every tr("...") in
# Sources/ and every _('...') of the extension; `make test` checks it is current.
LOCALES = $(basename $(notdir $(wildcard po/*.po)))
LOCALE_BUILD = .build/share/locale
MO_FILES = $(LOCALES:%=$(LOCALE_BUILD)/%/LC_MESSAGES/netactivity.mo)
locale: $(MO_FILES)
$(LOCALE_BUILD)/%/LC_MESSAGES/netactivity.mo: po/%.po
	@scripts/setup.sh
	@mkdir -p $(dir $@)
	msgfmt --check -o $@ $<
pot:
	scripts/make-pot.sh po/netactivity.pot
# The contract's names for Swift (agent, library, CLI), Python (tests, panel scripts) and C
# (libnetactivity's error domain), from dbus/*.xml; a test checks that the committed files are current.
contract:
	scripts/gen-contract.py --swift Sources/NetActivityContract/Names.swift --python Tests/Integration/contract.py \
	    --c-errors libnetactivity/netactivity-errors.h

# The agent, the CLI and the bench client only: apps' adapters (SwiftNIO) are not built for them.
# The Swift runtime is linked in, as in the package: the agent then maps only the runtime code it
# uses (idle RSS about 3 MiB less than with /opt/swift's shared libraries).
RELEASE_FLAGS = -c release --static-swift-stdlib
release: setup locale decoder
	$(SWIFT) build $(RELEASE_FLAGS) --product netactivityd
	$(SWIFT) build $(RELEASE_FLAGS) --product netactivity
	@install -m 0755 $(DECODER) $(RELEASE_BIN)/

# Starts the agent on the session bus; with none, netactivityd starts a private bus and prints
# its DBUS_SESSION_BUS_ADDRESS.
run: release
	exec $(RELEASE_BIN)/netactivityd $(ARGS)

# No module imports against the direction docs/architecture.md's "Modules" section draws.
check-layering:
	$(PYTHON) scripts/check-layering.py

# One format for the Swift sources (.swift-format: 4 spaces, 120 columns), but for the files the
# scripts generate: `make format` applies it, `make lint` (part of make test) fails on a file it
# would change.
SWIFT_SOURCES = $(shell find Package.swift Sources Tests Examples -name '*.swift' -not -path '*/.build/*' \
    -not -path '*/ReadmeSnippets/Snippets.swift' -not -path '*/NetActivityContract/Names.swift' | sort)
format:
	@mkdir -p $(SWIFT_TMP) && $(SWIFT) format format -i $(SWIFT_SOURCES)
lint:
	@mkdir -p $(SWIFT_TMP) && $(SWIFT) format lint --strict $(SWIFT_SOURCES)
	@echo "swift format: $(words $(SWIFT_SOURCES)) files as .swift-format has them"

# make test: what it needs installed first (apt runs once, before anything runs beside it); then
# one make run of all its parts, each started once what it needs is made. The Swift build (make
# test-build) takes both cores; then, at once, the unit tests and the integration suite in three
# parts (they mostly wait on buses, servers and X; each part's output is printed whole when it
# ends): the desktop suites (once the Debian 13 root they run GNOME Shell 48 in is made), the bus
# suites on dbus-daemon, and the bus suites on dbus-broker (each in two processes at once); then,
# alone, what times answers: the library's "never waits" tests (calls timed in 100 ms, in a Swift
# concurrency pool no other suite may starve) and the integration classes that time the agent's.
# What needs nothing of the build starts at once: the Debian 13 root for GNOME Shell 48 (mostly
# dpkg and the disk, at normal priority: at idle priority the builds left it too little CPU to be
# ready when the desktop suites were), and at idle priority (SCHED_IDLE: on the CPU the others
# leave, which preempt it the moment they wake) the package's small Debian 13 root and its release
# build, in two jobs. The package is put together once the build is done; its tests come last.
test: setup
	@scripts/setup.sh --gnome
	@scripts/setup.sh --deb
	@$(TIMED) "make test after set-up (all of it)" $(MAKE) --no-print-directory -j8 --output-sync=target \
	    test-timed-last deb-test AFTER_BUILD=test-build DEB_AFTER="deb-binaries test-build" DEB_XZ_LEVEL=1 \
	    IDLE="chrt --idle 0" TEST_TIMED="--timed skip" DEB_TEST_AFTER=test-timed-last
test-suites: test-unit test-desktop test-bus test-broker
test-timed-last: test-suites
	@$(MAKE) --no-print-directory test-timed

# The C library, its docs and examples, the decoder and the checks build beside the example package's
# Swift build (SwiftNIO's, most of this step), which takes both cores in bursts and one for long.
test-build:
	@$(MAKE) --no-print-directory -j3 --output-sync=target check-layering lint example gtk-example lib-examples \
	    lib-docs locale decoder extension
	$(TIMED) "swift build --build-tests" $(SWIFT) build --build-tests $(SWIFT_DEBUG)
	@install -m 0755 $(DECODER) $(DEBUG_BIN)/

test-unit: $(AFTER_BUILD)
	$(TIMED) test-unit $(SWIFT) test --skip-build --skip NeverFailTests

# make check: a contributor's inner loop (docs/testing.md): make test's build, its Swift tests and
# its integration suites on dbus-daemon, with the same split (the timed classes last, alone), but
# no dbus-broker run and no package; GNOME Shell 48's tests run when make test has made its root.
check: setup
	@scripts/setup.sh --gnome
	@$(MAKE) --no-print-directory test-build
	@$(MAKE) --no-print-directory -j3 --output-sync=target test-unit check-desktop test-bus TEST_TIMED="--timed skip"
	$(SWIFT) test --skip-build --filter NeverFailTests
	$(PYTHON) Tests/Integration/run.py --bin $(DEBUG_BIN) --timed only $(BROKER_SKIP)
check-desktop:
	NETACTIVITY_EXAMPLE=$(EXAMPLE_BIN) $(if $(wildcard $(DEBIAN13_ROOT)/.complete),NETACTIVITY_DEBIAN13=$(CURDIR)/$(DEBIAN13_ROOT)) \
	    $(TIMED) check-desktop $(DESKTOP_SUITES)

debian13-root:
	@$(TIMED) debian13-root scripts/debian13-root.sh $(DEBIAN13_ROOT) >/dev/null
debian13-base:
	@$(TIMED) debian13-base $(IDLE) scripts/debian13-root.sh --base $(DEBIAN13_BASE) >/dev/null

# The suites that start desktops, X servers or buses of their own (BROKER_SKIP), and the rest.
DESKTOP_SUITES = $(PYTHON) Tests/Integration/run.py --bin $(DEBUG_BIN) $(subst --skip,--only,$(BROKER_SKIP))
test-desktop: debian13-root $(AFTER_BUILD)
	NETACTIVITY_EXAMPLE=$(EXAMPLE_BIN) NETACTIVITY_DEBIAN13=$(CURDIR)/$(DEBIAN13_ROOT) $(TIMED) test-desktop $(DESKTOP_SUITES)
# The bus suites mostly wait (on buses, servers, timers): each pass runs its modules in BUS_JOBS
# processes at once (run.py --jobs).
BUS_JOBS ?= 2
test-bus: $(AFTER_BUILD)
	NETACTIVITY_EXAMPLE=$(EXAMPLE_BIN) $(TIMED) test-bus $(PYTHON) Tests/Integration/run.py --bin $(DEBUG_BIN) --jobs $(BUS_JOBS) \
	    $(BROKER_SKIP) $(TEST_TIMED)
test-broker: $(AFTER_BUILD)
	$(TIMED) test-broker $(PYTHON) Tests/Integration/run.py --bin $(DEBUG_BIN) --bus broker --jobs $(BUS_JOBS) $(BROKER_SKIP) \
	    $(TEST_TIMED)
# The classes that bound the agent's answer times (a Peer.Ping prober, deadlines in milliseconds),
# on each bus, with nothing else running: make test leaves them out of the parts it runs at once.
# (Both buses' passes at once were tried: beside a busy core, a prober's round trip then measured
# three hogs' scheduling, not the agent's loop.)
test-timed:
	$(TIMED) "test-timed: NeverFailTests" $(SWIFT) test --skip-build --filter NeverFailTests
	$(TIMED) "test-timed: dbus-daemon" $(PYTHON) Tests/Integration/run.py --bin $(DEBUG_BIN) --timed only $(BROKER_SKIP)
	$(TIMED) "test-timed: dbus-broker" $(PYTHON) Tests/Integration/run.py --bin $(DEBUG_BIN) --bus broker --timed only $(BROKER_SKIP)

# A Debian 13 root with GNOME Shell 48 (mmdebstrap, about a minute and 1.1 GB, made once and kept in
# the build tree): the GNOME Shell tests run the shell in it too, and the package tests install the
# packages there (make deb-test).
DEBIAN13_ROOT = .build/debian13
DEBIAN13_BASE = .build/debian13-base

# The integration suite runs again on dbus-broker (Fedora's and Arch's session bus), but for the
# suites that start buses of their own (the GNOME Shell session, the package and install tests),
# the decoder's, which uses no bus, and the GTK examples' and libnetactivity's (an X server each,
# GDBus clients: what they test is not the bus, and its 26 s download would be paid twice).
BROKER_SKIP = --skip test_gnome_shell --skip test_waybar --skip test_package --skip test_install --skip test_decoder --skip test_gtk --skip test_libnetactivity

# dist/netactivity_VERSION_ARCH.deb: a release build with the Swift runtime linked statically, the
# files where `make install PREFIX=/usr` puts them, dependencies from dpkg-shlibdeps; lintian must
# find no error.
deb: setup $(DEB_AFTER)
	@scripts/setup.sh --deb
	DEB_JOBS=$(DEB_JOBS) DEB_XZ_LEVEL=$(DEB_XZ_LEVEL) $(TIMED) deb $(IDLE) scripts/make-deb.sh
# Its two release binaries alone (make test builds them from its start, before the files the
# package shares with the debug build are made).
deb-binaries: setup
	DEB_JOBS=$(DEB_JOBS) $(TIMED) "deb's release build" $(IDLE) scripts/make-deb.sh --binaries

# Builds the package and tests it extracted (dpkg-deb -x) into a temporary root: its agent runs
# from there without the toolchain, and D-Bus activation starts it from the package's service file
# on a private bus; then the packages are installed with apt into a copy of a small Debian 13 root
# (DEBIAN13_BASE), where their dependencies must resolve, activation start the agent and the
# decoder run in bubblewrap. Nothing is installed on this machine (make test runs this).
deb-test: deb debian13-base $(DEB_TEST_AFTER)
	NETACTIVITY_DEB=$$(ls -t dist/netactivity_*.deb | head -n1) NETACTIVITY_DEBIAN13_BASE=$(CURDIR)/$(DEBIAN13_BASE) \
	    $(TIMED) "deb-test (its tests)" $(PYTHON) Tests/Integration/run.py --bin $(DEBUG_BIN) -k PackageTests

# The real round trip on this machine, as root: dpkg -i, the installed agent and activation, then
# dpkg --purge. Refuses to touch an installed netactivity package (one removed with its
# configuration left, dpkg's "rc", counts as not installed). Never part of make test.
deb-install-test: deb
	NETACTIVITY_DEB=$$(ls -t dist/netactivity_*.deb | head -n1) NETACTIVITY_DEB_INSTALL=1 \
	    $(PYTHON) Tests/Integration/run.py --bin $(DEBUG_BIN) -k PackageInstallTests

# An app of its own that adopts the library by path, as an app author would (Examples/): its own
# Package.swift and sources, built in this package's build folder, where the packages it shares
# with ours (SwiftNIO and async-http-client among them) are built once (12 s instead of 160 here).
EXAMPLE_BIN = $(CURDIR)/$(DEBUG_BIN)/netactivity-example
# It also compiles every Swift block of README.md and docs/*.md (its ReadmeSnippets target, written by
# `make readme-snippets`; a doc changed without it fails here).
example: setup
	$(PYTHON) scripts/readme-snippets.py --check
	cd Examples/netactivity-example && $(CURDIR)/$(TIMED) "example (SwiftNIO's build in it)" $(SWIFT) build --scratch-path $(CURDIR)/.build $(SWIFT_DEBUG)

readme-snippets:
	$(PYTHON) scripts/readme-snippets.py

# libnetactivity-1 (C, GObject, with a GIR typelib for Python, GJS, Vala and Rust): gdbus-codegen's
# proxies from dbus/*.xml (object manager and autocleanup included) and libnetactivity/netactivity.c
# (proxies with the right timeouts, the GError domain, images and pixels as GBytes, leases).
# Built by the rules below, not meson: they are one codegen call, one compiler call, the GIR's two
# tools and a sed for the .pc. meson's gnome module would replace the codegen and GIR calls but not
# the step that renames the generated calls (a custom target either way), and would add meson and
# ninja to the build dependencies and a configure step to every fresh `make lib`, for one library.
LIB_DIR = .build/libnetactivity
# Its version is the project's (packaging/changelog's newest entry). Its ABI is the soname's 0, raised
# only by a break (see CHANGELOG.md); the file is named as GLib's: 0.(minor*100+micro).0.
LIB_VERSION := $(shell head -1 packaging/changelog | tr -d '()' | cut -d' ' -f2)
LIB_SONAME = libnetactivity-1.so.0
LIB_FILE = libnetactivity-1.so.0.$(shell echo $(LIB_VERSION) | awk -F. '{print $$2 * 100 + $$3}').0
LIB = $(LIB_DIR)/$(LIB_FILE)
GIR = $(LIB_DIR)/NetActivity-1.0.gir
TYPELIB = $(LIB_DIR)/NetActivity-1.0.typelib
LIB_XML = $(sort $(wildcard dbus/org.example.NetActivity*.xml))
LIB_HEADERS = libnetactivity/netactivity.h libnetactivity/netactivity-errors.h $(LIB_DIR)/netactivity-generated.h
GIO_FLAGS = $$(pkg-config --cflags gio-unix-2.0)
GIO_LIBS = $$(pkg-config --libs gio-unix-2.0)
lib: setup
	@$(MAKE) --no-print-directory $(TYPELIB) $(LIB_PC)
print-lib-file:
	@echo $(LIB_FILE)
# docs/pictures: the indicator on GNOME Shell, in its tray and on waybar, as the tests show it.
pictures: setup build lib extension
	scripts/pictures.sh
# docs/gobject.md's list of every call, from what the library declares (make test checks it).
gobject-calls: lib
	scripts/gobject-calls.py $(LIB_DIR)/netactivity-generated.h
# One codegen call writes both (a grouped target: a parallel make runs it once, not once for each).
$(LIB_DIR)/netactivity-generated.c $(LIB_DIR)/netactivity-generated.h &: $(LIB_XML) Makefile
	@mkdir -p $(LIB_DIR)
	cd $(LIB_DIR) && gdbus-codegen --interface-prefix org.example.NetActivity. --c-namespace NetActivity \
	    --c-generate-object-manager --c-generate-autocleanup all --annotate org.example.NetActivity org.gtk.GDBus.C.Name Agent \
	    $(foreach a,AddImage()[data] AddImageForRequest()[data] LookupImage()[data] LookupImageForRequest()[data],\
	        --annotate 'org.example.NetActivity.ImageCache.$(a)' org.gtk.GDBus.C.ForceGVariant true) \
	    --generate-c-code netactivity-generated $(addprefix $(CURDIR)/,$(LIB_XML))
	@# Image bytes (ay) as GVariant, not as a string that ends at the first 0 byte (codegen's default).
	@# Every call's error goes through libnetactivity/netactivity-calls.h (no prefix; no agent is
	@# NET_ACTIVITY_ERROR_AGENT_NOT_RUNNING): the generated calls are renamed, and none may be left.
	sed -i -E 's/\<g_dbus_proxy_call(_with_unix_fd_list)?_(sync|finish) \(/_net_activity_proxy_call\1_\2 (/' \
	    $(LIB_DIR)/netactivity-generated.c
	! grep -nE '\<g_dbus_proxy_call(_with_unix_fd_list)?_(sync|finish)\>' $(LIB_DIR)/netactivity-generated.c
$(LIB): $(LIB_DIR)/netactivity-generated.c libnetactivity/netactivity.c libnetactivity/netactivity-calls.h $(LIB_HEADERS)
	$(DECODER_CC) -shared -fPIC -O2 -g -Wall -Wextra -Wno-unused-parameter -Werror -D_FORTIFY_SOURCE=2 -fstack-protector-strong \
	    -Ilibnetactivity -I$(LIB_DIR) -include netactivity-calls.h $(GIO_FLAGS) -o $@ $(LIB_DIR)/netactivity-generated.c libnetactivity/netactivity.c \
	    -Wl,-soname,$(LIB_SONAME) -Wl,-z,relro,-z,now -Wl,--as-needed $(GIO_LIBS)
	ln -sf $(notdir $@) $(LIB_DIR)/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $(LIB_DIR)/libnetactivity-1.so
$(GIR): $(LIB) scripts/gir-docs.py
	cd $(LIB_DIR) && LD_LIBRARY_PATH=. g-ir-scanner --quiet --warn-all --namespace=NetActivity --nsversion=1.0 \
	    --identifier-prefix=NetActivity --symbol-prefix=net_activity --include=Gio-2.0 --pkg=gio-unix-2.0 --pkg-export=netactivity-1 \
	    --library=netactivity-1 --library-path=. -L. --c-include=netactivity.h -I. -I$(CURDIR)/libnetactivity \
	    --output=$(notdir $@) netactivity-generated.h netactivity-generated.c \
	    $(CURDIR)/libnetactivity/netactivity.h $(CURDIR)/libnetactivity/netactivity-errors.h $(CURDIR)/libnetactivity/netactivity.c
	scripts/gir-docs.py $@
$(TYPELIB): $(GIR)
	g-ir-compiler --output=$@ $<
# Its API reference: gi-docgen's pages of the GIR (the C API and every language's names), with
# docs/gobject.md and the D-Bus reference scripts/xml-reference.py writes from the XML's comments.
LIB_DOCS = $(LIB_DIR)/libnetactivity-1
lib-docs: lib
	@$(MAKE) --no-print-directory $(LIB_DOCS)/index.html
$(LIB_DOCS)/index.html: $(GIR) libnetactivity/netactivity-1.toml docs/gobject.md scripts/xml-reference.py $(LIB_XML)
	rm -rf $(LIB_DOCS) $(LIB_DIR)/doc-src
	mkdir -p $(LIB_DIR)/doc-src
	@# gi-docgen titles a page from its Title: line (which docs/ leaves out: its heading says it).
	{ echo "Title: $$(sed -n '1s/^# //p' docs/gobject.md)"; echo; sed 1d docs/gobject.md; } > $(LIB_DIR)/doc-src/gobject.md
	scripts/xml-reference.py $(LIB_DIR)/doc-src/dbus.md
	sed 's|@version@|$(LIB_VERSION)|' libnetactivity/netactivity-1.toml > $(LIB_DIR)/doc-src/netactivity-1.toml
	gi-docgen generate --quiet --fatal-warnings --config $(LIB_DIR)/doc-src/netactivity-1.toml --content-dir $(LIB_DIR)/doc-src \
	    --output-dir $(LIB_DOCS) --no-namespace-dir $(GIR)
	@! grep -l "No description available" $(LIB_DOCS)/*.html || { echo "make: these pages describe nothing (above)"; exit 1; }

# The build tree as an installed one looks to an app: headers under include/netactivity-1 and a
# pkg-config file, so the examples build with `pkg-config netactivity-1` as apps do.
LIB_PC = $(LIB_DIR)/pkgconfig/netactivity-1.pc
$(LIB_PC): libnetactivity/netactivity-1.pc.in $(LIB) $(LIB_HEADERS)
	@mkdir -p $(LIB_DIR)/include/netactivity-1 $(dir $@)
	cp $(LIB_HEADERS) $(LIB_DIR)/include/netactivity-1/
	sed -e 's|@prefix@|$(CURDIR)/$(LIB_DIR)|' -e 's|@libdir@|$${prefix}|' -e 's|@includedir@|$${prefix}/include|' \
	    -e 's|@version@|$(LIB_VERSION)|' $< > $@
# The C examples of libnetactivity (Examples/libnetactivity), built as an app builds them.
LIB_EXAMPLES = .build/examples/fetch-image .build/examples/follow-task .build/examples/cancellable-task .build/examples/gallery
lib-examples: lib
	@$(MAKE) --no-print-directory $(LIB_EXAMPLES)
.build/examples/%: Examples/libnetactivity/%.c $(LIB_PC)
	@mkdir -p $(dir $@)
	$(DECODER_CC) -O2 -Wall -Wextra -Werror $< $$(PKG_CONFIG_PATH=$(LIB_DIR)/pkgconfig pkg-config --cflags --libs netactivity-1 $(if $(filter gallery,$*),gtk4)) -o $@

# The GTK 4 example in C (Examples/gtk4: an image the agent decoded, in a window, no copy); the
# Python one beside it needs no build. test_gtk.py shows both on Xvfb.
GTK_EXAMPLE = .build/examples/netactivity-pixels
gtk-example: setup
	@$(MAKE) --no-print-directory $(GTK_EXAMPLE)
$(GTK_EXAMPLE): Examples/gtk4/netactivity-pixels.c
	@mkdir -p $(dir $@)
	$(DECODER_CC) -O2 -Wall -Wextra -Werror $< $$(pkg-config --cflags --libs gtk4) -o $@

unit: setup decoder
	$(SWIFT) build --build-tests $(SWIFT_DEBUG)
	@install -m 0755 $(DECODER) $(DEBUG_BIN)/
	$(SWIFT) test --skip-build --skip NeverFailTests
	$(SWIFT) test --skip-build --filter NeverFailTests

integration: build
	$(PYTHON) Tests/Integration/run.py --bin $(DEBUG_BIN) $(ARGS)

# The whole suite under AddressSanitizer (agent, CLI and tests), and the threaded parts (the client
# library's own thread and mailbox, the event loop) under ThreadSanitizer. Separate build folders.
# A smaller quarantine for the agent: ASan's default keeps 256 MiB of freed memory resident, which
# the test of a client that never reads its replies would count as growth.
asan: setup decoder
	$(SWIFT) build --build-tests --scratch-path .build-asan -Xswiftc -sanitize=address
	@install -m 0755 $(DECODER) .build-asan/debug/
	ASAN_OPTIONS=detect_leaks=0 $(SWIFT) test --skip-build --scratch-path .build-asan
	ASAN_OPTIONS=detect_leaks=0:quarantine_size_mb=16 $(PYTHON) Tests/Integration/run.py --bin .build-asan/debug

tsan: setup
	$(SWIFT) build --build-tests --scratch-path .build-tsan -Xswiftc -sanitize=thread
	TSAN_OPTIONS=halt_on_error=1 .build-tsan/debug/netactivityPackageTests.xctest --testing-library swift-testing \
	    --filter "NetActivityTests|EventLoopTests|BindingTests|ImageSlotTests|TrackingTests"

# Both sanitizer runs (each builds into its own folder: allow 20-30 minutes on 2 cores).
check-sanitize: asan tsan

# A long run of fuzzing, load and faults against one agent, watched for growth (SOAK_SECONDS,
# default 600), after the parser fuzzers at FUZZ_ROUNDS times their make-test size.
SOAK_SECONDS ?= 600
FUZZ_ROUNDS ?= 20
soak: setup decoder
	$(SWIFT) build --build-tests $(SWIFT_DEBUG)
	@install -m 0755 $(DECODER) $(DEBUG_BIN)/
	NETACTIVITY_FUZZ_ROUNDS=$(FUZZ_ROUNDS) $(SWIFT) test --skip-build --filter ParserFuzzTests
	$(PYTHON) Tests/Integration/soak.py --bin $(DEBUG_BIN) --seconds $(SOAK_SECONDS)

bench: release
	@scripts/setup.sh --bench
	$(SWIFT) build $(RELEASE_FLAGS) --product netactivity-bench
	scripts/make-deb.sh --agent-only
	bash -o pipefail -c 'bench/bench.sh $(RELEASE_BIN) | tee .build/bench.md'
	@echo; echo "## The table of docs/performance.md, rewritten there (bench/summary.py; the whole output is in .build/bench.md)"; echo
	@$(PYTHON) bench/summary.py --write docs/performance.md < .build/bench.md

# The GNOME Shell extension, written once as ES modules (GNOME Shell 45 to 50): `make extension`
# puts that copy in .build/gnome-shell/45 and the one scripts/gnome-extension.py writes for 43 and
# 44 in .build/gnome-shell/43, each with its icon and translations. `make extension-zip` packs both
# as `gnome-extensions install` and extensions.gnome.org take them (dist/*.shell-extension.zip).
EXTENSION_SRC = desktop/gnome-shell/netactivity@example.org
EXTENSION_FILES = $(wildcard $(EXTENSION_SRC)/*)
EXTENSION_BUILD = .build/gnome-shell
extension: locale
	@$(MAKE) --no-print-directory $(EXTENSION_BUILD)/45/.built $(EXTENSION_BUILD)/43/.built
$(EXTENSION_BUILD)/%/.built: $(EXTENSION_FILES) scripts/gnome-extension.py desktop/icons/netactivity-symbolic.svg $(MO_FILES)
	rm -rf $(EXTENSION_BUILD)/$*/src && mkdir -p $(EXTENSION_BUILD)/$*/src/icons
	cp $(EXTENSION_FILES) $(EXTENSION_BUILD)/$*/src/
	cp desktop/icons/netactivity-symbolic.svg $(EXTENSION_BUILD)/$*/src/icons/
	for l in $(LOCALES); do mkdir -p $(EXTENSION_BUILD)/$*/src/locale/$$l/LC_MESSAGES && \
	    cp $(LOCALE_BUILD)/$$l/LC_MESSAGES/netactivity.mo $(EXTENSION_BUILD)/$*/src/locale/$$l/LC_MESSAGES/; done
	$(PYTHON) scripts/gnome-extension.py $(EXTENSION_BUILD)/$*/src $(EXTENSION_BUILD)/$*/netactivity@example.org \
	    $(if $(filter 43,$*),--legacy) --zip $(EXTENSION_BUILD)/$*/netactivity@example.org.shell-extension.zip
	rm -rf $(EXTENSION_BUILD)/$*/src
	touch $@
extension-zip: extension
	@mkdir -p dist
	cp $(EXTENSION_BUILD)/45/netactivity@example.org.shell-extension.zip dist/netactivity@example.org.shell-extension.zip
	cp $(EXTENSION_BUILD)/43/netactivity@example.org.shell-extension.zip dist/netactivity@example.org.gnome-43-44.shell-extension.zip
	@echo "dist/netactivity@example.org.shell-extension.zip: GNOME Shell 45 to 50 (gnome-extensions install FILE)"
	@echo "dist/netactivity@example.org.gnome-43-44.shell-extension.zip: GNOME Shell 43 and 44"
# Which copy `make install` puts in place: the one for the installed gnome-shell (45 without one),
# or EXTENSION_SHELL=43 or 45.
GNOME_SHELL_MAJOR := $(shell gnome-shell --version 2>/dev/null | sed -n 's/^GNOME Shell \([0-9]*\).*/\1/p')
EXTENSION_SHELL ?= $(if $(filter 40 41 42 43 44,$(GNOME_SHELL_MAJOR)),43,45)

# make install [PREFIX=/usr/local] [DESTDIR=] installs the binaries, the interface XML, the D-Bus
# activation file, the systemd user unit, the XDG autostart entry, the panel recipes, the manual
# pages, the symbolic icon and the GNOME Shell extension. INSTALL_BIN=DIR installs
# binaries already built there instead of building a release (the tests use it).
INSTALL_BIN ?=
BINDIR = $(PREFIX)/bin
DATADIR = $(PREFIX)/share
# Where systemd and the session look (`systemd-analyze --user unit-paths`, the XDG autostart spec):
# /usr and /usr/local use lib/systemd/user and /etc/xdg/autostart; a prefix in the home directory
# (~/.local) uses ~/.local/share/systemd/user and ~/.config/autostart; any other prefix gets
# $(PREFIX)/share/systemd/user and $(PREFIX)/etc/xdg/autostart, which nothing reads (make says so).
IN_HOME = $(filter $(HOME)/%,$(PREFIX))
SYSTEM_PREFIX = $(filter /usr /usr/local,$(PREFIX))
UNITDIR ?= $(if $(SYSTEM_PREFIX),$(PREFIX)/lib,$(PREFIX)/share)/systemd/user
AUTOSTARTDIR ?= $(if $(SYSTEM_PREFIX),/etc/xdg/autostart,$(if $(IN_HOME),$(or $(XDG_CONFIG_HOME),$(HOME)/.config)/autostart,$(PREFIX)/etc/xdg/autostart))
DOCDIR = $(DATADIR)/doc/netactivity
MANDIR = $(DATADIR)/man/man1
MAN5DIR = $(DATADIR)/man/man5
# The image decoder, which the agent starts (not a command of its own).
LIBEXECDIR = $(PREFIX)/libexec/netactivity
ICONDIR = $(DATADIR)/icons/hicolor/scalable/status
# libnetactivity-1: Debian's multiarch folder under /usr, lib elsewhere; the typelib where
# gobject-introspection looks (under /usr; elsewhere, name the folder in GI_TYPELIB_PATH).
MULTIARCH := $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)
LIBDIR ?= $(PREFIX)/lib$(if $(and $(filter /usr,$(PREFIX)),$(MULTIARCH)),/$(MULTIARCH))
INCLUDEDIR = $(PREFIX)/include/netactivity-1
GIRDIR = $(DATADIR)/gir-1.0
TYPELIBDIR = $(LIBDIR)/girepository-1.0
LIBDOCDIR = $(DATADIR)/doc/libnetactivity-1
# GNOME Shell looks in $XDG_DATA_DIRS/gnome-shell/extensions and ~/.local/share/gnome-shell/extensions.
EXTENSION = netactivity@example.org
EXTENSIONDIR = $(DATADIR)/gnome-shell/extensions/$(EXTENSION)
# What the panels include (the waybar and polybar recipes): data, not documentation (Debian Policy
# 12.3: nothing may need /usr/share/doc to work).
PKGDATADIR = $(DATADIR)/netactivity
SUBST = sed -e 's|@bindir@|$(BINDIR)|g' -e 's|@pkgdatadir@|$(PKGDATADIR)|g'

# libnetactivity-1 alone, built from its sources with no agent, no Swift and no apt-get: what an app
# bundles (docs/flatpak.md's module runs `make install-lib PREFIX=/app`).
install-lib: $(TYPELIB)
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(GIRDIR) $(DESTDIR)$(TYPELIBDIR)
	install -m 0644 $(LIB) $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(LIB)) $(DESTDIR)$(LIBDIR)/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $(DESTDIR)$(LIBDIR)/libnetactivity-1.so
	install -m 0644 $(LIB_HEADERS) $(DESTDIR)$(INCLUDEDIR)/
	sed -e 's|@prefix@|$(PREFIX)|' -e 's|@libdir@|$(LIBDIR)|' -e 's|@includedir@|$(PREFIX)/include|' \
	    -e 's|@version@|$(LIB_VERSION)|' libnetactivity/netactivity-1.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/netactivity-1.pc
	chmod 0644 $(DESTDIR)$(LIBDIR)/pkgconfig/netactivity-1.pc
	install -m 0644 $(GIR) $(DESTDIR)$(GIRDIR)/
	install -m 0644 $(TYPELIB) $(DESTDIR)$(TYPELIBDIR)/

install: $(if $(INSTALL_BIN),,release) locale lib lib-docs extension
	@$(MAKE) --no-print-directory install-lib
	rm -rf $(DESTDIR)$(LIBDOCDIR) && install -d $(DESTDIR)$(LIBDOCDIR) && cp -r $(LIB_DOCS)/. $(DESTDIR)$(LIBDOCDIR)/
	find $(DESTDIR)$(LIBDOCDIR) -type d -exec chmod 0755 {} + && find $(DESTDIR)$(LIBDOCDIR) -type f -exec chmod 0644 {} +
	install -d $(DESTDIR)$(DATADIR)/devhelp/books && ln -sfn ../../doc/libnetactivity-1 $(DESTDIR)$(DATADIR)/devhelp/books/libnetactivity-1
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DATADIR)/dbus-1/interfaces $(DESTDIR)$(DATADIR)/dbus-1/services \
	    $(DESTDIR)$(UNITDIR) $(DESTDIR)$(AUTOSTARTDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(DATADIR)/gnome-shell/extensions $(DESTDIR)$(MANDIR) $(DESTDIR)$(MAN5DIR) \
	    $(DESTDIR)$(LIBEXECDIR) \
	    $(DESTDIR)$(ICONDIR)
	install -m 0755 $(or $(INSTALL_BIN),$(RELEASE_BIN))/netactivityd $(or $(INSTALL_BIN),$(RELEASE_BIN))/netactivity \
	    $(DESTDIR)$(BINDIR)/
	install -m 0755 $(or $(INSTALL_BIN),$(RELEASE_BIN))/netactivity-decoder $(DESTDIR)$(LIBEXECDIR)/
	install -m 0644 dbus/org.example.NetActivity*.xml $(DESTDIR)$(DATADIR)/dbus-1/interfaces/
	$(SUBST) dbus/org.example.NetActivity.service > $(DESTDIR)$(DATADIR)/dbus-1/services/org.example.NetActivity.service
	$(SUBST) desktop/netactivityd.service > $(DESTDIR)$(UNITDIR)/netactivityd.service
	$(SUBST) desktop/netactivityd.desktop > $(DESTDIR)$(AUTOSTARTDIR)/netactivityd.desktop
	chmod 0644 $(DESTDIR)$(DATADIR)/dbus-1/services/org.example.NetActivity.service \
	    $(DESTDIR)$(UNITDIR)/netactivityd.service $(DESTDIR)$(AUTOSTARTDIR)/netactivityd.desktop
	install -m 0644 README.md CHANGELOG.md $(DESTDIR)$(DOCDIR)/
	install -m 0644 docs/*.md $(DESTDIR)$(DOCDIR)/docs/
	install -d $(DESTDIR)$(DOCDIR)/docs/pictures && install -m 0644 docs/pictures/*.png $(DESTDIR)$(DOCDIR)/docs/pictures/
	install -m 0644 man/netactivity.1 man/netactivityd.1 $(DESTDIR)$(MANDIR)/
	install -m 0644 man/netactivityd.conf.5 $(DESTDIR)$(MAN5DIR)/
	install -m 0644 desktop/icons/netactivity-symbolic.svg $(DESTDIR)$(ICONDIR)/
	for l in $(LOCALES); do \
	    install -d $(DESTDIR)$(DATADIR)/locale/$$l/LC_MESSAGES; \
	    install -m 0644 $(LOCALE_BUILD)/$$l/LC_MESSAGES/netactivity.mo $(DESTDIR)$(DATADIR)/locale/$$l/LC_MESSAGES/; done
	install -d $(DESTDIR)$(PKGDATADIR)
	for f in waybar-netactivity.jsonc polybar-netactivity.ini; do \
	    $(SUBST) desktop/$$f > $(DESTDIR)$(PKGDATADIR)/$$f && chmod 0644 $(DESTDIR)$(PKGDATADIR)/$$f; done
	install -d $(DESTDIR)$(LIBDOCDIR)/examples
	install -m 0644 $(wildcard Examples/libnetactivity/*) $(DESTDIR)$(LIBDOCDIR)/examples/
	rm -rf $(DESTDIR)$(EXTENSIONDIR) && cp -r $(EXTENSION_BUILD)/$(EXTENSION_SHELL)/$(EXTENSION) $(DESTDIR)$(EXTENSIONDIR)
	find $(DESTDIR)$(EXTENSIONDIR) -type d -exec chmod 0755 {} + && find $(DESTDIR)$(EXTENSIONDIR) -type f -exec chmod 0644 {} +
	@$(if $(or $(SYSTEM_PREFIX),$(IN_HOME)),,echo "note: systemd and the session do not read $(UNITDIR) or $(AUTOSTARTDIR);" \
	    "link the unit into ~/.config/systemd/user and the entry into ~/.config/autostart, or use PREFIX=~/.local")

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(notdir $(LIB)) $(DESTDIR)$(LIBDIR)/$(LIB_SONAME) $(DESTDIR)$(LIBDIR)/libnetactivity-1.so \
	      $(DESTDIR)$(LIBDIR)/pkgconfig/netactivity-1.pc $(DESTDIR)$(GIRDIR)/$(notdir $(GIR)) $(DESTDIR)$(TYPELIBDIR)/$(notdir $(TYPELIB))
	rm -rf $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDOCDIR) $(DESTDIR)$(DATADIR)/devhelp/books/libnetactivity-1
	rm -f $(DESTDIR)$(BINDIR)/netactivityd $(DESTDIR)$(BINDIR)/netactivity $(DESTDIR)$(LIBEXECDIR)/netactivity-decoder
	-rmdir $(DESTDIR)$(LIBEXECDIR) 2>/dev/null
	rm -f $(DESTDIR)$(MANDIR)/netactivity.1 $(DESTDIR)$(MANDIR)/netactivityd.1 $(DESTDIR)$(MAN5DIR)/netactivityd.conf.5 \
	      $(DESTDIR)$(ICONDIR)/netactivity-symbolic.svg
	for l in $(LOCALES); do rm -f $(DESTDIR)$(DATADIR)/locale/$$l/LC_MESSAGES/netactivity.mo; done
	rm -f $(DESTDIR)$(DATADIR)/dbus-1/interfaces/org.example.NetActivity.xml \
	      $(DESTDIR)$(DATADIR)/dbus-1/interfaces/org.example.NetActivity.Task.xml \
	      $(DESTDIR)$(DATADIR)/dbus-1/interfaces/org.example.NetActivity.ImageCache.xml \
	      $(DESTDIR)$(DATADIR)/dbus-1/interfaces/org.example.NetActivity.Downloader.xml
	rm -f $(DESTDIR)$(DATADIR)/dbus-1/services/org.example.NetActivity.service
	rm -f $(DESTDIR)$(UNITDIR)/netactivityd.service $(DESTDIR)$(AUTOSTARTDIR)/netactivityd.desktop
	rm -rf $(DESTDIR)$(DATADIR)/doc/netactivity $(DESTDIR)$(PKGDATADIR) $(DESTDIR)$(EXTENSIONDIR)

clean:
	rm -rf .build .build-deb dist Examples/netactivity-example/.build
