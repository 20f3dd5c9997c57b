# netactivity: `make run` and `make test` do all set-up on a fresh Debian machine.
PREFIX ?= /usr/local
DESTDIR ?=
SWIFT ?= swift
PYTHON ?= /usr/bin/python3
DEBUG_BIN = .build/debug
RELEASE_BIN = .build/release

.PHONY: all setup build release run test unit integration bench install uninstall clean

all: build

setup:
	@scripts/setup.sh

build: setup
	$(SWIFT) build

release: setup
	$(SWIFT) build -c release

# Starts the agent on the session bus; with none, netactivityd starts a private bus and prints
# its DBUS_SESSION_BUS_ADDRESS.
run: release
	exec $(RELEASE_BIN)/netactivityd $(ARGS)

test: setup
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build
	$(PYTHON) Tests/Integration/run.py --bin $(DEBUG_BIN)

unit: setup
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

integration: build
	$(PYTHON) Tests/Integration/run.py --bin $(DEBUG_BIN) $(ARGS)

bench: release
	@scripts/setup.sh --bench
	bench/bench.sh $(RELEASE_BIN)

install: release
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/dbus-1/interfaces
	install -m 0755 $(RELEASE_BIN)/netactivityd $(RELEASE_BIN)/netactivity $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 dbus/org.example.NetActivity*.xml $(DESTDIR)$(PREFIX)/share/dbus-1/interfaces/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/netactivityd $(DESTDIR)$(PREFIX)/bin/netactivity
	rm -f $(DESTDIR)$(PREFIX)/share/dbus-1/interfaces/org.example.NetActivity.xml \
	      $(DESTDIR)$(PREFIX)/share/dbus-1/interfaces/org.example.NetActivity.Task.xml

clean:
	rm -rf .build
