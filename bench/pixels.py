#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""make bench's decoded-pixels rows: ten apps showing the same 50 images through the agent
(FetchPixels: decoded once, mapped by all) next to ten apps doing it all in-process (libcurl,
libjpeg-turbo, libspng); decode throughput and box decodes next to libjpeg-turbo in-process; time to
pixels for a memory hit; and a separate prober's worst Ping while three apps fetch 40 photos' pixels.

    pixels.py ADDRESS AGENT_PID BUS_PID TOOLS_DIR IMAGES_DIR HTTP_BASE PROBER

TOOLS_DIR has pixels_app and pixels_reference built; IMAGES_DIR avatar.png and avatar.jpg (256 px),
photo.jpg (2000 x 1500) and big.jpg (6000 x 4000), served by the bench's server as
HTTP_BASE/files/NAME/ANY. Prints "key=value" lines."""
import glob
import os
import subprocess
import sys
import time

ADDRESS, AGENT, BUS, TOOLS, IMAGES, HTTP, PROBER = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:8]
APP, REFERENCE = os.path.join(TOOLS, "pixels_app"), os.path.join(TOOLS, "pixels_reference")
ENV = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=ADDRESS)
OBJECT = ["org.example.NetActivity", "/org/example/NetActivity", "org.example.NetActivity.ImageCache"]


def cpu_ns(pid):
    """All of a process's threads' CPU time so far (schedstat), 0 once it is gone."""
    total = 0
    for f in glob.glob("/proc/%d/task/*/schedstat" % pid):
        try:
            with open(f) as s:
                total += int(s.read().split()[0])
        except (OSError, ValueError):
            pass
    return total


def pss_kib(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            return sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))
    except OSError:
        return 0


def descendants(pid):
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    found, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def settle():
    """Waits until the agent uses no CPU (the images it let go freed by its closing thread)."""
    last = cpu_ns(AGENT)
    for _ in range(50):
        time.sleep(0.1)
        now = cpu_ns(AGENT)
        if now == last:
            return
        last = now


def busctl(*args):
    subprocess.run(["busctl", "--address=" + ADDRESS, *args], check=True, stdout=subprocess.DEVNULL)


def set_decoded(capacity):
    busctl("set-property", *OBJECT, "DecodedPreferredMemoryUsageAfterPurge", "t", str(min(capacity, 60 << 20)))
    busctl("set-property", *OBJECT, "DecodedMemoryCapacity", "t", str(capacity))


def urls(tag):
    """The 50 images: 20 PNG and 20 JPEG avatars of 256 px, 10 photos of 2000 x 1500."""
    return ([HTTP + "/files/avatar.png/%s-%d" % (tag, i) for i in range(20)]
            + [HTTP + "/files/avatar.jpg/%s-%d" % (tag, i) for i in range(20)]
            + [HTTP + "/files/photo.jpg/%s-%d" % (tag, i) for i in range(10)])


def start_all(commands):
    """Starts every command, waits for each one's "ready" line; returns the processes."""
    procs = [subprocess.Popen(c, env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for c in commands]
    for p in procs:
        line = p.stdout.readline()
        assert line.startswith("ready") and "failures=0" in line, line
    return procs


def finish(procs):
    for p in procs:
        p.stdin.close()
    for p in procs:
        assert p.wait(60) == 0


def ten_apps_through_the_agent():
    busctl("call", *OBJECT, "RemoveAllImages")
    set_decoded(256 << 20)  # the 10 photos are 120 MB of pixels: each is decoded once, and kept
    settle()
    before = {p: cpu_ns(p) for p in [AGENT, BUS, *descendants(AGENT)]}
    apps = start_all([[APP, "show", "4", "0", *urls("agent")] for _ in range(10)])
    helpers = descendants(AGENT)  # the decoders (and their bubblewraps), still there: 30 s idle
    cpu = sum(cpu_ns(p.pid) for p in apps) + sum(cpu_ns(p) - before.get(p, 0) for p in [AGENT, BUS, *helpers])
    pss = sum(pss_kib(p.pid) for p in apps) + pss_kib(AGENT) + sum(pss_kib(p) for p in helpers)
    bus_cpu = cpu_ns(BUS) - before[BUS]
    finish(apps)
    set_decoded(100 << 20)
    return pss, cpu, bus_cpu


def ten_apps_in_process():
    apps = start_all([[REFERENCE, "show", *urls("reference")] for _ in range(10)])
    pss, cpu = sum(pss_kib(p.pid) for p in apps), sum(cpu_ns(p.pid) for p in apps)
    finish(apps)
    return pss, cpu


def field(out, key):
    return float(out.split(key + "=")[1].split()[0])


def run(*command, cpu):
    return subprocess.run(["taskset", "-c", str(cpu), *command], env=ENV, capture_output=True, text=True,
                          check=True).stdout


def through_agent(*command):
    """pixels_app's output, and the CPU ms of the agent, its decoders and the bus daemon meanwhile
    added to the app's own."""
    others = lambda: [AGENT, BUS, *descendants(AGENT)]
    before = {p: cpu_ns(p) for p in others()}
    out = run(APP, *command, cpu=1)
    spent = sum(cpu_ns(p) - before.get(p, 0) for p in others())
    return out, spent / 1e6 + field(out, "cpu_ms")


def decoders_cpu_ns():
    return sum(cpu_ns(p) for p in descendants(AGENT))


def web_formats(out):
    """AVIF and JPEG XL against their libraries in-process; the P3 photo's conversion against the
    same photo untagged (the decoders' CPU alone); an animation's bytes and times against giflib."""
    set_decoded(256 << 20)
    for name, file in (("avif", "photo.avif"), ("jxl", "photo.jxl"), ("svg", "chart.svg")):
        image = os.path.join(IMAGES, file)
        through_agent("decode", "1", "0", image)  # a decoder ready
        settle()
        decoded, _ = through_agent("decode", "10", "0", image)
        reference = run(REFERENCE, "decode", "10", "0", image, cpu=0)
        out[name + "_per_s"] = "%.1f" % field(decoded, "images_per_s")
        out["reference_%s_per_s" % name] = "%.1f" % field(reference, "images_per_s")
        busctl("call", *OBJECT, "RemoveAllImages")
    for key, name in (("untagged_cpu_ms", "photo.jpg"), ("p3_cpu_ms", "photo-p3.jpg")):
        settle()
        before = decoders_cpu_ns()
        run(APP, "decode", "10", "0", os.path.join(IMAGES, name), cpu=1)
        out[key] = "%.1f" % ((decoders_cpu_ns() - before) / 1e6 / 10)
        busctl("call", *OBJECT, "RemoveAllImages")
    animation = os.path.join(IMAGES, "anim.gif")
    first = run(APP, "decode", "1", "256", animation, cpu=1)
    busctl("call", *OBJECT, "RemoveAllImages")
    settle()
    whole = run(APP, "animation", "1", "256", animation, cpu=1)
    reference = run(REFERENCE, "animation", animation, cpu=0)
    out.update(anim_bytes="%d" % field(whole, "mapped_bytes"), reference_anim_bytes="%d" % field(reference, "bytes"),
               anim_first_ms="%.1f" % (field(first, "seconds") * 1e3), anim_all_ms="%.1f" % (field(whole, "seconds") * 1e3),
               reference_anim_first_ms="%.1f" % field(reference, "first_ms"),
               reference_anim_all_ms="%.1f" % field(reference, "all_ms"))
    busctl("call", *OBJECT, "RemoveAllImages")
    set_decoded(100 << 20)


def main():
    out = {}
    agent_pss, agent_cpu, bus_cpu = ten_apps_through_the_agent()
    ref_pss, ref_cpu = ten_apps_in_process()
    out.update(apps_pss_mib="%.1f" % (agent_pss / 1024), reference_pss_mib="%.1f" % (ref_pss / 1024),
               apps_cpu_ms="%.0f" % (agent_cpu / 1e6), reference_cpu_ms="%.0f" % (ref_cpu / 1e6),
               bus_cpu_ms="%.0f" % (bus_cpu / 1e6))
    # Decoding: the decoder runs on the agent's CPU (0); the in-process reference there too.
    photo, big = os.path.join(IMAGES, "photo.jpg"), os.path.join(IMAGES, "big.jpg")
    through_agent("decode", "2", "0", photo)  # a decoder started, its first image decoded
    # The 20 decoded photos kept, as the in-process app keeps its 20 (240 MB): nothing is evicted
    # (and freed) while the clock runs, on either side.
    busctl("call", *OBJECT, "RemoveAllImages")
    set_decoded(256 << 20)
    settle()
    decoded, cpu = through_agent("decode", "20", "0", photo)
    busctl("call", *OBJECT, "RemoveAllImages")
    set_decoded(100 << 20)
    reference = run(REFERENCE, "decode", "20", "0", photo, cpu=0)
    out.update(decode_per_s="%.1f" % field(decoded, "images_per_s"), decode_cpu_ms="%.1f" % (cpu / 20),
               reference_decode_per_s="%.1f" % field(reference, "images_per_s"),
               reference_decode_cpu_ms="%.1f" % (field(reference, "cpu_ms") / 20))
    settle()
    boxed, cpu = through_agent("decode", "5", "256", big)
    reference = run(REFERENCE, "decode", "5", "256", big, cpu=0)
    out.update(box_per_s="%.2f" % field(boxed, "images_per_s"), box_cpu_ms="%.1f" % (cpu / 5),
               box_entry_bytes="%d" % (field(boxed, "mapped_bytes") / 5),
               reference_box_per_s="%.2f" % field(reference, "images_per_s"),
               reference_box_cpu_ms="%.1f" % (field(reference, "cpu_ms") / 5))
    busctl("call", *OBJECT, "RemoveAllImages")
    web_formats(out)
    hits = run(APP, "hits", "2000", HTTP + "/files/avatar.png/hit", cpu=1)
    out.update(hit_p50_us="%.0f" % field(hits, "p50_us"), hit_p99_us="%.0f" % field(hits, "p99_us"))
    # The loop while three apps fetch 40 photos' pixels (40 decodes of 2000 x 1500 for all three).
    prober = subprocess.Popen(["taskset", "-c", "1", sys.executable, PROBER, ADDRESS], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert prober.stdout.readline().strip() == "ready"
    photos = [HTTP + "/files/photo.jpg/probe-%d" % i for i in range(40)]
    finish(start_all([[APP, "show", "4", "0", *photos] for _ in range(3)]))
    prober.stdin.close()
    last = prober.stdout.read().strip().splitlines()[-1]
    out["ping_max_ms"] = last.split('"max_ms": ')[1].split(",")[0].split("}")[0]
    busctl("call", *OBJECT, "RemoveAllImages")
    for k, v in out.items():
        print("%s=%s" % (k, v))


main()
