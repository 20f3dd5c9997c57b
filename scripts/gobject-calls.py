#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""gobject-calls.py: docs/gobject.md's list of every call, written from what the library declares.

    scripts/gobject-calls.py [--check] GENERATED.h

Between the page's `<!-- calls -->` and `<!-- /calls -->` lines it writes, per interface, each
D-Bus method's blocking C call as gdbus-codegen declared it (GENERATED.h, from `make lib`), with
the same call in Python and JavaScript, then the interface's properties and signals by their
GObject names; and the hand-written calls of libnetactivity/netactivity.h. --check fails when the
page differs from what it would write (make test runs it; `make gobject-calls` rewrites it)."""
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PAGE = os.path.join(ROOT, "docs", "gobject.md")
BEGIN, END = "<!-- calls -->", "<!-- /calls -->"
PROTOTYPE = re.compile(r"^([A-Za-z][\w \*]*?)\s*\b(net_activity_\w+)\s*\(([^;]*?)\);", re.M | re.S)


def snake(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def prototypes(path):
    """{function name: (return type, [parameter declarations])} of a header."""
    with open(path) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    out = {}
    for ret, name, params in PROTOTYPE.findall(text):
        out[name] = (" ".join(ret.split()), [" ".join(p.split()) for p in params.split(",") if p.strip()])
    return out


def c_line(name, ret, params):
    return "%s%s%s (%s);" % (ret, "" if ret.endswith("*") else " ", name, ", ".join(params))


def bound(name, params, obj):
    """The call as Python and GJS make it: out-parameters become the result."""
    ins, outs = [], []
    for p in params[1:]:
        word = re.sub(r"^arg_", "", p.replace("*", " ").split()[-1])
        if word == "error":
            continue
        (outs if word.startswith("out_") else ins).append(word)
    outs = [o[len("out_"):] for o in outs]
    result = (", ".join(outs) + " = ") if outs else ""
    return "%s%s.call_%s(%s)" % (result, obj, name.split("_call_", 1)[1], ", ".join(ins))


def interfaces():
    for path in sorted(glob.glob(os.path.join(ROOT, "dbus", "*.xml"))):
        for element in ET.parse(path).getroot().findall("interface"):
            yield element


def write(generated):
    declared = prototypes(generated)
    own = prototypes(os.path.join(ROOT, "libnetactivity", "netactivity.h"))
    lines = []
    for element in interfaces():
        name = element.get("name")
        short = "Agent" if name == "org.example.NetActivity" else name.rsplit(".", 1)[1]
        prefix, obj = "net_activity_%s" % snake(short), snake(short)
        lines += ["#### %s (`%s`)" % ("Net" + "Activity" + short, name), "", "```c"]
        for method in element.findall("method"):
            call = "%s_call_%s_sync" % (prefix, snake(method.get("name")))
            if call not in declared:
                sys.exit("gobject-calls: %s is not declared in %s" % (call, generated))
            ret, params = declared[call]
            args = lambda d: ", ".join("%s %s" % (a.get("type"), a.get("name")) for a in method.findall("arg")
                                       if (a.get("direction") or "in") == d)
            lines.append("/* %s (%s) -> (%s)" % (method.get("name"), args("in"), args("out")))
            lines.append("   Python, GJS: %s */" % bound(call, params, obj))
            lines.append(c_line(call, ret, params))
        lines += ["```", ""]
        props = ["`%s` (`%s` %s)" % (snake(p.get("name")).replace("_", "-"), p.get("name"), p.get("type"))
                 for p in element.findall("property")]
        signals = ["`%s` (`%s`%s)" % (snake(s.get("name")).replace("_", "-"), s.get("name"),
                                      "".join(" " + a.get("type") for a in s.findall("arg")))
                   for s in element.findall("signal")]
        if props:
            lines += ["Properties (`%s_get_NAME()`; `notify::NAME`; `proxy.props.NAME` in Python, "
                      "`proxy.NAME` in GJS): %s." % (prefix, ", ".join(props)), ""]
        if signals:
            lines += ["Signals: %s." % ", ".join(signals), ""]
    lines += ["#### The library's own calls (`netactivity.h`)", "", "```c"]
    lines += [c_line(n, r, p) for n, (r, p) in own.items()]
    lines += ["```"]
    return "\n".join(lines)


def main():
    check = "--check" in sys.argv
    generated = [a for a in sys.argv[1:] if a != "--check"][0]
    with open(PAGE) as f:
        page = f.read()
    start, end = page.index(BEGIN) + len(BEGIN), page.index(END)
    fresh = page[:start] + "\n" + write(generated) + "\n" + page[end:]
    if check:
        if fresh != page:
            sys.exit("gobject-calls: docs/gobject.md's list of calls is out of date: run make gobject-calls")
        return
    with open(PAGE, "w") as f:
        f.write(fresh)


if __name__ == "__main__":
    main()
