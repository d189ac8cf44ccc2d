"""What uninstalling removes, decided before anything is deleted.

The program goes (its environment, desktop entries, icons, actions, login start);
the person's documents never do. The index and the app's other stored state go
only when asked (`remove_index`), and a folder that holds a watched folder or the
home folder itself is never removed, whatever the settings say.
"""

from __future__ import annotations

import os
from collections.abc import Callable
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


def count_files(*, folders: tuple[Path, ...]) -> int:
    return sum(len(files) + len(dirs) for f in folders for _, dirs, files in os.walk(f))


def carry_out(
    *, plan: UninstallPlan, progress: Callable[[int, int], None] | None = None
) -> list[Path]:
    """Delete the plan's folders, calling `progress(done, total)` as entries go
    (the program alone is tens of thousands of files: a person sees it move)."""
    folders = tuple(f for f in plan.remove if f.exists())
    total = count_files(folders=folders) if progress else 0
    done = 0
    step = max(total // 100, 1)
    for folder in folders:
        for root, dirs, files in os.walk(folder, topdown=False):
            entries = [(Path(root, n), False) for n in files] + [
                (Path(root, n), True) for n in dirs
            ]
            for entry, is_dir in entries:
                if is_dir and not entry.is_symlink():
                    entry.rmdir()
                else:
                    entry.unlink(missing_ok=True)
                done += 1
                if progress and done % step == 0:
                    progress(done, total)
        folder.rmdir()
    if progress:
        progress(total, total)
    return list(folders)
