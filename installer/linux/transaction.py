"""Replace an installed environment so that no interruption loses the working copy.

Standard library only. The steps, each one atomic (a rename, an unlink, a small
file replaced):

  begin     write install-journal.json (what was there: the environment, the list of
            desktop files, install-info.json), then rename venv -> venv.old
  (build)   the new venv/ and the desktop integration; integration records each file
            in installed-files.json before it writes it
  commit    rename venv.old -> venv.trash, write install-info.json, delete the journal,
            then delete venv.trash
  rollback  delete the desktop files this run added, the half-built venv/, put
            venv.old back, restore the file list and install-info.json, delete the journal

A journal found at the start of a run means the last one was interrupted (Ctrl+C,
a closed terminal, a power cut): `recover` rolls it back (or finishes a commit
that had begun) before anything else, so the next run never deletes the last working
copy. An install made before journals existed left venv.old as the working copy
beside a half-built venv/; that is put back too.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

JOURNAL = "install-journal.json"
MANIFEST = "installed-files.json"
INFO = "install-info.json"


@dataclass(frozen=True, kw_only=True)
class Layout:
    prefix: Path

    @property
    def venv(self) -> Path:
        return self.prefix / "venv"

    @property
    def old(self) -> Path:
        return self.prefix / "venv.old"

    @property
    def trash(self) -> Path:
        return self.prefix / "venv.trash"

    @property
    def journal(self) -> Path:
        return self.prefix / JOURNAL

    @property
    def manifest(self) -> Path:
        return self.prefix / MANIFEST

    @property
    def info(self) -> Path:
        return self.prefix / INFO


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What a rollback or recovery did, for the person."""

    restored_previous: bool  # a working environment from before is back in place
    removed_files: tuple[Path, ...]  # desktop files this run had written


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def manifest_files(*, text: str | None) -> list[str]:
    if not text:
        return []
    try:
        return [str(p) for p in json.loads(text).get("files", [])]
    except (ValueError, AttributeError):
        return []


def begin(*, layout: Layout) -> None:
    layout.prefix.mkdir(parents=True, exist_ok=True)
    journal = {
        "had_venv": layout.venv.is_dir(),
        "manifest": _read_text(layout.manifest),
        "info": _read_text(layout.info),
    }
    _write_atomic(layout.journal, json.dumps(journal, indent=2) + "\n")
    if layout.venv.is_dir():
        layout.venv.rename(layout.old)  # kept until the new one works


def commit(*, layout: Layout, info: dict[str, str]) -> None:
    if layout.old.exists():
        layout.old.rename(layout.trash)
    _write_atomic(layout.info, json.dumps(info, indent=2) + "\n")
    layout.journal.unlink()
    shutil.rmtree(layout.trash, ignore_errors=True)


def _remove_tree(path: Path, *, attempts: int = 20) -> None:
    """Delete a folder, trying again while something still writes into it (a step's
    last child, as it dies)."""
    for _ in range(attempts):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return
        time.sleep(0.25)


def rollback(*, layout: Layout) -> Outcome:
    """Undo an unfinished install; safe to run again if it is itself interrupted."""
    try:
        journal = json.loads(layout.journal.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        # No journal: begin() had not started (nothing was changed), or it is from
        # an installer without journals. The desktop files and their list stay.
        if layout.old.is_dir():
            shutil.rmtree(layout.venv, ignore_errors=True)
            layout.old.rename(layout.venv)
        return Outcome(restored_previous=layout.venv.is_dir(), removed_files=())
    before = set(manifest_files(text=journal.get("manifest")))
    removed = []
    for raw in manifest_files(text=_read_text(layout.manifest)):
        path = Path(raw)
        if raw in before or not (path.is_symlink() or path.exists()):
            continue
        try:
            path.unlink()
            removed.append(path)
        except OSError:
            pass  # a folder or a file we may not remove: left, still listed below
    if layout.old.is_dir():
        _remove_tree(layout.venv)
        layout.old.rename(layout.venv)
    elif not journal.get("had_venv"):
        shutil.rmtree(layout.venv, ignore_errors=True)
    kept = ((layout.manifest, journal.get("manifest")), (layout.info, journal.get("info")))
    for path, text in kept:
        if text is None:
            path.unlink(missing_ok=True)
        else:
            _write_atomic(path, text)
    layout.journal.unlink(missing_ok=True)
    shutil.rmtree(layout.trash, ignore_errors=True)
    if not journal.get("had_venv"):
        with contextlib.suppress(OSError):
            layout.prefix.rmdir()  # a first install leaves no empty folder behind
    return Outcome(restored_previous=layout.venv.is_dir(), removed_files=tuple(removed))


def recover(*, layout: Layout) -> Outcome | None:
    """Settle what an interrupted run left behind; None when nothing was left."""
    if layout.journal.exists():
        if layout.trash.exists() and not layout.old.exists():
            # The commit had begun: the new environment is the good one.
            layout.journal.unlink()
            shutil.rmtree(layout.trash, ignore_errors=True)
            return None
        return rollback(layout=layout)
    if layout.trash.exists():
        shutil.rmtree(layout.trash, ignore_errors=True)
    if layout.old.is_dir():
        # Left by an installer without journals: venv.old was the working copy.
        shutil.rmtree(layout.venv, ignore_errors=True)
        layout.old.rename(layout.venv)
        return Outcome(restored_previous=True, removed_files=())
    return None
