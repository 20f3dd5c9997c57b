#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""make soak: one agent under rounds of abuse for a bounded time, watched for growth.

soak.py --bin DIR [--seconds 600]

Each round, on one private bus and one agent that is never restarted by the soak itself:
  - fuzz_bus.py with a new seed (1,500 calls, books checked);
  - netactivity-bench load: 100 clients for 10 s, then 100 more killed -9 after 2 s;
  - downloads from a local server, one of which is killed mid-transfer;
  - decoded pixels: three apps asking FetchPixels for 30 images each (some fit to a box, one of them
    not an image), one app killed mid-way, and a decoder killed (SIGKILL) mid-round;
  - floods of the decoded tier: one app asking FetchPixels for one image at 600 boxes, and one
    sending four progressive-JPEG bombs of 3,000 scans without waiting and leaving;
and after each round: everything released (ActivityCount 0, no clients, no running task, no
download), the image cache emptied (the decoded tier with it: DecodedMemoryUsage 0), at most two
decoders left, and the agent's anonymous RSS, the memory its memfds hold and its open descriptors sampled. At the
end the last third of the rounds must not have grown past the first third (RSS and memfds each
within 24 MiB, descriptors within 8, not counting the idle HTTP connections libcurl keeps for reuse,
which must stay within its pool of 16), and the agent must be alive.
Prints one line per round and a summary; exit status 0 when all held.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

import dbus

import contract

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
parser = argparse.ArgumentParser()
parser.add_argument("--bin", default=".build/debug")
parser.add_argument("--seconds", type=float, default=600)
args = parser.parse_args()
os.environ["NETACTIVITY_BIN"] = os.path.abspath(args.bin)

from harness import (NAME, PATH, PROPS, IFACE, Agent, PrivateBus, connect, descendants_named, fd_kinds,  # noqa: E402
                     nothing_held, status_kib, wait_until)
from test_downloads import ImageServer  # noqa: E402



ACTIVATION, COMPLETION = 0.1, 0.05


def reset_settings(conn):
    obj = conn.get_object(NAME, PATH, introspect=False)
    cache = contract.ImageCache.INTERFACE
    obj.Set(cache, "PreferredMemoryUsageAfterPurge", dbus.UInt64(0, variant_level=1), dbus_interface=PROPS)
    obj.Set(cache, "MemoryCapacity", dbus.UInt64(104857600, variant_level=1), dbus_interface=PROPS)
    obj.Set(cache, "PreferredMemoryUsageAfterPurge", dbus.UInt64(62914560, variant_level=1), dbus_interface=PROPS)
    # Off and on again: disabling forces NotActive, ending a completion delay the fuzzer set long.
    obj.Set(IFACE, "Enabled", dbus.Boolean(False, variant_level=1), dbus_interface=PROPS)
    obj.Set(IFACE, "Enabled", dbus.Boolean(True, variant_level=1), dbus_interface=PROPS)
    # The delays the agent was started with: the fuzzer may leave CompletionDelay at 60 s, and the
    # indicator then (rightly) stays visible for a minute, past the 30 s the round waits for it.
    obj.Set(IFACE, "ActivationDelay", dbus.Double(ACTIVATION, variant_level=1), dbus_interface=PROPS)
    obj.Set(IFACE, "CompletionDelay", dbus.Double(COMPLETION, variant_level=1), dbus_interface=PROPS)


POOLED_CONNECTIONS = 16  # HTTPFetcher.pooledConnections: idle HTTP connections libcurl keeps for reuse


def tcp_sockets(pid):
    """The process's TCP sockets (its fds whose inode /proc/net/tcp lists)."""
    inodes = set()
    for table in ("/proc/%d/net/tcp" % pid, "/proc/%d/net/tcp6" % pid):
        try:
            with open(table) as f:
                inodes |= {line.split()[9] for line in f.readlines()[1:]}
        except OSError:
            pass
    mine = 0
    for name in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, name))
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            mine += 1
    return mine


def sample(pid):
    """Anonymous RSS, descriptors without the connections libcurl's pool keeps (bounded: checked
    apart), the pool's, and the descriptors by kind."""
    kinds = fd_kinds(pid)
    tcp = tcp_sockets(pid)
    return status_kib(pid, "RssAnon"), sum(kinds.values()) - tcp, tcp, kinds


def memfd_kib(pid):
    """The shared memory the process's memfds hold, in KiB (their sizes: mapped or not)."""
    total = 0
    folder = "/proc/%d/fd" % pid
    for name in os.listdir(folder):
        try:
            if os.readlink(os.path.join(folder, name)).startswith("/memfd:"):
                total += os.stat(os.path.join(folder, name)).st_size
        except OSError:
            continue
    return total // 1024


def decoders(pid):
    """The agent's decoder processes (in bwrap or not)."""
    return descendants_named(pid, "netactivity-de")


def decoded_pixels(bus, http, seed, agent_pid, number):
    """Three FetchPixels apps, one killed mid-way, and a decoder killed meanwhile; their failures."""
    urls = [http.url("/img/px%d-%d.png" % (seed, i)) for i in range(29)] + [http.url("/text")]
    apps = [subprocess.Popen([sys.executable, os.path.join(HERE, "pixels_client.py"), bus.address, *urls],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for _ in range(3)]
    try:
        wait_until(lambda: decoders(agent_pid), timeout=30, what="a decoder")
        os.kill(decoders(agent_pid)[0], signal.SIGKILL)  # its request fails (Decode); the next get a new one
    except (AssertionError, ProcessLookupError, IndexError):
        pass  # the apps were done first: nothing to kill this round
    apps[2].kill()
    problems = []
    for app in apps:
        out, _ = app.communicate(timeout=120)
        if app is apps[2]:
            continue
        report = json.loads(out.splitlines()[-1]) if out.strip() else {}
        expected = {contract.ERROR_PREFIX + "NotAnImage", contract.ERROR_PREFIX + "Decode"}
        if report.get("pixels", 0) < 27 or set(report.get("errors", {})) - expected:
            problems.append({"round": number, "pixels": report or out[-500:]})
    return problems


def floods(bus, http, number, bomb):
    """A box flood and a decode-bomb client, each a stranger.py app; their failures."""
    problems = []
    for commands in ([("fetch-pixel-boxes", http.url("/img/boxes%d.png" % number), 600)],
                     [("add", "bomb%d" % i, bomb.hex()) for i in range(4)] + [("open-pixels-async", ["bomb%d" % i for i in range(4)])]
                     if bomb else []):
        if not commands:
            continue
        app = subprocess.Popen([sys.executable, os.path.join(HERE, "stranger.py"), bus.address], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for command in commands:
            app.stdin.write(json.dumps(command) + "\n")
            app.stdin.flush()
            answer = json.loads(app.stdout.readline() or "{}")
            if command[0] == "fetch-pixel-boxes" and answer.get("ok", {}).get("ok") != 600:
                problems.append({"round": number, "box_flood": answer})
        app.stdin.close()  # it leaves, its bombs still queued or decoding
        app.wait(120)
    return problems


def main():
    bus = PrivateBus()
    agent = Agent(bus, "--activation-delay", str(ACTIVATION), "--completion-delay", str(COMPLETION))
    http = ImageServer()
    conn = connect(bus)
    bench = os.path.join(args.bin, "netactivity-bench")
    deadline = time.monotonic() + args.seconds
    rounds, failures = [], []
    seed = 100
    try:
        from test_decoder import progressive_bomb
        bomb = progressive_bomb(3000)
    except (OSError, subprocess.CalledProcessError):
        bomb = None  # no ImageMagick: the round has no bombs
        print(json.dumps({"note": "no ImageMagick: the rounds send no decode bombs"}), flush=True)
    try:
        while time.monotonic() < deadline and not failures:
            seed += 1
            t = time.monotonic()
            # The fuzzer checks the cache's books against the keys it used: start it on an empty cache.
            conn.get_object(NAME, PATH, introspect=False).RemoveAllImages(dbus_interface=contract.ImageCache.INTERFACE)
            fuzz = subprocess.run([sys.executable, os.path.join(HERE, "fuzz_bus.py"), bus.address, "--seed", str(seed),
                                   "--calls", "1500", "--seconds", "60", "--http", http.url("")],
                                  capture_output=True, text=True, timeout=300)
            report = json.loads(fuzz.stdout.splitlines()[-1]) if fuzz.stdout.strip() else {}
            if fuzz.returncode != 0:
                failures.append({"round": len(rounds) + 1, "fuzz": report.get("failures") or report.get("mismatches")
                                 or fuzz.stderr[-500:]})
            reset_settings(conn)  # what the fuzzer set (a tiny MemoryCapacity, say) is not the load's business
            load = subprocess.run([bench, "load", "100", "10", str(seed)], env=bus.env(), capture_output=True, text=True,
                                  timeout=120)
            if load.returncode != 0:
                failures.append({"round": len(rounds) + 1, "load": load.stdout + load.stderr[-500:]})
            killed = subprocess.Popen([bench, "load", "100", "60", str(seed)], env=bus.env(), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            time.sleep(2)
            killed.send_signal(signal.SIGKILL)
            killed.wait()
            dl = subprocess.Popen([sys.executable, os.path.join(HERE, "download_client.py"), bus.address,
                                   *[http.url("/img/s%d-%d.png" % (seed, i)) for i in range(20)], http.url("/slow.png")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            dl.send_signal(signal.SIGKILL)  # its receipts die with it, mid-transfer
            dl.wait()
            failures += decoded_pixels(bus, http, seed, agent.proc.pid, len(rounds) + 1)
            failures += floods(bus, http, len(rounds) + 1, bomb)
            try:
                wait_until(lambda: nothing_held(conn), timeout=30, what="everything released")
            except AssertionError as e:
                failures.append({"round": len(rounds) + 1, "released": str(e)})
            if not agent.alive():
                failures.append({"round": len(rounds) + 1, "agent": "died", "log": agent.logtext()[-2000:]})
                break
            # Cached images hold memory and memfds by design: measure the agent without them.
            obj = conn.get_object(NAME, PATH, introspect=False)
            obj.RemoveAllImages(dbus_interface=contract.ImageCache.INTERFACE)
            held = int(obj.Get(contract.ImageCache.INTERFACE, contract.ImageCache.DecodedMemoryUsage, dbus_interface=PROPS))
            if held:
                failures.append({"round": len(rounds) + 1, "decoded_memory_usage": held})
            if len(decoders(agent.proc.pid)) > 2:
                failures.append({"round": len(rounds) + 1, "decoders": decoders(agent.proc.pid)})
            rss, fds, tcp, kinds = sample(agent.proc.pid)
            shmem = memfd_kib(agent.proc.pid)
            if tcp > POOLED_CONNECTIONS:
                failures.append({"round": len(rounds) + 1, "http_connections": tcp})
            line = load.stdout.strip().splitlines()[-1] if load.stdout.strip() else ""
            rounds.append({"round": len(rounds) + 1, "seconds": round(time.monotonic() - t, 1), "fuzz_calls": report.get("calls"),
                           "load": line, "rss_anon_kib": rss, "memfd_kib": shmem, "fds": fds, "http_connections": tcp,
                           "fd_kinds": kinds})
            print(json.dumps(rounds[-1]), flush=True)
        if rounds:
            first = rounds[: max(1, len(rounds) // 3)]
            last = rounds[-max(1, len(rounds) // 3):]
            grew_rss = max(r["rss_anon_kib"] for r in last) - max(r["rss_anon_kib"] for r in first)
            grew_fds = max(r["fds"] for r in last) - max(r["fds"] for r in first)
            grew_shmem = max(r["memfd_kib"] for r in last) - max(r["memfd_kib"] for r in first)
            if grew_rss > 24 * 1024 or grew_fds > 8 or grew_shmem > 24 * 1024:
                failures.append({"growth": {"rss_kib": grew_rss, "fds": grew_fds, "memfd_kib": grew_shmem}})
            print(json.dumps({"rounds": len(rounds), "rss_growth_kib": grew_rss, "memfd_growth_kib": grew_shmem,
                              "fd_growth": grew_fds, "failures": failures}))
        else:
            print(json.dumps({"rounds": 0, "failures": failures}))
    finally:
        conn.close()
        http.stop()
        alive = agent.alive()
        agent.stop()
        bus.stop()
    ok = alive and not failures and rounds
    print("%d passed, %d failed" % (len(rounds), 0 if ok else max(1, len(failures))))
    sys.exit(0 if ok else 1)


main()
