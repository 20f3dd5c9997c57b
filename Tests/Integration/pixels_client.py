#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""A FetchPixels client in a process of its own, for make soak: asks for every URL's pixels one after
another (every other one fit to a 2 px box), maps each reply and reads it, and prints one JSON line
at the end: {"pixels": N, "errors": {NAME: COUNT}}.

pixels_client.py ADDRESS URL..."""
import json
import mmap
import os
import sys

import dbus

import contract

bus = dbus.bus.BusConnection(sys.argv[1])
downloader = dbus.Interface(bus.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False),
                            contract.Downloader.INTERFACE)
D = contract.Downloader
got, errors = 0, {}
for i, url in enumerate(sys.argv[2:]):
    options = {D.FETCH_PIXELS_OPTION_MAX_WIDTH: dbus.UInt32(2)} if i % 2 else {}
    try:
        fd, info = downloader.FetchPixels(url, dbus.Dictionary(options, signature="sv"), timeout=60)
        fd = fd.take()
        try:
            size = int(info[D.FETCH_PIXELS_INFO_STRIDE]) * int(info[D.FETCH_PIXELS_INFO_HEIGHT])
            with mmap.mmap(fd, size, prot=mmap.PROT_READ) as pixels:
                sum(pixels[::4096])
        finally:
            os.close(fd)
        got += 1
    except dbus.exceptions.DBusException as e:
        errors[e.get_dbus_name()] = errors.get(e.get_dbus_name(), 0) + 1
print(json.dumps({"pixels": got, "errors": errors}), flush=True)
