#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""What the desktop's proxy resolver costs the agent: start-up (exec to the bus name), the first
download (FetchImage of one small image from a local server: the resolver is loaded then), and the
agent's memory after it (RSS, and its private dirty part), without a resolver (NETACTIVITY_LIBGIO
names a missing library), with GIO's GNOME resolver (XDG_CURRENT_DESKTOP=GNOME: GNOME's settings
through dconf, no proxy set) and with GIO through libproxy (any other desktop: libproxy loads its
plugins, WebKit's JavaScriptCore among them where libproxy1-plugin-webkit is installed), ROUNDS each,
on a bus of each round's own. Prints a markdown table of the medians.

    proxy_cost.py AGENT_BINARY URL ROUNDS"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import dbus

# The contract's names, generated from dbus/*.xml (the tests' copy), and the tests' list of proxy variables.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "Integration"))
import contract  # noqa: E402
from harness import PROXY_VARIABLES  # noqa: E402

AGENT, URL, ROUNDS = sys.argv[1], sys.argv[2], int(sys.argv[3])
NAME, PATH, D = contract.BUS_NAME, contract.OBJECT_PATH, contract.Downloader


def memory(pid):
    fields = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            key, _, rest = line.partition(":")
            if rest.strip().endswith("kB"):
                fields[key] = int(rest.split()[0])
    # Private_Dirty: the agent's own pages (a library's pages no other process maps count as
    # Private_Clean, but are the same file's pages for every process that maps it).
    return fields["Rss"] / 1024, fields["Private_Dirty"] / 1024


def round_(desktop, n):
    """desktop: "GNOME" (GIO's GNOME resolver), "" (GIO through libproxy), None (no GIO)."""
    folder = tempfile.mkdtemp(prefix="netactivity-proxy-bench-")
    bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1",
                            "--address=unix:path=%s/bus" % folder], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    address = bus.stdout.readline().decode().strip()
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES}
    env.update(DBUS_SESSION_BUS_ADDRESS=address, XDG_CACHE_HOME=folder + "/cache", XDG_CONFIG_HOME=folder + "/config")
    env.pop("XDG_CURRENT_DESKTOP", None)
    if desktop is None:
        env["NETACTIVITY_LIBGIO"] = "libnetactivity-missing-gio.so.0"
    elif desktop:
        env["XDG_CURRENT_DESKTOP"] = desktop
    conn = dbus.bus.BusConnection(address)
    started = time.monotonic()
    agent = subprocess.Popen([AGENT], env=env, stderr=subprocess.DEVNULL)
    try:
        while not conn.name_has_owner(NAME):
            time.sleep(0.0005)
        start_ms = (time.monotonic() - started) * 1000
        time.sleep(0.5)
        downloader = dbus.Interface(conn.get_object(NAME, PATH, introspect=False), D.INTERFACE)
        began = time.monotonic()
        image = downloader.get_dbus_method(D.FetchImage)("%s/small/proxy-%s-%d.png" % (URL, desktop, n),
                                      dbus.Dictionary({}, signature="sv"), timeout=60)[0]
        first_ms = (time.monotonic() - began) * 1000
        os.close(image.take())
        time.sleep(1)
        rss, private = memory(agent.pid)
        return start_ms, first_ms, rss, private
    finally:
        agent.terminate()
        agent.wait(10)
        conn.close()
        bus.terminate()
        bus.wait(5)
        shutil.rmtree(folder, ignore_errors=True)


def medians(desktop):
    rounds = [round_(desktop, n) for n in range(ROUNDS)]
    return [statistics.median(r[i] for r in rounds) for i in range(4)]


none, gnome, other = medians(None), medians("GNOME"), medians("")
print("| measure | no resolver | GNOME: GIO's GNOME resolver | elsewhere: GIO through libproxy |")
print("|---|---:|---:|---:|")
for i, (label, unit) in enumerate((("start-up, exec to the bus name", "ms"),
                                   ("first download (FetchImage, one small image)", "ms"),
                                   ("RSS after the first download", "MiB"),
                                   ("private dirty memory after the first download", "MiB"))):
    print("| proxy resolver: %s, %s | %.1f | %.1f (%+.1f) | %.1f (%+.1f) |"
          % (label, unit, none[i], gnome[i], gnome[i] - none[i], other[i], other[i] - none[i]))
