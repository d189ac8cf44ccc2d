"""Which of the bundle's pinned wheels this Python can install. Standard library only.

constraints.txt pins the versions the app is tested with, on the newest Python of
the build machine. A pure-Python wheel may still ask for a newer patch release than
a distribution ships: soupsieve 4.1.1 needs Python >= 3.11.5, Debian 12's python3 is
3.11.2. Such a wheel is left out and its pin dropped, so pip picks the newest
version that runs here (from the index, or the --wheels folder), and the installer
says so, instead of stopping with pip's "requires a different Python".
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

_CLAUSE = re.compile(r"^\s*(~=|===|==|!=|<=|>=|<|>)\s*([0-9][0-9a-zA-Z.*+!-]*)\s*$")


@dataclass(frozen=True, kw_only=True)
class Unfit:
    name: str  # canonical project name, as in constraints.txt
    version: str
    requires_python: str


def _release(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = re.match(r"\d+", piece)
        if not digits:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def _pad(a: tuple[int, ...], n: int) -> tuple[int, ...]:
    return a + (0,) * (n - len(a))


def admits(*, requires_python: str, python: tuple[int, ...]) -> bool:
    """Whether `python` (e.g. (3, 11, 2)) satisfies a Requires-Python value; a clause
    this cannot read admits (pip, which reads them all, decides then)."""
    for clause in filter(None, (c.strip() for c in requires_python.split(","))):
        match = _CLAUSE.match(clause)
        if not match:
            continue
        op, raw = match.groups()
        wildcard = raw.endswith(".*")
        want = _release(raw[:-2] if wildcard else raw)
        if not want:
            continue
        n = max(len(want), len(python))
        have, want_p = _pad(python, n), _pad(want, n)
        if wildcard:
            same = python[: len(want)] == want
            ok = same if op == "==" else not same if op == "!=" else True
        elif op in ("==", "==="):
            ok = have == want_p
        elif op == "!=":
            ok = have != want_p
        elif op == ">=":
            ok = have >= want_p
        elif op == ">":
            ok = have > want_p
        elif op == "<=":
            ok = have <= want_p
        elif op == "<":
            ok = have < want_p
        else:  # ~=X.Y: >= X.Y and == X.*
            ok = have >= want_p and python[: len(want) - 1] == want[:-1]
        if not ok:
            return False
    return True


def wheel_requires_python(*, wheel: Path) -> str:
    try:
        with zipfile.ZipFile(wheel) as z:
            name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            text = z.read(name).decode("utf-8", "replace")
    except (OSError, StopIteration, zipfile.BadZipFile):
        return ""
    for line in text.splitlines():
        if not line.strip():
            break  # the body starts: no more headers
        key, _, value = line.partition(":")
        if key.strip().lower() == "requires-python":
            return value.strip()
    return ""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def unfit_wheels(*, wheels: list[Path], python: tuple[int, ...]) -> list[tuple[Path, Unfit]]:
    found = []
    for wheel in wheels:
        requires = wheel_requires_python(wheel=wheel)
        if requires and not admits(requires_python=requires, python=python):
            name, version = wheel.name.split("-")[:2]
            found.append(
                (wheel, Unfit(name=canonical(name), version=version, requires_python=requires))
            )
    return found


def constraints_without(*, text: str, names: set[str]) -> str:
    kept = [
        line
        for line in text.splitlines()
        if canonical(re.split(r"[=<>!~; ]", line.strip(), maxsplit=1)[0]) not in names
    ]
    return "\n".join(kept) + "\n"
