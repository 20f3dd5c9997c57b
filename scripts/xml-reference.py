#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""The D-Bus reference of the contract, as Markdown, from dbus/*.xml's own comments: each interface,
then its methods, signals and properties with their signatures, what the comment before each says,
and each argument's @name line. libnetactivity-1's API reference (make lib-docs) includes it, beside
the C API that gi-docgen makes from the GIR.

    scripts/xml-reference.py OUT.md
"""
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def comments_before(text):
    """{element name: (body, {arg: doc})} from the comments that start with `Name:`."""
    docs = {}
    for m in re.finditer(r"<!--((?:(?!<!--).)*?)-->\s*<(method|signal|property) name=\"([^\"]+)\"", text, re.S):
        lines = [l.strip() for l in m.group(1).strip("\n").split("\n")]
        first = re.match(r"([A-Za-z, ]+):\s*(.*)", lines[0]) if lines else None
        if not first or m.group(3) not in [n.strip() for n in first.group(1).split(",")]:
            continue
        args, body = {}, [first.group(2)] if first.group(2) else []
        for line in lines[1:]:
            a = re.match(r"@(\w+): (.*)", line)
            if a and not body:
                args[a.group(1)] = a.group(2)
            else:
                body.append(line)
        paragraphs = re.split(r"\n\s*\n", "\n".join(body).strip())
        docs[(m.group(2), m.group(3))] = ("\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip()), args)
    return docs


def keys(element):
    """'; keys: `a` s, `b` u' from the element's org.example.NetActivity.Keys, if it has it."""
    for note in element.findall("annotation"):
        if note.get("name") == "org.example.NetActivity.Keys":
            pairs = [k.split(":") for k in note.get("value").split()]
            return "; keys: " + ", ".join("`%s` %s" % (k, t) for k, t in pairs)
    return ""


def escape(s):
    return s.replace("<", "&lt;").replace(">", "&gt;")


def main():
    out = ["Title: The D-Bus interfaces", "",
           "# The D-Bus interfaces", "",
           "The agent's interfaces as its contract (`dbus/*.xml`) documents them; each method is a call of the",
           "generated proxy (`net_activity_agent_call_begin_activity()` for `BeginActivity`, and so on).", ""]
    for path in sorted(glob.glob(os.path.join(ROOT, "dbus", "*.xml"))):
        with open(path) as f:
            text = f.read()
        docs = comments_before(text)
        for iface in ET.fromstring(text).findall("interface"):
            out += ["## %s" % iface.get("name"), ""]
            for kind, title in (("method", "Methods"), ("signal", "Signals"), ("property", "Properties")):
                elements = iface.findall(kind)
                if not elements:
                    continue
                out += ["### %s" % title, ""]
                for e in elements:
                    name = e.get("name")
                    body, args = docs.get((kind, name), ("", {}))
                    if kind == "property":
                        out += ["#### %s `%s` (%s)" % (name, e.get("type"), e.get("access")), ""]
                    else:
                        sig = ", ".join("%s%s %s" % ((a.get("direction", "in") + " ") if kind == "method" else "",
                                                     a.get("name"), a.get("type")) for a in e.findall("arg"))
                        out += ["#### %s" % name, "", "    %s (%s)" % (name, sig), ""]
                    for a in e.findall("arg"):
                        if a.get("name") in args:
                            out.append("- `%s`: %s%s" % (a.get("name"), escape(args[a.get("name")]), keys(a)))
                    if args:
                        out.append("")
                    elif keys(e):
                        out += ["Keys:%s" % keys(e)[1:], ""]
                    if body:
                        out += [escape(body), ""]
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
