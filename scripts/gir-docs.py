#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""gir-docs.py: what gdbus-codegen leaves undocumented in libnetactivity-1's GIR, documented.

    scripts/gir-docs.py NetActivity-1.0.gir

gdbus-codegen documents every call, property and signal, but not the virtual methods of its
interfaces' tables (a D-Bus method's handler, a property's getter, a signal's class handler: what
a service implementing the interface fills in, never a client), nor the class structure of a type
written by hand; and its text links with DocBook's <link linkend=...>, which gi-docgen prints as
it is. This rewrites the GIR in place: a sentence for each of those, said from the names, and the
DocBook links as plain names. It fails when a public symbol is still without a description, which
gi-docgen would show as "No description available"."""
import re
import sys
import xml.etree.ElementTree as ET

CORE = "http://www.gtk.org/introspection/core/1.0"
NS = {"": CORE, "c": "http://www.gtk.org/introspection/c/1.0", "glib": "http://www.gtk.org/introspection/glib/1.0"}
for prefix, uri in NS.items():
    ET.register_namespace(prefix, uri)
Q = lambda tag: "{%s}%s" % (CORE, tag)
# The elements gi-docgen gives a page or an entry of its own.
DOCUMENTED = ("class", "interface", "record", "enumeration", "bitfield", "function", "method", "constructor",
              "virtual-method", "property", "{%s}signal" % NS["glib"], "constant", "callback", "member")


PARTS = {"object": "the object", "invocation": "the call, to answer", "fd_list": "the descriptors the call carried",
         Q("return-value"): "%TRUE when the handler answered the call (or will)"}


def camel(snake):
    return "".join(part.capitalize() for part in snake.split("_"))


def says(owner, vfunc, types):
    """A virtual method's sentence, from its name and its interface's members."""
    name, c_type = vfunc.get("name"), owner.get("{%s}type" % NS["c"])
    if name.startswith("handle_"):
        method = name[len("handle_"):]
        return ("The handler of the `%s` D-Bus method, for a service that implements the interface: a client "
                "calls %s_call_%s() instead." % (camel(method), snake_prefix(owner), method))
    if name.startswith("get_") and name[4:].replace("_", "-") in types["property"]:
        prop = name[4:].replace("_", "-")
        return ("The getter of the `%s` D-Bus property, for a service that implements the interface: a client "
                "reads the #%s:%s property." % (camel(name[4:]), c_type, prop))
    if name.replace("_", "-") in types["signal"]:
        return ("The class handler of the #%s::%s signal (the `%s` D-Bus signal); a client connects to the "
                "signal." % (c_type, name.replace("_", "-"), camel(name)))
    sys.exit("gir-docs: no sentence for %s's virtual method %s" % (c_type, name))


def snake_prefix(owner):
    return "net_activity_" + re.sub(r"(?<!^)(?=[A-Z])", "_", owner.get("name")).lower()


def add_doc(element, text):
    # gi-docgen wants every doc's place; these are said here, of the generated header's types.
    doc = ET.Element(Q("doc"), {"xml:space": "preserve", "filename": "scripts/gir-docs.py", "line": "1"})
    doc.text = text
    element.insert(0, doc)


def main(path):
    tree = ET.parse(path)
    namespace = tree.getroot().find(Q("namespace"))
    for doc in namespace.iter(Q("doc")):
        # DocBook links (<link linkend="...">name</link>, escaped in the text) as the name alone.
        doc.text = re.sub(r"<link linkend=\"[^\"]*\">(.*?)</link>", r"\1", doc.text or "")
    for owner in namespace:
        if owner.tag != Q("interface") and owner.tag != Q("class"):
            continue
        types = {"property": {p.get("name") for p in owner.findall(Q("property"))},
                 "signal": {s.get("name") for s in owner.findall("{%s}signal" % NS["glib"])}}
        for vfunc in owner.findall(Q("virtual-method")):
            if vfunc.find(Q("doc")) is None:
                add_doc(vfunc, says(owner, vfunc, types))
            for part in vfunc.iter():
                if part.tag in (Q("parameter"), Q("instance-parameter"), Q("return-value")) \
                        and part.find(Q("doc")) is None:
                    name = part.get("name") or ""
                    add_doc(part, "the `%s` argument" % camel(name[4:]) if name.startswith("arg_") else
                            "the property's value" if part.tag == Q("return-value") and vfunc.get("name")
                            .startswith("get_") else PARTS.get(name) or PARTS[part.tag])
    for record in namespace.findall(Q("record")):
        struct_for = record.get("{%s}is-gtype-struct-for" % NS["glib"])
        if not struct_for:
            continue
        if record.find(Q("doc")) is None:
            add_doc(record, "The class structure of #NetActivity%s: nothing an app uses." % struct_for)
        owner = next(e for e in namespace if e.get("name") == struct_for)
        for field in record.findall(Q("field")):
            if field.find(Q("doc")) is not None:
                continue
            vfunc = next((v for v in owner.findall(Q("virtual-method")) if v.get("name") == field.get("name")), None)
            add_doc(field, vfunc.find(Q("doc")).text if vfunc is not None else "the parent type's structure")
    bare = []
    # The namespace's symbols and their members (a record's fields are shown on its page, not each).
    for element in [e for top in namespace for e in [top, *top]]:
        tag = element.tag.replace("{%s}" % CORE, "")
        if (tag in DOCUMENTED or element.tag in DOCUMENTED) and element.find(Q("doc")) is None \
                and element.get("introspectable") != "0" and not element.get("name", "").endswith("Private"):
            bare.append("%s %s" % (tag.split("}")[-1], element.get("name")))
    if bare:
        sys.exit("gir-docs: no description for %s" % ", ".join(bare))
    tree.write(path, encoding="unicode", xml_declaration=True)
    with open(path, "a") as f:
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
