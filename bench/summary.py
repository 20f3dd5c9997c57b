#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Turns `make bench`'s output (its markdown tables, on stdin) into the one Performance table:
each row a measure with the reference it is compared with in the same run.

    bench/summary.py < bench-output.md                 # prints the table
    bench/summary.py --write docs/performance.md < ... # replaces the table between its markers
"""
import re
import sys

text = sys.stdin.read()
rows = []  # (label, cells), in order: one label can head rows of several tables
for line in text.splitlines():
    if line.startswith("|") and not line.startswith("|---"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append((cells[0].replace("**", ""), cells[1:]))


def find(prefix, width=None):
    """The first row whose label starts with `prefix` (and has `width` cells, if given)."""
    for label, cells in rows:
        if label.startswith(prefix) and (width is None or len(cells) == width):
            return cells
    return None


def num(s):
    m = re.search(r"-?[0-9][0-9,]*\.?[0-9]*", s or "")
    return float(m.group(0).replace(",", "")) if m else None


def fmt(x, digits=0):
    if x is None:
        return "?"
    return f"{x:,.{digits}f}" if digits else f"{x:,.0f}"


def ratio(a, b, digits=2):
    return f"{a / b:.{digits}f}x" if a is not None and b not in (None, 0) else "?"


out = []


def row(measure, ours, reference="", r="", target="", met=None):
    mark = "" if met is None else ("yes" if met else "**no**")
    out.append(f"| {measure} | {ours} | {reference} | {r} | {target} | {mark} |")


machine = re.search(r"- machine: (.*)", text)
date = re.search(r"benchmark, (\d{4}-\d\d-\d\d)", text)

# Round trips (bench/roundtrips.sh: rtt, p50, p99, pipelined, 4 clients, idle RSS, peak RSS).
ours, c, sd = find("netactivityd (Swift)"), find("libdbus (C)"), find("sd-bus (C)")
if ours and c and sd:
    for i, name in ((0, "IncrementActivityCount round trips/s (one client, pinned with the bus)"),
                    (3, "the same, pipelined (1,000 in flight)"), (4, "the same, 4 clients")):
        a, b = num(ours[i]), num(c[i])
        row(name, fmt(a), f"libdbus C {fmt(b)}; sd-bus C {fmt(num(sd[i]))}", ratio(a, b), "≥ 1x libdbus C", a >= b)
# Callgrind's table: service | instructions per call | ratio.
cg_a, cg_c = find("netactivityd (Swift)", width=2), find("libdbus (C)", width=2)
if cg_a and cg_c:
    a, b = num(cg_a[0]), num(cg_c[0])
    row("instructions per IncrementActivityCount (callgrind)", fmt(a), f"libdbus C {fmt(b)}", ratio(a, b), "≤ 1x", a <= b)

def single(prefix, measure, target="", check=None, digits=None):
    cells = find(prefix)
    if not cells:
        return
    value = cells[0]
    met = check(num(value)) if check and num(value) is not None else None
    row(measure, value, "", "", target, met)

single("idle CPU over", "idle CPU over 10 s, clock ticks", "0", lambda v: v == 0)
single("idle wake-ups over", "idle wake-ups over 10 s", "0", lambda v: v == 0)
single("idle RSS MiB", "idle RSS, `make run`'s build, after the round trips and the quiet, MiB", "≤ 8", lambda v: v <= 8)
single("idle RSS MiB, the packaged build (", "idle RSS, the installed package, 2 s after start, MiB")
single("idle RSS MiB, the packaged build, after 10 s", "idle RSS, the installed package, after 10 s of quiet, MiB", "≤ 8",
       lambda v: v <= 8)
single("idle RSS MiB, the packaged build, after a spell", "idle RSS, the installed package, after a spell of work and the quiet, MiB",
       "≤ 8", lambda v: v <= 8)
after_quiet, warm = find("agent CPU µs for that spell"), find("agent CPU µs for the same calls")
if after_quiet and warm:
    row("agent CPU for a spell of calls right after the quiet (its code maps back in), µs", after_quiet[0],
        f"warm {warm[0]}", ratio(num(after_quiet[0]), num(warm[0])), "", None)
# The proxy resolver's table: no resolver | GNOME's (difference) | libproxy's (difference).
for prefix, measure, target, limit in (
        ("proxy resolver: start-up", "start-up, exec to the bus name, ms: no proxy resolver / GNOME's (GIO loads at the first download)", "≤ +3", 3),
        ("proxy resolver: first download", "first download, ms: no proxy resolver / GNOME's", "≤ +10", 10),
        ("proxy resolver: RSS", "RSS after the first download, MiB: no proxy resolver / GNOME's (shared libraries: GIO, dconf)", "≤ +5", 5),
        ("proxy resolver: private", "private dirty memory after the first download, MiB: no proxy resolver / GNOME's", "≤ +1", 1)):
    cells = find(prefix)
    if cells:
        none, gnome, other = num(cells[0]), num(cells[1]), num(cells[2])
        row(measure, f"{cells[0]} / {gnome}", f"libproxy's {other}", f"{gnome - none:+.1f}", target, gnome - none <= limit)
single("Visible signal lateness p99 ms", "Visible signal lateness p99, ms", "< 5", lambda v: v < 5)
single("Visible signal lateness max ms", "Visible signal lateness max, ms")
single("tasks begun+completed/s, one client, 64 in flight", "tasks begun and completed per second (64 in flight)")
single("GetManagedObjects with 1,000 live tasks", "GetManagedObjects with 1,000 live tasks, p50 round trip, ms")
cells = find("speed-up")
if cells:
    v = num(cells[0])
    row("image cache purge of 40 % of 100,000 entries, speed-up over AFNetworking's sort-on-purge", cells[0], "", "", "≥ 10x", v >= 10)
cells = find("1024 KiB")
if cells:
    row("a 1 MiB cached image: OpenImage (fd) + read over LookupImage (ay)", cells[2], f"{cells[0]} MB/s by ay", "", "", None)

def download(prefix, measure, target="", limit=None, lower_is_better=True):
    cells = find(prefix)
    if not cells:
        return
    r = cells[2] if len(cells) > 2 else ""
    met = None
    if limit is not None and num(r) is not None:
        met = num(r) <= limit if lower_is_better else num(r) >= limit
    row(measure, cells[0], f"curl {cells[1]}" if len(cells) > 1 and cells[1] else "", r, target, met)

download("FetchImage, 1,000 small images", "FetchImage: 1,000 small images (1 KiB), 4 calls in flight, per second")
download("CPU per small image, µs (ratio", "... CPU per small image, µs (the agent's; curl's marginal)", "≤ 1.5x curl", 1.5)
download("the bus daemon's CPU per small image", "... the bus daemon's CPU per small image, µs (2 messages)")
download("CPU per small image with an ETag", "... CPU per small image kept on disk too (an ETag), µs")
cells = find("instructions per small image with an ETag")
if cells:
    row("... instructions per small image kept on disk (callgrind: the loop / the disk worker)", cells[0], "", "", "", None)
download("CPU per small image by DownloadImage", "DownloadImage (the older call): CPU per small image, µs (the agent / the bus daemon)")
download("FetchImage, 20 large images", "FetchImage: 20 large images (4 MiB, kept on disk), MB/s")
download("CPU per large image, ms: the agent with its disk tier, curl to /dev/null", "... CPU per large image, ms (curl to /dev/null)")
download("CPU per large image, ms: the agent with its disk tier, curl into tmpfs", "... CPU per large image, ms (curl into tmpfs, as the memfd)", "≤ 1.5x curl", 1.5)
cells = find("a foreground app's 20 small images")
if cells and len(cells) > 2:
    row("a foreground app's 20 small images while 200 prefetched images arrive, ms: alone / with prefetch", cells[0], "", cells[2],
        "≤ 1.1x", num(cells[2]) <= 1.1 if num(cells[2]) is not None else None)
cells = find("Peer.Ping from a separate client while 3 × 40")
if cells:
    row("Peer.Ping from another client while 3 × 40 large images arrive, p99 / max ms", cells[0], "", "", "p99 < 5",
        num(cells[0]) < 5 if num(cells[0]) is not None else None)
cells = find("the same, the prober at real-time priority")
if cells:
    row("... the prober at real-time priority, p99 / max ms", cells[0], "", "", "p99 < 5",
        num(cells[0]) < 5 if num(cells[0]) is not None else None)
single("coalescing: 50 requests", "50 requests for one URL: HTTP requests made", "1", lambda v: v == 1)
single("disk-tier hit, request to DownloadFinished", "disk-tier hit, request to DownloadFinished, p50 / p99 ms")
cells = find("calls/s over")
if cells:
    row("100 clients at once: calls/s (counts, leases, tasks, cache)", cells[0])
cells = find("latency p50 / p99 / max ms (100 calls in flight)")
if cells:
    row("... latency p50 / p99 / max, ms", cells[0])
for prefix, measure in (("loop stall: a holder writing", "worst Ping: a lease holder writing into its lease, ms"),
                        ("loop stall: a 64 KiB gzip body", "worst Ping: a decompression bomb, ms"),
                        ("loop stall: 3,240 queued receipts", "worst Ping: 3,240 receipts of three apps leaving at once, ms"),
                        ("a client asks 150 times", "worst Ping: a client that never reads 150 × 1 MiB, ms"),
                        ("100 forked processes vs one Flatpak", "worst Ping: 100 forked processes against a Flatpak app, ms"),
                        ("three clients calling GetManagedObjects", "worst Ping: three clients asking for the task tree at the budget for 3 s, ms"),
                        ("... worst Ping meanwhile", "worst Ping: a small image behind 100 stalled transfers, ms")):
    cells = find(prefix)
    if cells:
        row(measure, cells[0], "", "", cells[1] if len(cells) > 1 else "",
            num(cells[0]) < 20 if num(cells[0]) is not None and "< 20" in (cells[1] if len(cells) > 1 else "") else None)
single("a first call of 64 MiB", "worst Ping: a first call of 64 MiB, ms")
cells = find("another app's small image behind 100 stalled transfers")
if cells:
    row("another app's small image behind 100 stalled transfers, wait s", cells[0], "", "", "< 1",
        num(cells[0]) < 1 if num(cells[0]) is not None else None)

# Decoded pixels: measure | netactivityd | in-process | ratio | target; the ratio is ours to theirs.
for prefix, measure, check in (
        ("ten apps × 50 images: total PSS", "ten apps showing the same 50 images: total PSS, MiB (in-process: libcurl + libjpeg-turbo)",
         lambda r, v: r <= 0.2),
        ("ten apps × 50 images: total CPU", "... total CPU, ms (apps, agent, decoders, bus daemon)", lambda r, v: r <= 0.5),
        ("decoding a 2000 × 1500 JPEG", "decoding a 2000 × 1500 JPEG one at a time, images/s (in-process: libjpeg-turbo)",
         lambda r, v: r >= 0.9),
        ("a 6000 × 4000 JPEG into a 256 px box", "a 6000 × 4000 JPEG into a 256 px box, images/s (in-process: full decode + box filter)",
         lambda r, v: r >= 2),
        ("... bytes the decoded entry holds", "... bytes its decoded entry holds", lambda r, v: v == 175104),
        ("time to pixels for a memory hit", "time to pixels for a memory hit, p50 / p99 ms", lambda r, v: v < 1),
        ("worst Ping while three apps fetch 40 photos", "worst Ping while three apps fetch 40 photos' pixels, ms",
         lambda r, v: v < 20),
        ("decoding a 2000 × 1500 AVIF", "decoding a 2000 × 1500 AVIF one at a time, images/s (in-process: libavif, dav1d)",
         lambda r, v: r >= 0.9),
        ("decoding a 2000 × 1500 JPEG XL", "decoding a 2000 × 1500 JPEG XL one at a time, images/s (in-process: libjxl)",
         lambda r, v: r >= 0.9),
        ("drawing a 2000 × 1500 SVG", "drawing a 2000 × 1500 SVG one at a time, images/s (in-process: librsvg)",
         lambda r, v: r >= 0.9),
        ("a Display P3 photo converted", "a Display P3 photo converted to sRGB, decoder CPU per image, ms (the same photo untagged)",
         lambda r, v: r <= 1.2),
        ("an animated GIF of 100 frames", "an animated GIF of 100 frames into a 256 px box: bytes held (in-process: giflib, full size)",
         None),
        ("... time to its first frame", "... time to its first frame, ms", None),
        ("... time to every frame", "... time to every frame, ms", None)):
    cells = find(prefix)
    if cells and len(cells) >= 4:
        v, r = num(cells[0]), num(cells[2])
        met = check(r, v) if check and v is not None and (r is not None or not cells[2]) else None
        reference = "untagged" if measure.startswith("a Display P3 photo") else "in-process"
        row(measure, cells[0], f"{reference} {cells[1]}" if cells[1] else "", cells[2], cells[3], met)

single("make test from a clean clone", "`make test` from a clean clone (packages installed), s", "≤ 480",
       lambda v: v <= 480)
# ... and what each of its parts took (wall / CPU, s), as they printed it.
for label, cells in rows:
    if label.startswith("make test part: ") and cells:
        row("... " + label[len("make test part: "):], cells[0])

table = "\n".join([
    f"Measured {date.group(1) if date else '?'} by `make bench` on {machine.group(1) if machine else 'this machine'};",
    "`bench/summary.py` turns its output into this table (the whole output has more rows and their method).",
    "",
    "| measure | netactivityd | reference, same run | ratio | target | met |",
    "|---|---:|---|---:|---|---|",
] + out)
if len(sys.argv) == 3 and sys.argv[1] == "--write":
    BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
    with open(sys.argv[2]) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"summary.py: {sys.argv[2]} has no {BEGIN} ... {END} block")
    head, rest = doc.split(BEGIN, 1)
    with open(sys.argv[2], "w") as f:
        f.write(head + BEGIN + "\n" + table + "\n" + END + rest.split(END, 1)[1])
print(table)
