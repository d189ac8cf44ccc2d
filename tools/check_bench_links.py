"""Check every markdown link into docs/benchmarks.md and docs/benchmarks-history.md.

Each `[text](…benchmarks.md#anchor)` or `[text](…benchmarks-history.md#anchor)` in the
repository's markdown files, and each `[text](#anchor)` inside those two files, must name a
heading of the target file by its GitHub anchor (lowercase; punctuation other than
hyphens, underscores and spaces dropped; each space a hyphen; a repeated anchor gets -1,
-2, …). A link to the file with no anchor must name a file that exists; an empty link
`[text]()` is reported too. Exit status 1 when any link is broken.

    python tools/check_bench_links.py
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("benchmarks.md", "benchmarks-history.md")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]*)\)")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"#{1,6} (.*)", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def main() -> int:
    cache: dict[Path, set[str]] = {}
    broken = checked = 0
    files = [p for p in ROOT.rglob("*.md") if ".venv" not in p.parts and ".git" not in p.parts]
    for md in sorted(files):
        text = md.read_text(encoding="utf-8")
        for lineno, line in enumerate(text.splitlines(), 1):
            for m in LINK.finditer(line):
                href = m.group(1)
                path_part, _, anchor = href.partition("#")
                if path_part == "" and md.name in TARGETS and md.parent.name == "docs":
                    target = md
                elif path_part.endswith(TARGETS):
                    target = (md.parent / path_part).resolve()
                else:
                    continue
                checked += 1
                where = f"{md.relative_to(ROOT)}:{lineno}"
                if href == "":
                    print(f"{where}: empty link")
                    broken += 1
                    continue
                if not target.exists():
                    print(f"{where}: no file {path_part}")
                    broken += 1
                    continue
                if anchor:
                    names = cache.setdefault(target, anchors(target))
                    if anchor not in names:
                        print(f"{where}: no heading #{anchor} in {target.relative_to(ROOT)}")
                        broken += 1
    print(f"{checked} links checked, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
