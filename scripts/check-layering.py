#!/usr/bin/env python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Checks that no module imports against the direction drawn in docs/architecture.md ("Modules").

Its block between `<!-- layering:begin -->` and `<!-- layering:end -->` lists, for every
module under Sources/, the modules of ours it may import. Every `import` of one of our modules in
a module's Swift files must be listed there, and every module must be listed. The map of the
agent's rooms in the same document must name every source file of NetActivityAgent (`Name.swift`
and `Name+Bus.swift` as Name). Exit 1 on a breach.
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
doc = (root / "docs" / "architecture.md").read_text()
match = re.search(r"<!-- layering:begin -->(.*?)<!-- layering:end -->", doc, re.S)
if not match:
    sys.exit("check-layering: docs/architecture.md has no layering block")

allowed = {}
for line in match.group(1).splitlines():
    line = line.strip()
    if not line or line.startswith(("```", "#")):
        continue
    name, _, deps = line.partition(":")
    allowed[name.strip()] = {d for d in deps.split() if d != "-"}

modules = {}
for d in sorted((root / "Sources").iterdir()):
    if d.is_dir():
        modules[d.name] = d
# The example apps are packages of their own under Examples/, each with its targets in Sources/.
for d in sorted((root / "Examples").glob("*/Sources/*")):
    if d.is_dir():
        modules[d.name] = d

import_re = re.compile(r"^\s*(?:@_exported\s+)?(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+([A-Za-z0-9_]+)", re.M)
problems = []
for name, path in modules.items():
    if name not in allowed:
        problems.append(f"{name}: not drawn in docs/architecture.md")
        continue
    for source in sorted(path.rglob("*.swift")):
        for imported in import_re.findall(source.read_text()):
            if imported in modules and imported not in allowed[name]:
                problems.append(f"{source.relative_to(root)}: {name} imports {imported}, against the direction drawn in docs/architecture.md")
for name in allowed:
    if name not in modules:
        problems.append(f"docs/architecture.md draws {name}, which is not a module under Sources/ or Examples/*/Sources/")

for source in sorted((root / "Sources" / "NetActivityAgent").glob("*.swift")):
    # A service's `+Bus` file is the service's; an extension of another module's type is its own.
    room = source.stem.removesuffix("+Bus")
    if not re.search(r"\b" + re.escape(room) + r"\b", doc):
        problems.append(f"{source.relative_to(root)}: the room {room} is not in docs/architecture.md's map of the agent")

if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"check-layering: {len(modules)} modules import only in the direction docs/architecture.md draws")
