#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Writes the contract's names from dbus/*.xml (the one source), for Python and for Swift: the bus
name and paths; per interface its name, methods (in and out signatures), properties (type,
access) and signals; and the tables the XML gives as org.example.NetActivity.* annotations: the
error names, the values of enumerated properties, and the keys (with types) of a{sv} arguments
and dictionary properties. The Python tests and panel scripts, the agent, the client library and
the CLI take names from these files, so a name typed wrong fails at import or compile time, and a
change of the XML shows as a diff of the generated files.

    scripts/gen-contract.py [--python OUT.py] [--swift OUT.swift] [--c-errors OUT.h]
        (make contract; a test checks that the committed ones are current)

The C header (libnetactivity's GError domain) keeps the numbers the existing OUT.h gave: an error
name keeps its number forever, and a new one takes the next.
"""
import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NOTE = "org.example.NetActivity."


# --- reading the XML -------------------------------------------------------------------------------

def notes(element):
    """The element's own org.example.NetActivity.* annotations: {short name: value}."""
    return {a.get("name")[len(NOTE):]: a.get("value") for a in element.findall("annotation")
            if a.get("name", "").startswith(NOTE)}


def pairs(value):
    out = {}
    for item in value.split():
        key, _, sig = item.partition(":")
        if not sig:
            sys.exit("gen-contract: key %r has no :type" % item)
        out[key] = sig
    return out


class Interface:
    def __init__(self, element, bus):
        self.name = element.get("name")
        self.short = "Activity" if self.name == bus else self.name[len(bus) + 1:].replace(".", "")
        self.methods = {}
        self.properties = {}
        self.signals = {}
        self.arguments = {}  # member -> ([(name, type)] in, [(name, type)] out); a signal's are "in"
        self.emits = {}      # property -> org.freedesktop.DBus.Property.EmitsChangedSignal ("true" unless said)
        self.values = {}   # enum name -> (doc, [values])
        self.keys = {}     # enum name -> (doc, {key: type}, is an option table)
        own = notes(element)
        for k, v in own.items():
            if k.startswith("Values."):
                name = k[len("Values."):]
                self.values[name] = ("`%s`: the values several members take." % name, v.split())
        self.errors = own.get("Errors", "").split()
        self.standard_errors = own.get("StandardErrors", "").split()
        for m in element.findall("method"):
            args = m.findall("arg")
            self.methods[m.get("name")] = ("".join(a.get("type") for a in args if a.get("direction") != "out"),
                                           "".join(a.get("type") for a in args if a.get("direction") == "out"))
            self.arguments[m.get("name")] = ([(a.get("name"), a.get("type")) for a in args if a.get("direction") != "out"],
                                             [(a.get("name"), a.get("type")) for a in args if a.get("direction") == "out"])
            for a in args:
                self.read_keys(notes(a), m.get("name"), a.get("name"), a.get("direction") != "out")
        for p in element.findall("property"):
            self.properties[p.get("name")] = (p.get("type"), p.get("access"))
            self.emits[p.get("name")] = next((a.get("value") for a in p.findall("annotation")
                                              if a.get("name") == "org.freedesktop.DBus.Property.EmitsChangedSignal"), "true")
            n = notes(p)
            if "Values" in n:
                self.values[p.get("name")] = ("`%s`'s values." % p.get("name"), n["Values"].split())
            self.read_keys(n, None, p.get("name"), False)
        for s in element.findall("signal"):
            self.signals[s.get("name")] = "".join(a.get("type") for a in s.findall("arg"))
            self.arguments[s.get("name")] = ([(a.get("name"), a.get("type")) for a in s.findall("arg")], [])

    def read_keys(self, n, method, name, is_input):
        if "Keys" not in n:
            return
        if method and is_input:
            enum = method + "Option"
            doc = "`%s`'s `%s` keys (a{sv}) and their D-Bus types." % (method, name)
        elif method:
            enum = method + upper_camel(name)
            doc = "The keys of `%s`'s `%s` and their D-Bus types." % (method, name)
        else:
            enum = name + "Key"
            doc = "The keys of `%s` and their D-Bus types." % name
        self.keys[enum] = (doc, pairs(n["Keys"]), bool(method and is_input))
        for k, v in n.items():
            if k.startswith("Values."):
                key = k[len("Values."):]
                self.values[(method or name) + upper_camel(key)] = (
                    "The values of `%s`'s `%s` key `%s`." % (method or name, name, key), v.split())


def read_contract():
    files = sorted(f for f in os.listdir(os.path.join(ROOT, "dbus")) if f.endswith(".xml"))
    elements, served, version = [], None, None
    for fn in files:
        with open(os.path.join(ROOT, "dbus", fn)) as f:
            text = f.read()
        m = re.search(r"Served by netactivityd at (/\S+) on the bus name (\S+?)\.\s", text)
        if m:
            served = m.groups()
        v = re.search(r"<!-- Version: (\d+)\.", text)
        if v and version is None:
            version = int(v.group(1))
        elements += ET.fromstring(text).findall("interface")
    if not served or version is None:
        sys.exit("gen-contract: dbus/*.xml must say 'Served by netactivityd at PATH on the bus name NAME.' and '<!-- Version: N.'")
    path, bus = served
    interfaces = sorted((Interface(e, bus) for e in elements), key=lambda i: i.name)
    own, standard = [], []
    for i in interfaces:
        for e in i.errors + i.standard_errors:
            target = own if e.startswith(bus + ".Error.") else standard
            if e not in target:
                target.append(e)
    return bus, path, version, interfaces, own, standard


# --- names -----------------------------------------------------------------------------------------

def words(name):
    """'desktop-id' -> ['desktop', 'id']; 'InvalidURL' -> ['Invalid', 'URL']; 'HTTP' -> ['HTTP']."""
    out = []
    for part in re.split(r"[-_. ]", name):
        out += re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", part)
    return out


ACRONYMS = {"id": "ID", "url": "URL", "urls": "URLs", "http": "HTTP", "uri": "URI"}


def upper_camel(name):
    return "".join(ACRONYMS.get(w.lower(), w[:1].upper() + w[1:]) for w in words(name))


def lower_camel(name):
    if name.upper() == name and "_" in name:  # SCREAMING_CASE (B8G8R8A8_PREMULTIPLIED): its words
        w = [x.lower() for x in name.split("_") if x]
        return w[0] + "".join(x[:1].upper() + x[1:] for x in w[1:])
    w = words(name)
    first = w[0].lower()
    return first + "".join(ACRONYMS.get(x.lower(), x[:1].upper() + x[1:]) for x in w[1:])


def snake(name):
    if name.upper() == name and "_" in name:  # SCREAMING_CASE already
        return name
    return "_".join(w.upper() for w in words(name))


def last(name):
    return name.rsplit(".", 1)[1]


# --- Python ----------------------------------------------------------------------------------------

def py_table(name, comment, entries):
    if not entries:
        return ["    %s = {}" % name]
    return ["    # %s" % comment, "    %s = {" % name] + ["        %r: %r," % kv for kv in entries.items()] + ["    }"]


def python(bus, path, version, interfaces, own, standard):
    lines = [
        "# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later",
        '"""The contract\'s names, generated from dbus/*.xml by scripts/gen-contract.py (make contract).',
        'Do not edit: a test fails when this differs from what the XML makes."""',
        "",
        "BUS_NAME = %r" % bus,
        "OBJECT_PATH = %r" % path,
        "TASK_PATH_PREFIX = %r" % (path + "/tasks/"),
        "ERROR_PREFIX = %r" % (bus + ".Error."),
        "VERSION = %d" % version,
        "PROPERTIES = 'org.freedesktop.DBus.Properties'",
        "OBJECT_MANAGER = 'org.freedesktop.DBus.ObjectManager'",
        "",
        "",
        "class Error:",
        '    """The agent\'s own error names."""',
    ] + ["    %s = %r" % (last(e), e) for e in own] + [
        "",
        "",
        "class DBusError:",
        '    """The standard error names the contract answers with (org.freedesktop.DBus.Error.*)."""',
    ] + ["    %s = %r" % (last(e), e) for e in standard]
    for i in interfaces:
        lines += ["", "", "class %s:" % i.short, '    """%s"""' % i.name, "    INTERFACE = %r" % i.name]
        lines += py_table("METHODS", "name: (in signature, out signature)", i.methods)
        lines += py_table("PROPERTIES", "name: (type, access)", i.properties)
        lines += py_table("SIGNALS", "name: signature", i.signals)
        lines += ["    ERRORS = %r" % (tuple(i.errors),)]
        lines += py_table("VALUES", "enumerated strings: every value", {k: tuple(v) for k, (_, v) in i.values.items()})
        lines += py_table("KEYS", "dictionaries and a{sv} arguments: key: type", {k: t for k, (_, t, _) in i.keys.items()})
        for member in sorted(set(i.methods) | set(i.properties) | set(i.signals)):
            lines.append("    %s = %r" % (member, member))
        for enum, (_, values) in i.values.items():
            for v in values:
                lines.append("    %s_%s = %r" % (snake(enum), snake(v), v))
        for enum, (_, keys, _) in i.keys.items():
            for k in keys:
                lines.append("    %s_%s = %r" % (snake(enum), snake(k), k))
    return "\n".join(lines) + "\n"


# --- Swift -----------------------------------------------------------------------------------------

def swift_cases(names, raw=lambda n: n, name=lower_camel):
    out = []
    for n in names:
        case = name(n)
        out.append("        case %s = %s" % (case, swift_string(raw(n))) if case != raw(n) else "        case %s" % case)
    return out


def swift_string(s):
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')


def swift_enum(doc, name, conformances, cases, extra=(), first=False):
    lines = ([] if first else [""]) + ["    /// %s" % doc, "    public enum %s: %s {" % (name, conformances)] + cases
    return lines + list(extra) + ["    }"]


def swift_switch(name, type, by_value, single=None):
    """`public var NAME: TYPE`, a switch over the cases grouped by value (`by_value`: {value: [case]});
    one value for every case is the value alone."""
    if single is not None:
        return ["", "        public var %s: %s { %s }" % (name, type, single)]
    out = ["", "        public var %s: %s {" % (name, type), "            switch self {"]
    for value, cases in by_value.items():
        head = "            case %s:" % ", ".join("." + lower_camel(c) for c in cases)
        if len(head) + 1 + len(value) <= 120:
            out.append("%s %s" % (head, value))
        else:
            out += [head, "                " + value]
    return out + ["            }", "        }"]


def swift_arguments(i, members, name, side):
    """A member's arguments as the XML declares them."""
    by_value = {}
    for m in members:
        args = i.arguments[m][side]
        value = "[%s]" % ", ".join(".init(%s, %s)" % (swift_string(n), swift_string(t)) for n, t in args)
        by_value.setdefault(value, []).append(m)
    return swift_switch(name, "[ContractArgument]", by_value, "[]" if list(by_value) == ["[]"] else None)


def swift_properties(i):
    types, writable, emits = {}, [], {}
    for p, (t, access) in i.properties.items():
        types.setdefault(swift_string(t), []).append(p)
        if access == "readwrite":
            writable.append(p)
        emits.setdefault("." + lower_camel(i.emits[p]), []).append(p)
    out = swift_switch("signature", "String", types, next(iter(types)) if len(types) == 1 else None)
    if not writable or len(writable) == len(i.properties):
        out += swift_switch("isWritable", "Bool", {}, "true" if writable else "false")
    else:
        rest = [p for p in i.properties if p not in writable]
        out += swift_switch("isWritable", "Bool", {"true": writable, "false": rest})
    return out + swift_switch("emitsChanged", "ContractEmitsChanged", emits, next(iter(emits)) if len(emits) == 1 else None)


def swift(bus, path, version, interfaces, own, standard):
    lines = [
        "// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later",
        "// Generated from dbus/*.xml by scripts/gen-contract.py (make contract). Do not edit: a test",
        "// fails when this differs from what the XML makes. Hand-written additions are in Contract.swift.",
        "",
        "/// The names of the contract (`dbus/*.xml`, docs/behaviour.md). The agent, the client",
        "/// library, the CLI and the bench take every bus name, path, interface, member, property,",
        "/// enumerated value, option key and error name of ours from here.",
        "public enum NetActivityBus {",
        "    /// The well-known name the agent owns on the session bus.",
        "    public static let name = %s" % swift_string(bus),
        "    /// The agent's object; also an `org.freedesktop.DBus.ObjectManager` for the task objects.",
        "    public static let objectPath = %s" % swift_string(path),
        "    /// Task objects are this prefix plus a number.",
        "    public static let taskPathPrefix = %s" % swift_string(path + "/tasks/"),
        "    /// The `Version` property of every interface. A breaking change is a new interface name.",
        "    public static let version: UInt32 = %d" % version,
        "}",
        "",
        "/// The interfaces the agent serves.",
        "public enum NetActivityInterface: String, Sendable, CaseIterable {",
    ] + ["    case %s = %s" % (lower_camel(i.short), swift_string(i.name)) for i in interfaces] + ["}"]
    for i in interfaces:
        lines += ["", "/// `%s`." % i.name, "public enum %sMember: ContractInterface {" % i.short,
                  "    public static let interface = NetActivityInterface.%s" % lower_camel(i.short), ""]
        lines += swift_enum("Its methods.", "Method", "String, Sendable, CaseIterable, ContractMethod",
                            swift_cases(i.methods), swift_arguments(i, i.methods, "inArguments", 0) +
                            swift_arguments(i, i.methods, "outArguments", 1), first=True)
        lines += swift_enum("Its properties.", "Property", "String, Sendable, CaseIterable, ContractProperty",
                            swift_cases(i.properties), swift_properties(i))
        if i.signals:
            lines += swift_enum("Its signals.", "Signal", "String, Sendable, CaseIterable, ContractSignal",
                                swift_cases(i.signals), swift_arguments(i, i.signals, "arguments", 0))
            lines += ["", "    public static var signals: [any ContractSignal] { Signal.allCases }"]
        else:
            lines += ["", "    public static var signals: [any ContractSignal] { [] }"]
        first_with = {}  # values -> the first enum that has them: a later one is that type
        for enum, (doc, values) in i.values.items():
            same = first_with.setdefault(tuple(values), enum)
            if same != enum:
                lines += ["", "    /// " + doc + " The same as `%s`'s." % same,
                          "    public typealias %s = %s" % (enum, same)]
                continue
            lines += swift_enum(doc, enum, "String, Sendable, CaseIterable", swift_cases(values))
        for enum, (doc, keys, is_option) in i.keys.items():
            by_type = {}
            for k, t in keys.items():
                by_type.setdefault(t, []).append("." + lower_camel(k))
            signature = ["", "        public var signature: String {", "            switch self {"] + [
                "            case %s: %s" % (", ".join(cs), swift_string(t)) for t, cs in by_type.items()
            ] + ["            }", "        }"]
            lines += swift_enum(doc, enum, "String, Sendable, %s" % ("MethodOption" if is_option else "DictionaryKey"),
                                swift_cases(keys), signature)
        lines += ["}"]
    taken = {lower_camel(last(e)) for e in own}
    standard_case = lambda e: ("bus" + last(e)) if lower_camel(last(e)) in taken else lower_camel(last(e))
    lines += [
        "",
        "extension NetActivityError {",
        "    /// Every error name of the contract: the agent's own, then the standard ones it, libdbus and",
        "    /// the bus answer with.",
        "    public enum Name: String, Sendable, CaseIterable {",
        "        // %s.Error.*" % bus,
    ] + swift_cases(own, name=lambda e: lower_camel(last(e))) + [
        "        // org.freedesktop.DBus.Error.*",
    ] + swift_cases(standard, name=standard_case) + ["    }", "}"]
    return "\n".join(lines) + "\n"


# --- C (libnetactivity's error domain) ----------------------------------------------------------

def c_errors(bus, path, version, interfaces, own, standard, numbered=()):
    """The agent's own error names as a GError domain; `numbered`: the names in their old order."""
    names = list(numbered) + [e for e in own if e not in numbered]
    gone = [e for e in numbered if e not in own]
    if gone:
        sys.exit("gen-contract: %s left the XML; an error name, once numbered, stays" % ", ".join(gone))
    const = lambda e: "NET_ACTIVITY_ERROR_" + snake(last(e))
    lines = [
        "// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later",
        "/* The agent's own errors as a GError domain, generated from the contract (dbus/ XML) by",
        " * scripts/gen-contract.py (make contract). Do not edit: a test fails when this differs from what",
        " * the XML makes. A name keeps its number; a new one takes the next. */",
        "#ifndef NET_ACTIVITY_ERRORS_H",
        "#define NET_ACTIVITY_ERRORS_H",
        "",
        "#include <gio/gio.h>",
        "",
        "G_BEGIN_DECLS",
        "",
        "/**",
        " * NetActivityError:",
    ] + [" * @%s: `%s`" % (const(e), e) for e in names] + [
        " * @NET_ACTIVITY_ERROR_AGENT_NOT_RUNNING: no agent on the session bus: the bus answered",
        " *   `org.freedesktop.DBus.Error.ServiceUnknown` or `NameHasNoOwner`. The library's own code, never",
        " *   sent by the agent, numbered apart so that the agent's codes can grow. Wait for the agent (a",
        " *   proxy's `notify::g-name-owner`) and call again.",
        " *",
        " * The agent's own errors (`%s.Error.*`), in the %%NET_ACTIVITY_ERROR domain. The standard" % bus,
        " * D-Bus errors it answers with (`org.freedesktop.DBus.Error.InvalidArgs`, `AccessDenied`...) come",
        " * in the %G_DBUS_ERROR domain, as GDBus maps them. Either way the message is the agent's own,",
        " * without GDBus's `GDBus.Error:NAME: ` prefix.",
        " */",
        "typedef enum {",
    ] + ["    %s = %d," % (const(e), n) for n, e in enumerate(names)] + [
        "    NET_ACTIVITY_ERROR_AGENT_NOT_RUNNING = 1000,",
        "} NetActivityError;",
        "",
        "/**",
        " * NET_ACTIVITY_ERROR:",
        " *",
        " * The error domain of #NetActivityError.",
        " */",
        "#define NET_ACTIVITY_ERROR (net_activity_error_quark ())",
        "GQuark net_activity_error_quark (void);",
        "",
        "/* Each number's D-Bus name, for g_dbus_error_register_error_domain(). */",
        "#define NET_ACTIVITY_ERROR_ENTRIES { \\",
    ] + ["    { %s, \"%s\" }, \\" % (const(e), e) for e in names] + [
        "}",
        "",
        "G_END_DECLS",
        "",
        "#endif",
    ]
    return "\n".join(lines) + "\n"


def numbered_errors(path):
    """The error names an existing header numbered, in their order."""
    try:
        with open(path) as f:
            return re.findall(r'\{ NET_ACTIVITY_ERROR_\w+, "([^"]+)" \}', f.read())
    except OSError:
        return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python")
    parser.add_argument("--swift")
    parser.add_argument("--c-errors")
    args = parser.parse_args()
    contract = read_contract()
    for out, make in ((args.python, python), (args.swift, swift)):
        if out:
            with open(out, "w") as f:
                f.write(make(*contract))
    if args.c_errors:
        text = c_errors(*contract, numbered=numbered_errors(args.c_errors))
        with open(args.c_errors, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
