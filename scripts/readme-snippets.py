#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Writes every Swift block of README.md and of docs/*.md into Examples/netactivity-example/Sources/
ReadmeSnippets/Snippets.swift, where `make test` compiles it (Swift 6 language mode, strict concurrency) beside
the example app: a snippet that stops compiling fails the build. What the snippets leave to the app
(its views, its data) is declared in Stubs.swift beside it.

Each block becomes a main-actor function named after its place among the blocks (code that runs), or stays at the top
level (a block that declares a type); its imports go to the top of the file. The Package.swift
fragment (a block that starts with `.package(`) is not Swift of an app and is left out.

Usage: readme-snippets.py [--check]   (--check: exit 1 if the file is not what the docs make)
Either way, a doc whose code fences do not pair up is an error."""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
OUT = os.path.join(ROOT, "Examples", "netactivity-example", "Sources", "ReadmeSnippets", "Snippets.swift")
DECLARATION = re.compile(r"^(@MainActor|(final )?class |struct |enum |extension |actor )")


def blocks(text):
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```swift":
            start = i + 1
            j = start
            while lines[j].strip() != "```":
                j += 1
            yield start, lines[start:j]
            i = j
        i += 1


def generate():
    imports, parts = set(), []
    for doc in DOCS:
        with open(os.path.join(ROOT, doc)) as f:
            text = f.read()
        for _, body in blocks(text):
            code = [l for l in body if l.strip()]
            if not code or code[0].lstrip().startswith(".package("):
                continue
            kept = []
            for l in body:
                m = re.match(r"^import (\w+)", l)
                if m:
                    imports.add(m.group(1))
                else:
                    kept.append(l)
            n = len(parts) + 1
            if DECLARATION.match(code[0]):
                parts.append("// %s, Swift block %d\n%s\n" % (doc, n, "\n".join(kept).strip("\n")))
            else:
                inner = "\n".join(("    " + l) if l.strip() else "" for l in kept).strip("\n")
                parts.append("// %s, Swift block %d\n@MainActor\nfunc docsBlock%d() async throws {\n%s\n}\n" % (doc, n, n, inner))
    head = ("// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later\n"
            "// Generated from README.md and docs/*.md by scripts/readme-snippets.py (make readme-snippets): do not edit.\n"
            "// Compiled, never run: what the snippets leave to the app is in Stubs.swift.\n")
    return head + "".join("import %s\n" % m for m in sorted(imports)) + "\n" + "\n".join(parts)


def unclosed_fences():
    """Every doc whose code fences do not pair up (one left open swallows the page after it), with
    the line of the last fence."""
    problems = []
    for doc in DOCS:
        with open(os.path.join(ROOT, doc)) as f:
            fences = [n for n, line in enumerate(f, 1) if line.lstrip().startswith("```")]
        if len(fences) % 2:
            problems.append("%s:%d: a code fence is not closed (or one too many)" % (doc, fences[-1]))
    return problems


def main():
    problems = unclosed_fences()
    if problems:
        sys.exit("\n".join(problems))
    text = generate()
    if "--check" in sys.argv:
        with open(OUT) as f:
            if f.read() != text:
                sys.exit("%s is not what README.md and docs/ make: run `make readme-snippets`" % os.path.relpath(OUT, ROOT))
        return
    with open(OUT, "w") as f:
        f.write(text)


main()
