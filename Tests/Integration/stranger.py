#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""One app, driven by a test line by line: stranger.py ADDRESS reads JSON commands from stdin, one
per line, runs each on its own bus connection and prints one JSON line per command, {"ok": value}
or {"error": [name, message]}. It keeps everything it was given (leases, tasks) until stdin
closes. Commands: ["tasks", N], ["leases", N, REASON?], ["reasons"], ["download", URL], ["set", IFACE, PROP, SIG, VALUE],
["add-url", URL, HEX], ["lookup-url", URL], ["open-url", URL], ["open-pixels", ID] (OpenPixels: width, height, pixels in hex), ["pixel-boxes", ID, N] (OpenPixels at N boxes), ["fetch-pixel-boxes", URL, N] (FetchPixels at N boxes), ["open-pixels-async", [ID...]] (sent, not waited for), ["tree-readers", N] (N connections that read the tree), ["fetch-async", [URL...]], ["fetch-pixels", [URL...]] (FetchPixels' sources), ["add", ID, HEX], ["usage-by-app"],
["remove-all"], ["fetch", URL, {OPTION: [SIGNATURE, VALUE]}] (FetchImage: the bytes in hex and the source), ["remove-images", PREFIX],
["task", DESCRIPTION, {OPTION: [SIGNATURE, VALUE]}] (BeginTask: the path), ["managed"] (the task paths and descriptions
GetManagedObjects lists), ["get", PATH, IFACE, PROP], ["task-call", PATH,
METHOD, SIGNATURE, ARGS], ["ping"]."""
import json
import os
import sys

import dbus

import contract

NAME, PATH = contract.BUS_NAME, contract.OBJECT_PATH
conn = dbus.bus.BusConnection(sys.argv[1])
obj = conn.get_object(NAME, PATH, introspect=False)
agent = dbus.Interface(obj, contract.Activity.INTERFACE)
cache = dbus.Interface(obj, contract.ImageCache.INTERFACE)
downloader = dbus.Interface(obj, contract.Downloader.INTERFACE)
held = []
VARIANT = {"b": dbus.Boolean, "u": dbus.UInt32, "t": dbus.UInt64, "d": dbus.Double, "s": dbus.String}


def send_async(interface, member, firsts):
    """`member(first, {})` for each of `firsts`, sent at once; the answers are not waited for."""
    for first in firsts:
        msg = dbus.lowlevel.MethodCallMessage(NAME, PATH, interface, member)
        msg.append(first, dbus.Dictionary({}, signature="sv"), signature="sa{sv}")
        conn.send_message(msg)
    conn.flush()
    return len(firsts)


def run(cmd, *args):
    if cmd == "tasks":
        n = 0
        try:
            for _ in range(args[0]):
                held.append(agent.BeginTask("stranger", dbus.Dictionary({}, signature="sv")))
                n += 1
        except dbus.exceptions.DBusException as e:
            return {"granted": n, "refusal": [e.get_dbus_name(), e.get_dbus_message()]}
        return {"granted": n, "refusal": None}
    if cmd == "leases":
        n = 0
        try:
            for _ in range(args[0]):
                held.append(agent.BeginActivity(args[1] if len(args) > 1 else "stranger").take())
                n += 1
        except dbus.exceptions.DBusException as e:
            return {"granted": n, "refusal": [e.get_dbus_name(), e.get_dbus_message()]}
        return {"granted": n, "refusal": None}
    if cmd == "download":
        return [str(v) for v in downloader.DownloadImage(args[0], dbus.Dictionary({}, signature="sv"))]
    if cmd == "set":
        iface, prop, sig, value = args
        obj.Set(iface, prop, VARIANT[sig](value, variant_level=1), dbus_interface=contract.PROPERTIES)
        return True
    if cmd == "add-url":
        cache.AddImageForRequest(args[0], "", dbus.ByteArray(bytes.fromhex(args[1])))
        return True
    if cmd == "add":
        cache.AddImage(args[0], dbus.ByteArray(bytes.fromhex(args[1])))
        return True
    if cmd == "lookup-url":
        found, data = cache.LookupImageForRequest(args[0], "", byte_arrays=True)
        return bytes(data).hex() if found else None
    if cmd == "open-pixels":
        fd, info = cache.OpenPixels(args[0], dbus.Dictionary({}, signature="sv"))
        fd = fd.take()
        try:
            width, height, stride = (int(info[k]) for k in (contract.ImageCache.OPEN_PIXELS_INFO_WIDTH,
                                                            contract.ImageCache.OPEN_PIXELS_INFO_HEIGHT,
                                                            contract.ImageCache.OPEN_PIXELS_INFO_STRIDE))
            return [width, height, os.pread(fd, stride * height, 0).hex()]
        finally:
            os.close(fd)
    if cmd == "fetch-pixels":
        # FetchPixels of each URL in turn: the sources of their answers
        sources = []
        for url in args[0]:
            fd, info = downloader.FetchPixels(url, dbus.Dictionary({}, signature="sv"), timeout=60)
            os.close(fd.take())
            sources.append(str(info[contract.Downloader.FETCH_PIXELS_INFO_SOURCE]))
        return sources
    if cmd == "fetch-async":
        # FetchImage of each URL, sent at once without waiting for the answers
        return send_async(contract.Downloader.INTERFACE, contract.Downloader.FetchImage, args[0])
    if cmd == "tree-readers":
        # N more connections, each reading the object tree as a panel does, kept open
        for _ in range(args[0]):
            reader = dbus.bus.BusConnection(sys.argv[1])
            reader.get_object(NAME, PATH, introspect=False).GetManagedObjects(dbus_interface=contract.OBJECT_MANAGER)
            held.append(reader)
        return args[0]
    if cmd == "open-pixels-async":
        # OpenPixels of each ID, sent at once without waiting for the answers
        return send_async(contract.ImageCache.INTERFACE, contract.ImageCache.OpenPixels, args[0])
    if cmd in ("pixel-boxes", "fetch-pixel-boxes"):
        # OpenPixels of one image (FetchPixels of one URL) at boxes 1..N wide:
        # {"ok": answered, "errors": {name: count}}
        answered, errors = 0, {}
        for width in range(1, args[1] + 1):
            try:
                if cmd == "pixel-boxes":
                    options = {contract.ImageCache.OPEN_PIXELS_OPTION_MAX_WIDTH: dbus.UInt32(width)}
                    fd = cache.OpenPixels(args[0], dbus.Dictionary(options, signature="sv"))[0]
                else:
                    options = {contract.Downloader.FETCH_PIXELS_OPTION_MAX_WIDTH: dbus.UInt32(width)}
                    fd = downloader.FetchPixels(args[0], dbus.Dictionary(options, signature="sv"), timeout=60)[0]
                os.close(fd.take())
                answered += 1
            except dbus.exceptions.DBusException as e:
                errors[e.get_dbus_name()] = errors.get(e.get_dbus_name(), 0) + 1
        return {"ok": answered, "errors": errors}
    if cmd == "lookup":
        found, data = cache.LookupImage(args[0], byte_arrays=True)
        return bytes(data).hex() if found else None
    if cmd == "open-url":
        fd, size = cache.OpenImageForRequest(args[0], "")
        fd = fd.take()
        try:
            return os.pread(fd, size, 0).hex()
        finally:
            os.close(fd)
    if cmd == "fetch":
        options = dbus.Dictionary({k: VARIANT[sig](v) for k, (sig, v) in (args[1] if len(args) > 1 else {}).items()}, signature="sv")
        fd, size, info = downloader.FetchImage(args[0], options, timeout=60)
        fd = fd.take()
        try:
            return [os.pread(fd, size, 0).hex(), str(info[contract.Downloader.FETCH_IMAGE_INFO_SOURCE])]
        finally:
            os.close(fd)
    if cmd == "remove-images":
        return int(downloader.RemoveImages(args[0]))
    if cmd == "usage-by-app":
        return {str(k): int(v) for k, v in obj.Get(contract.ImageCache.INTERFACE, contract.ImageCache.MemoryUsageByApp,
                                                   dbus_interface=contract.PROPERTIES).items()}
    if cmd == "accounts":
        return [[str(r[0]), str(r[1])] + [int(v) for v in r[2:]] for r in agent.get_dbus_method(contract.Activity.Accounts)(args[0])]
    if cmd == "reasons":
        return {str(k): [str(r) for r in v] for k, v in obj.Get(contract.Activity.INTERFACE, contract.Activity.Reasons,
                                                                dbus_interface=contract.PROPERTIES).items()}
    if cmd == "remove-all":
        return bool(cache.RemoveAllImages())
    if cmd == "task":
        options = dbus.Dictionary({k: VARIANT[sig](v) for k, (sig, v) in (args[1] if len(args) > 1 else {}).items()}, signature="sv")
        path = agent.BeginTask(args[0], options)
        held.append(path)
        return str(path)
    if cmd == "request":
        task = dbus.Interface(conn.get_object(NAME, args[0], introspect=False), contract.Task.INTERFACE)
        return task.RequestCancel() if args[1] == "cancel" else task.RequestSuspend(dbus.Boolean(args[2]))
    if cmd == "task-call":  # PATH, METHOD, SIGNATURE, ARGS: any Task method
        return repr(conn.call_blocking(NAME, args[0], contract.Task.INTERFACE, args[1], args[2], args[3]))
    if cmd == "managed":
        managed = obj.GetManagedObjects(dbus_interface=contract.OBJECT_MANAGER)
        return {str(p): str(i[contract.Task.INTERFACE][contract.Task.Description]) for p, i in managed.items()
                if contract.Task.INTERFACE in i}
    if cmd == "get":
        return str(conn.get_object(NAME, args[0], introspect=False).Get(args[1], args[2], dbus_interface=contract.PROPERTIES))
    if cmd == "ping":
        return conn.get_unique_name()
    raise ValueError(cmd)


for line in sys.stdin:
    command = json.loads(line)
    try:
        out = {"ok": run(*command)}
    except dbus.exceptions.DBusException as e:
        out = {"error": [e.get_dbus_name(), e.get_dbus_message()]}
    print(json.dumps(out), flush=True)
for fd in held:
    if isinstance(fd, int):
        os.close(fd)
