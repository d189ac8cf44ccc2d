"""What uninstalling removes, decided before anything is deleted.

The program goes (its environment, desktop entries, icons, actions, login start);
the person's documents never do. The index and the app's other stored state go
only when asked (`remove_index`), and a folder that holds a watched folder or the
home folder itself is never removed, whatever the settings say.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from engine.paths import Paths


@dataclass(frozen=True, kw_only=True)
class UninstallPlan:
    remove: tuple[Path, ...]  # folders deleted with everything in them
    keep: tuple[Path, ...]  # the app's folders left in place
    refused: tuple[tuple[Path, str], ...]  # folders that would have gone, and why not


def state_dirs(*, paths: Paths) -> tuple[Path, ...]:
    """Every folder the app writes, outermost first, without duplicates or nesting."""
    ordered: list[Path] = []
    for folder in (paths.data, paths.config, paths.cache, paths.logs, paths.runtime):
        folder = folder.resolve()
        if any(folder == o or folder.is_relative_to(o) for o in ordered):
            continue
        ordered = [o for o in ordered if not o.is_relative_to(folder)] + [folder]
    return tuple(ordered)


def plan_uninstall(
    *, paths: Paths, remove_index: bool, program_dir: Path | None, watched: list[Path], home: Path
) -> UninstallPlan:
    candidates = ([program_dir.resolve()] if program_dir else []) + (
        list(state_dirs(paths=paths)) if remove_index else []
    )
    keep = () if remove_index else state_dirs(paths=paths)
    remove: list[Path] = []
    refused: list[tuple[Path, str]] = []
    home = home.resolve()
    for folder in candidates:
        reason = _why_not(folder=folder, watched=watched, home=home)
        if reason:
            refused.append((folder, reason))
        else:
            remove.append(folder)
    return UninstallPlan(remove=tuple(remove), keep=tuple(keep), refused=tuple(refused))


def _why_not(*, folder: Path, watched: list[Path], home: Path) -> str | None:
    if folder == home or home.is_relative_to(folder) or folder == Path(folder.anchor):
        return "it is (or holds) the home folder"
    for docs in watched:
        docs = docs.resolve()
        if docs == folder or docs.is_relative_to(folder):
            return f"it holds the watched folder {docs} (your documents)"
    return None


def carry_out(*, plan: UninstallPlan) -> list[Path]:
    removed = []
    for folder in plan.remove:
        if folder.exists():
            shutil.rmtree(folder)
            removed.append(folder)
    return removed
