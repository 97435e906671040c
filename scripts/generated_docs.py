#!/usr/bin/env python3
"""The docs' tables that come from the code: the settings of
docs/configuration.md and the C API's status codes of docs/c-api.md.

Each page holds its table between two markers,
    <!-- BEGIN mccl-docgen KIND -->
    <!-- END mccl-docgen KIND -->
and `mccl-docgen KIND` (tools/docgen, built with the library) prints it.

    python3 scripts/generated_docs.py --write [--docgen build/tools/mccl-docgen]
        rewrites the tables after a change to the settings or status codes;
    python3 scripts/generated_docs.py --check [--docgen ...]
        exits 1, showing the difference, when a page and the code disagree
        (the ctest test docs_generated_tables).
"""
import argparse
import difflib
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = {"settings": "docs/configuration.md", "errors": "docs/c-api.md"}


def splice(text, kind, table, page):
    pattern = re.compile(
        r"(<!-- BEGIN mccl-docgen %s -->\n)(.*?)(<!-- END mccl-docgen %s -->)" % (kind, kind), re.S)
    if not pattern.search(text):
        sys.exit(f"generated_docs: {page} has no <!-- BEGIN/END mccl-docgen {kind} --> markers")
    return pattern.sub(lambda m: m.group(1) + table + m.group(3), text, count=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="fail when a page differs from the code")
    mode.add_argument("--write", action="store_true", help="rewrite the tables in the pages")
    ap.add_argument("--docgen", default=os.path.join(ROOT, "build", "tools", "mccl-docgen"),
                    help="the mccl-docgen binary (default: build/tools/mccl-docgen)")
    ap.add_argument("--root", default=ROOT, help="the checkout whose docs/ to use")
    args = ap.parse_args()
    if not os.access(args.docgen, os.X_OK):
        sys.exit(f"generated_docs: {args.docgen} is missing: build the mccl-docgen target first")
    stale = []
    for kind, page in PAGES.items():
        table = subprocess.run([args.docgen, kind], check=True, capture_output=True, text=True).stdout
        path = os.path.join(args.root, page)
        with open(path, encoding="utf-8") as f:
            old = f.read()
        new = splice(old, kind, table, page)
        if new == old:
            continue
        if args.write:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            print(f"generated_docs: rewrote the {kind} table of {page}")
        else:
            stale.append(page)
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), new.splitlines(True), page, f"{page} (from mccl-docgen {kind})"))
    if stale:
        print(f"\ngenerated_docs: {', '.join(stale)} differ from the code; run\n"
              f"  python3 scripts/generated_docs.py --write --docgen {args.docgen}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
