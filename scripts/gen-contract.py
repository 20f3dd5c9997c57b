#!/usr/bin/python3
"""Writes the contract's names as a Python module, from dbus/*.xml (the one source): the bus name
and paths, and per interface its name, methods (in and out signatures), properties (type, access)
and signals. The Python tests and panel scripts take names from it, so a name typed wrong fails at
import or attribute access, and a change of the XML shows as a diff of the module.

    scripts/gen-contract.py OUT.py     (make contract; a test checks that the committed one is current)
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def class_name(interface, root):
    if interface == root:
        return "Activity"
    return interface[len(root) + 1:].replace(".", "")


def table(name, comment, entries):
    if not entries:
        return ["    %s = {}" % name]
    return ["    # %s" % comment, "    %s = {" % name] + ["        %r: %r," % kv for kv in entries.items()] + ["    }"]


def main(out):
    files = sorted(f for f in os.listdir(os.path.join(ROOT, "dbus")) if f.endswith(".xml"))
    interfaces = []
    served = None
    for fn in files:
        with open(os.path.join(ROOT, "dbus", fn)) as f:
            text = f.read()
        m = re.search(r"Served by netactivityd at (/\S+) on the bus name (\S+?)\.\s", text)
        if m:
            served = m.groups()
        interfaces += ET.fromstring(text).findall("interface")
    if not served:
        sys.exit("gen-contract: no 'Served by netactivityd at PATH on the bus name NAME.' in dbus/*.xml")
    path, bus = served
    lines = [
        '"""The contract\'s names, generated from dbus/*.xml by scripts/gen-contract.py (make contract).',
        'Do not edit: a test fails when this differs from what the XML makes."""',
        "",
        "BUS_NAME = %r" % bus,
        "OBJECT_PATH = %r" % path,
        "TASK_PATH_PREFIX = %r" % (path + "/tasks/"),
        "ERROR_PREFIX = %r" % (bus + ".Error."),
        "PROPERTIES = 'org.freedesktop.DBus.Properties'",
        "OBJECT_MANAGER = 'org.freedesktop.DBus.ObjectManager'",
    ]
    for i in sorted(interfaces, key=lambda i: i.get("name")):
        name = i.get("name")
        lines += ["", "", "class %s:" % class_name(name, bus), '    """%s"""' % name, "    INTERFACE = %r" % name]
        methods = {m.get("name"): ("".join(a.get("type") for a in m.findall("arg") if a.get("direction") != "out"),
                                   "".join(a.get("type") for a in m.findall("arg") if a.get("direction") == "out"))
                   for m in i.findall("method")}
        props = {p.get("name"): (p.get("type"), p.get("access")) for p in i.findall("property")}
        signals = {s.get("name"): "".join(a.get("type") for a in s.findall("arg")) for s in i.findall("signal")}
        lines += table("METHODS", "name: (in signature, out signature)", methods)
        lines += table("PROPERTIES", "name: (type, access)", props)
        lines += table("SIGNALS", "name: signature", signals)
        for member in sorted(set(methods) | set(props) | set(signals)):
            lines.append("    %s = %r" % (member, member))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
