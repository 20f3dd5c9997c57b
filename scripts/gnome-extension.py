#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Writes a GNOME Shell extension for the shells it names, from its one source: ES modules, as
GNOME Shell 45 and later load them. For 43 and 44 (`--legacy`) it writes the same code in the
older form: `imports.gi.X` and `imports.ui.X` for the `gi://` and `resource:///` imports, the
extension's own modules through `getCurrentExtension().imports`, a small `Extension` class with
what GNOME 45's base class gives (metadata, uuid, dir, gettext), `export`s as top-level `var`s and
functions, and the `init()` those shells call. An import or export it does not know is an error,
never copied through.

    gnome-extension.py SOURCE_DIR OUT_DIR [--legacy]   (with --zip FILE: also packs OUT_DIR)

metadata.json's shell-version: the source's for ES modules; 43 and 44 with --legacy."""
import argparse
import json
import os
import re
import shutil
import sys
import zipfile

LEGACY_SHELLS = ["43", "44"]

SHIM = """const ExtensionUtils = imports.misc.extensionUtils;

/** What GNOME Shell 45's Extension base class gives, for 43 and 44. */
class Extension {
    constructor(meta) {
        this.metadata = meta.metadata;
        this.uuid = meta.uuid;
        this.dir = meta.dir;
        this.path = meta.path;
        const domain = this.metadata['gettext-domain'];
        if (domain)
            ExtensionUtils.initTranslations(domain);
    }

    gettext(text) {
        return ExtensionUtils.gettext(text);
    }
}"""


def fail(path, line, why):
    sys.exit("%s: %s: %s" % (path, why, line.strip()))


def legacy_module(path, text):
    """A module of the extension's own, as a legacy script: its exports as top-level names."""
    out, exported = [], []
    for line in text.split("\n"):
        m = re.match(r"^export (const|let|var) (\w+)( = .*)$", line)
        f = re.match(r"^export function (\w+)\((.*)$", line)
        if m:
            exported.append(m.group(2))
            out.append("var %s%s" % (m.group(2), m.group(3)))
        elif f:
            exported.append(f.group(1))
            out.append("function %s(%s" % (f.group(1), f.group(2)))
        elif re.match(r"^\s*(import|export)\b", line):
            fail(path, line, "an import or export the legacy form does not know")
        else:
            out.append(line)
    return out, exported


def legacy_extension(path, text):
    """extension.js as 43 and 44 load it: imports rewritten, the default export a class that
    init() makes."""
    out, main_class = [], None
    for line in text.split("\n"):
        gi = re.match(r"^import (\w+) from 'gi://(\w+)';$", line)
        ui = re.match(r"^import \* as (\w+) from 'resource:///org/gnome/shell/ui/(\w+)\.js';$", line)
        own = re.match(r"^import \* as (\w+) from '\./(\w+)\.js';$", line)
        default = re.match(r"^export default class (\w+) extends Extension \{$", line)
        if gi:
            out.append("const %s = imports.gi.%s;" % (gi.group(1), gi.group(2)))
        elif ui:
            out.append("const %s = imports.ui.%s;" % (ui.group(1), ui.group(2)))
        elif line == "import {Extension} from 'resource:///org/gnome/shell/extensions/extension.js';":
            out.append(SHIM)
        elif own:
            out.append("const %s = ExtensionUtils.getCurrentExtension().imports.%s;" % (own.group(1), own.group(2)))
        elif default:
            main_class = default.group(1)
            out.append("class %s extends Extension {" % main_class)
        elif re.match(r"^\s*(import|export)\b", line):
            fail(path, line, "an import or export the legacy form does not know")
        else:
            out.append(line)
    if not main_class:
        sys.exit("%s: no `export default class NAME extends Extension`" % path)
    while out and out[-1] == "":
        out.pop()
    out += ["", "function init(meta) {", "    return new %s(meta);" % main_class, "}", ""]
    return out, ["init"]


def legacy(path, text):
    lines, exported = (legacy_extension if os.path.basename(path) == "extension.js" else legacy_module)(path, text)
    # After the licence line and the file's opening comment: strict mode and what it exports.
    at = 0
    while at < len(lines) and lines[at].startswith("//"):
        at += 1
    return "\n".join(lines[:at] + ["'use strict';", "/* exported %s */" % ", ".join(exported)] + lines[at:])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("out")
    parser.add_argument("--legacy", action="store_true")
    parser.add_argument("--zip")
    args = parser.parse_args()
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    for name in sorted(os.listdir(args.source)):
        src, dst = os.path.join(args.source, name), os.path.join(args.out, name)
        if os.path.isdir(src):
            shutil.copytree(src, dst)
        elif name == "metadata.json":
            with open(src) as f:
                metadata = json.load(f)
            if args.legacy:
                metadata["shell-version"] = LEGACY_SHELLS
            with open(dst, "w") as f:
                json.dump(metadata, f, indent=2, ensure_ascii=False)
                f.write("\n")
        elif name.endswith(".js") and args.legacy:
            with open(src) as f:
                text = f.read()
            with open(dst, "w") as f:
                f.write(legacy(src, text))
        else:
            shutil.copyfile(src, dst)
    if args.zip:
        # What `gnome-extensions pack` makes and extensions.gnome.org takes: the folder's files at
        # the archive's top level.
        with zipfile.ZipFile(args.zip, "w", zipfile.ZIP_DEFLATED) as z:
            for folder, _, files in sorted(os.walk(args.out)):
                for name in sorted(files):
                    full = os.path.join(folder, name)
                    z.write(full, os.path.relpath(full, args.out))


if __name__ == "__main__":
    main()
