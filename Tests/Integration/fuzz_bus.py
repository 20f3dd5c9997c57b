#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Fuzzes the agent's whole bus surface with python3-dbus.

fuzz_bus.py ADDRESS [--seed N] [--calls N] [--seconds S] [--http URL] [--huge]

Every member of every interface in dbus/*.xml (and Properties, Introspectable, Peer, ObjectManager)
is called from two connections with: the right signature and hostile values (empty, boundary and huge
strings, unicode, random bytes and image headers, NaN and infinities, edge integers, random a{sv}
options), wrong signatures of random types (nested variants, deep containers, dicts, unix fds),
unknown members and interfaces, and random object paths, including other connections' tasks.
Invalid UTF-8 and invalid object paths cannot go on the wire (libdbus refuses them in the sender;
such calls, and those with more fds than the bus allows, are counted as refused by the sender); they are sent as byte arrays and as strings where a path
is expected. With --huge, a 60 MiB byte array and 8 MiB strings go too (the bus allows arrays up to
64 MiB).

Download URLs are only the --http server's (on 127.0.0.1) or invalid ones: a fuzzer must never reach
out to the network, so no random string starts with "http".

Every call must end with a reply or a D-Bus error; a timeout, a disconnect or the agent's name
vanishing is a failure. Every --check-every calls and at the end, with the fuzzer's connections still
open, the agent's books are checked: ActivityCount is the sum of Clients, and MemoryUsage and
ImageCount are the sum of sizes and the count of the entries behind every key the fuzzer used.
Prints one JSON line: counts by outcome, the checks, every key given to the image cache, failures
and mismatches. Exit status 0 when there were none.
"""
import argparse
import json
import os
import random
import sys
import time
import xml.etree.ElementTree as ET

import dbus
import dbus.lowlevel
import contract

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT_DIR = os.path.dirname(os.path.dirname(HERE))
NAME = contract.BUS_NAME
ROOT = contract.OBJECT_PATH
PROPS = contract.PROPERTIES
CACHE = contract.ImageCache.INTERFACE
DOWNLOADER = contract.Downloader.INTERFACE
INTERFACES = (contract.Activity, contract.Task, contract.ImageCache, contract.Downloader)
# The contract's enumerated values and dictionary keys, as the XML lists them: words the agent parses.
VALUES = sorted({v for i in INTERFACES for values in i.VALUES.values() for v in values})
KEYS = sorted({k for i in INTERFACES for keys in i.KEYS.values() for k in keys})
BAD_OUTCOMES = (contract.DBusError.NoReply, contract.DBusError.Disconnected,
                contract.DBusError.ServiceUnknown, contract.DBusError.NameHasNoOwner,
                contract.DBusError.Timeout)

STANDARD = {
    "org.freedesktop.DBus.Properties": {"Get": "ss", "GetAll": "s", "Set": "ssv"},
    "org.freedesktop.DBus.Introspectable": {"Introspect": ""},
    "org.freedesktop.DBus.Peer": {"Ping": "", "GetMachineId": ""},
    "org.freedesktop.DBus.ObjectManager": {"GetManagedObjects": ""},
}


def load_contract():
    """{interface: ({method: in-signature}, {property: (type, access)})} from dbus/*.xml."""
    out = {}
    folder = os.path.join(ROOT_DIR, "dbus")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".xml"):
            continue
        for iface in ET.parse(os.path.join(folder, name)).getroot().findall("interface"):
            methods = {m.get("name"): "".join(a.get("type") for a in m.findall("arg") if a.get("direction", "in") == "in")
                       for m in iface.findall("method")}
            props = {p.get("name"): (p.get("type"), p.get("access")) for p in iface.findall("property")}
            out[iface.get("name")] = (methods, props)
    return out


def split_signature(sig):
    """The complete types of a signature."""
    types, i = [], 0
    while i < len(sig):
        j = end_of_type(sig, i)
        types.append(sig[i:j])
        i = j
    return types


def end_of_type(sig, i):
    c = sig[i]
    if c == "a":
        return end_of_type(sig, i + 1)
    if c in "({":
        close = ")" if c == "(" else "}"
        j = i + 1
        while sig[j] != close:
            j = end_of_type(sig, j)
        return j + 1
    return i + 1


class Fuzzer:
    def __init__(self, address, seed, http, huge):
        self.rng = random.Random(seed)
        self.address = address
        self.http = http
        self.huge = huge
        self.contract = load_contract()
        self.conns = [dbus.bus.BusConnection(address), dbus.bus.BusConnection(address)]
        self.tasks = []          # task paths seen in replies
        self.leases = []         # fds held (closed at random and at the end)
        self.identifiers = set()  # every identifier given to AddImage (or LookupImage keys)
        self.requests = set()     # every (url, additional) given to AddImageForRequest or DownloadImage
        self.outcomes = {}
        self.failures = []
        self.refused_by_sender = 0
        self.calls = 0
        self.huge_sent = 0
        self.fds = 0  # fds in the message being built: the bus drops a sender of more than 16
        self.book_checks = []
        self.mismatches = []

    # MARK: values

    def string(self):
        r = self.rng.random()
        if r < 0.15:
            return ""
        if r < 0.35:
            return "".join(self.rng.choice("abcXYZ019 /._-:=") for _ in range(self.rng.randrange(1, 40)))
        if r < 0.5:
            return self.rng.choice(["é", "😀", "\u202e", "\ufeff", "a\u0301", "日本語", "\U0010FFFF", "\u00a0"]) * self.rng.randrange(1, 50)
        if r < 0.6:
            return "x" * self.rng.choice([1023, 1024, 1025, 4095, 4096, 4097, 70000])
        if r < 0.7:
            return self.rng.choice(VALUES + KEYS + [contract.Activity.Visible, contract.Activity.Clients,
                                                    contract.Activity.INTERFACE, contract.Task.INTERFACE])
        if r < 0.8:
            return self.rng.choice(["ftp://127.0.0.1/a.png", "file:///etc/passwd", "://", "xhttp://a", "javascript:1",
                                    "data:image/png;base64,AAAA", contract.OBJECT_PATH, "../../etc"])
        if r < 0.85 and self.huge and self.huge_sent < 4:
            self.huge_sent += 1
            return "h" * (8 << 20)
        s = "".join(chr(self.rng.randrange(32, 0x2FFF)) for _ in range(self.rng.randrange(1, 20)))
        return "x" + s if s.lower().startswith("http") else s

    def url(self):
        if self.http and self.rng.random() < 0.6:
            path = self.rng.choice(["/img/f%d.png" % self.rng.randrange(8), "/text", "/missing.png", "/slow.png", "/big.png"])
            return self.http + path
        return self.rng.choice(["", "ftp://127.0.0.1/x.png", "http://", "http:// spaces.png", "https://", "http://[::1",
                                "notaurl", "http://127.0.0.1:1/" + "x" * 5000, "HTTP://", "gopher://127.0.0.1/"])

    def path(self):
        r = self.rng.random()
        if r < 0.4 and self.tasks:
            return self.rng.choice(self.tasks)
        if r < 0.7:
            return ROOT + "/tasks/%d" % self.rng.randrange(0, 100000)
        return self.rng.choice(["/", "/org", ROOT.rsplit("/", 1)[0], ROOT, ROOT + "/tasks", "/a/b/c", "/_", "/org/freedesktop/DBus"])

    def image_bytes(self):
        r = self.rng.random()
        png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR" + self.rng.randrange(1, 5000).to_bytes(4, "big") + \
            self.rng.randrange(1, 5000).to_bytes(4, "big") + b"\x08\x06\x00\x00\x00\x00\x00\x00\x00"
        if r < 0.3:
            return png + bytes(self.rng.randrange(0, 200000))
        if r < 0.4:
            return b"<svg xmlns='http://www.w3.org/2000/svg'/>"
        if r < 0.5:
            return b"GIF89a" + bytes(self.rng.randrange(0, 20))
        if r < 0.55 and self.huge and self.huge_sent < 4:
            self.huge_sent += 1
            return png + bytes(60 << 20)
        if r < 0.7:
            return b"\xff\xfe\xfd" + bytes(self.rng.getrandbits(8) for _ in range(self.rng.randrange(0, 64)))  # invalid UTF-8 too
        return bytes(self.rng.getrandbits(8) for _ in range(self.rng.randrange(0, 300)))

    def integer(self, code):
        bits, signed = {"y": (8, False), "n": (16, True), "q": (16, False), "i": (32, True), "u": (32, False),
                        "x": (64, True), "t": (64, False)}[code]
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        return self.rng.choice([lo, hi, 0, 1, min(hi, 2), min(hi, 60), min(hi, 1024), min(hi, 1 << 40),
                                self.rng.randint(lo, hi)])

    def random_type(self, depth=0):
        basics = "ybnqiuxtdsogh"
        if depth > 3 or self.rng.random() < 0.6:
            return self.rng.choice(basics + "v")
        kind = self.rng.random()
        if kind < 0.4:
            return "a" + self.random_type(depth + 1)
        if kind < 0.7:
            return "a{" + self.rng.choice("sutyb") + self.random_type(depth + 1) + "}"
        return "(" + "".join(self.random_type(depth + 1) for _ in range(self.rng.randrange(1, 4))) + ")"

    def value(self, t, depth=0, hint=None):
        """A python-dbus value of type t (typed, so that it can also sit in a variant)."""
        c = t[0]
        if c in "ynqiuxt":
            cls = {"y": dbus.Byte, "n": dbus.Int16, "q": dbus.UInt16, "i": dbus.Int32, "u": dbus.UInt32,
                   "x": dbus.Int64, "t": dbus.UInt64}[c]
            return cls(self.integer(c))
        if c == "b":
            return dbus.Boolean(self.rng.random() < 0.5)
        if c == "d":
            return dbus.Double(self.rng.choice([0.0, -1.0, 0.17, 1.0, 60.0, 61.0, 1e308, -1e308, float("inf"),
                                                float("-inf"), float("nan"), self.rng.uniform(-100, 100)]))
        if c == "s":
            return dbus.String(self.url() if hint == "url" else self.string())
        if c == "o":
            return dbus.ObjectPath(self.path())
        if c == "g":
            return dbus.Signature(self.rng.choice(["", "s", "a{sv}", "(ii)", "v", "aay"]))
        if c == "h":
            self.fds += 1
            fd = os.open("/dev/null", os.O_RDONLY)
            try:
                return dbus.types.UnixFd(fd)
            finally:
                os.close(fd)
        if c == "v":
            if depth > 40:
                return dbus.String("deep", variant_level=1)
            if self.rng.random() < 0.3:  # variants in variants, up to ~60 deep
                inner = self.value("v", depth + 1)
                if isinstance(inner, dbus.types.UnixFd):
                    return inner
                if isinstance(inner, (dbus.Array, dbus.Dictionary, dbus.Struct)):
                    return type(inner)(inner, signature=inner.signature, variant_level=inner.variant_level + 1)
                return type(inner)(inner, variant_level=inner.variant_level + 1)
            return self.in_variant(self.value(self.random_type(2), depth + 1))
        if t == "ay":
            return dbus.ByteArray(self.image_bytes())
        if c == "a" and t[1] == "{":
            kt, vt = split_signature(t[2:-1])
            n = self.rng.randrange(0, 6)
            if kt == "s" and vt == "v":
                keys = [self.rng.choice(KEYS + ["bogus", ""]) for _ in range(n)]
                return dbus.Dictionary({k: self.value("v", depth + 1) for k in keys}, signature=kt + vt)
            return dbus.Dictionary({self.value(kt, depth + 1): self.value(vt, depth + 1) for _ in range(n)}, signature=kt + vt)
        if c == "a":
            elem = t[1:]
            n = self.rng.choice([0, 1, 3, 10]) if depth < 6 else 0
            return dbus.Array([self.value(elem, depth + 1) for _ in range(n)], signature=elem)
        if c == "(":
            inner = split_signature(t[1:-1])
            return dbus.Struct([self.value(x, depth + 1) for x in inner], signature=t[1:-1])
        raise ValueError(t)

    def in_variant(self, v):
        """v marked as sitting in one variant (a variant of a variant when it already is one)."""
        if isinstance(v, dbus.types.UnixFd):
            return v  # python-dbus wraps it when the signature says v
        if isinstance(v, (dbus.Array, dbus.Dictionary, dbus.Struct, dbus.ByteArray)):
            return self.container_in_variant(v)
        return type(v)(v, variant_level=1)

    def container_in_variant(self, v):
        if isinstance(v, dbus.ByteArray):
            return dbus.ByteArray(bytes(v), variant_level=1)
        if isinstance(v, dbus.Dictionary):
            return dbus.Dictionary(v, signature=v.signature, variant_level=1)
        if isinstance(v, dbus.Struct):
            return dbus.Struct(v, signature=v.signature, variant_level=1)
        return dbus.Array(v, signature=v.signature, variant_level=1)

    def deep(self):
        """A type nested as far as the wire allows (32 arrays or structs), or one past it."""
        n = self.rng.choice([8, 31, 32, 33])
        if self.rng.random() < 0.5:
            sig = "a" * n + "y"
            v = dbus.ByteArray(b"x")
            for k in range(n - 1):
                v = dbus.Array([v], signature="a" * (k + 1) + "y")
            return sig, v
        sig = "(" * n + "i" + ")" * n
        v = dbus.Int32(1)
        for k in range(n):
            v = dbus.Struct([v], signature="(" * k + "i" + ")" * k)
        return sig, v

    # MARK: calls

    def args_for(self, iface, member, sig):
        """Arguments with the right signature, with hostile values, and some plausible ones."""
        types = split_signature(sig)
        args = []
        for i, t in enumerate(types):
            hint = "url" if (member == "DownloadImage" and i == 0) or (member.endswith("ForRequest") and i == 0) else None
            args.append(self.value(t, hint=hint))
        if member == "Set" and iface == "org.freedesktop.DBus.Properties" and self.rng.random() < 0.7:
            target = self.rng.choice([i for i in self.contract if self.contract[i][1]])
            prop = self.rng.choice(list(self.contract[target][1]))
            ptype = self.contract[target][1][prop][0]
            args = [dbus.String(target), dbus.String(prop), self.value(ptype if self.rng.random() < 0.7 else self.random_type())]
            if not getattr(args[2], "variant_level", 0):
                args[2] = self.in_variant(args[2])
        elif member in ("Get", "GetAll") and self.rng.random() < 0.7:
            target = self.rng.choice(list(self.contract) + ["org.freedesktop.DBus.Peer", "bogus.Iface"])
            names = list(self.contract.get(target, ({}, {}))[1]) or ["Nope"]
            args = [dbus.String(target)] + ([dbus.String(self.rng.choice(names + ["Nope", ""]))] if member == "Get" else [])
        return args

    def one(self):
        self.fds = 0
        conn = self.rng.choice(self.conns)
        r = self.rng.random()
        ifaces = list(self.contract) + list(STANDARD)
        iface = self.rng.choice(ifaces)
        methods = self.contract[iface][0] if iface in self.contract else STANDARD[iface]
        if not methods:
            iface = contract.Activity.INTERFACE
            methods = self.contract[iface][0]
        member = self.rng.choice(sorted(methods))
        if member == "RemoveAllImages" and self.rng.random() < 0.9:
            member = "AddImage"  # else the cache is empty at the end too often for its books to be checked
        sig = methods[member]
        path = ROOT
        if iface == contract.Task.INTERFACE or r < 0.1:
            path = self.path()
        if r < 0.6:
            args = self.args_for(iface, member, sig)
            sig_sent = sig
        elif r < 0.8:
            sig_sent = "".join(self.random_type() for _ in range(self.rng.randrange(0, 4)))
            args = [self.value(t) for t in split_signature(sig_sent)]
        elif r < 0.85:
            sig_sent, value = self.deep()
            args = [value]
        elif r < 0.9:
            member = self.rng.choice(["Nope", "incrementactivitycount", "X" * 255, "_"])
            sig_sent, args = "", []
        elif r < 0.95:
            iface = self.rng.choice(["org.example.Nope", contract.Task.INTERFACE + "2", "a.b"])
            sig_sent, args = "", []
        else:
            # Invalid object paths and invalid UTF-8 can only travel as strings and bytes.
            sig_sent = self.rng.choice(["s", "ay", "sv"])
            bad = self.rng.choice(["not/a/path", "//", "/trailing/", "/bad-char", ""])
            args = [dbus.String(bad)] if sig_sent == "s" else [dbus.ByteArray(b"\xc3\x28\xa0\xa1" + bad.encode())] \
                if sig_sent == "ay" else [dbus.String(bad), dbus.ByteArray(b"\xff", variant_level=1)]
        self.call(conn, path, iface, member, sig_sent, args)

    def call(self, conn, path, iface, member, sig, args):
        if self.fds > 16:
            # dbus-daemon closes the connection of a sender of more fds than it allows per message
            # (16 on the session bus): that is the bus's rule, not the agent's, so stay within it.
            self.refused_by_sender += 1
            return
        try:
            msg = dbus.lowlevel.MethodCallMessage(NAME, path, iface, member)
            if args:
                msg.append(*args, signature=sig)
        except (TypeError, ValueError, OverflowError, dbus.exceptions.DBusException) as e:
            self.refused_by_sender += 1
            return
        self.calls += 1
        try:
            reply = conn.send_message_with_reply_and_block(msg, 20.0)
            outcome = "reply"
            self.remember(iface, member, args, reply)
        except dbus.exceptions.DBusException as e:
            outcome = e.get_dbus_name() or "unnamed error"
            if outcome in BAD_OUTCOMES:
                self.failures.append({"call": "%s %s.%s(%s)" % (path, iface, member, sig), "error": outcome,
                                      "message": str(e)[:300], "args": repr(args)[:300]})
                if outcome == contract.DBusError.Disconnected:
                    self.conns = [c for c in self.conns if c is not conn] + [dbus.bus.BusConnection(self.address)]
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if member in ("AddImage", "AddImageFromFd", "LookupImage", "OpenImage", "RemoveImage") and args and \
                isinstance(args[0], dbus.String):
            self.identifiers.add(str(args[0]))
        if member in ("AddImageForRequest", "AddImageFromFdForRequest", "LookupImageForRequest", "OpenImageForRequest") \
                and len(args) > 1 and \
                isinstance(args[0], dbus.String) and isinstance(args[1], dbus.String):
            self.requests.add((str(args[0]), str(args[1])))
        if member == "DownloadImage" and args and isinstance(args[0], dbus.String):
            extra = args[1].get("additional-identifier", "") if len(args) > 1 and isinstance(args[1], dbus.Dictionary) else ""
            self.requests.add((str(args[0]), str(extra) if isinstance(extra, dbus.String) else ""))

    def remember(self, iface, member, args, reply):
        values = reply.get_args_list()
        if member == "BeginTask" and values:
            self.tasks.append(str(values[0]))
        elif member == "BeginActivity" and values:
            fd = values[0].take()
            self.leases.append(fd)
            if len(self.leases) > 20 or self.rng.random() < 0.3:
                os.close(self.leases.pop(self.rng.randrange(len(self.leases))))

    def check_books(self):
        """Invariants with the fuzzer's connections still open: ActivityCount is the sum of
        Clients, and (while no download can land) MemoryUsage and ImageCount are the sum and count
        of the entries behind every key the fuzzer used."""
        conn = self.conns[0]
        props = conn.get_object(NAME, ROOT, introspect=False).GetAll(contract.Activity.INTERFACE, dbus_interface=PROPS)
        count, total = int(props["ActivityCount"]), sum(int(c[2]) for c in props["Clients"])
        if count != total:
            self.mismatches.append({"activity_count": count, "clients_sum": total})
        deadline = time.monotonic() + 10
        while True:  # no new download can start while the fuzzer waits: let the running ones land
            dl = conn.get_object(NAME, ROOT, introspect=False).GetAll(DOWNLOADER, dbus_interface=PROPS)
            if not int(dl["ActiveDownloads"]) and not int(dl["QueuedDownloads"]):
                break
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        cache = conn.get_object(NAME, ROOT, introspect=False)
        before = cache.GetAll(CACHE, dbus_interface=PROPS)
        keys = {(i, "") for i in self.identifiers} | self.requests
        size = found = 0
        # A URL's key may hold two entries: the fuzzer's own (which it sees first) and the one the
        # downloader stored (docs/security.md, "Whose images"). Each is counted, then removed, until none is
        # left: the check empties what it counted.
        for url, extra in keys:
            for _ in range(3):
                try:  # the fd path: LookupImage carries at most 1 MiB
                    fd, n = cache.OpenImageForRequest(url, extra, dbus_interface=CACHE)
                except dbus.exceptions.DBusException:
                    break
                os.close(fd.take())
                size, found = size + int(n), found + 1
                if not cache.RemoveImageForRequest(url, extra, dbus_interface=CACHE):
                    break
        usage, images = int(before["MemoryUsage"]), int(before["ImageCount"])
        self.book_checks.append({"memory_usage": usage, "image_count": images})
        if (size, found) != (usage, images):
            self.mismatches.append({"memory_usage": usage, "image_count": images, "sum_of_entries": size, "entries": found})

    def close(self):
        for fd in self.leases:
            os.close(fd)
        self.leases = []
        for c in self.conns:
            c.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("address")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--http", default="")
    p.add_argument("--huge", action="store_true")
    p.add_argument("--check-every", type=int, default=500, help="calls between checks of the agent's books")
    a = p.parse_args()
    f = Fuzzer(a.address, a.seed, a.http, a.huge)
    deadline = time.monotonic() + a.seconds
    started = time.monotonic()
    while f.calls < a.calls and time.monotonic() < deadline:
        f.one()
        if f.calls % a.check_every == 0:
            f.check_books()
    f.check_books()
    elapsed = time.monotonic() - started
    f.close()
    print(json.dumps({"calls": f.calls, "seconds": round(elapsed, 2), "refused_by_sender": f.refused_by_sender,
                      "outcomes": f.outcomes, "failures": f.failures, "tasks": len(f.tasks),
                      "book_checks": f.book_checks, "mismatches": f.mismatches,
                      "identifiers": sorted(f.identifiers), "requests": sorted(f.requests)}))
    sys.exit(1 if f.failures or f.mismatches else 0)


if __name__ == "__main__":
    main()
