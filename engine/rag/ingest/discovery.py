"""Which files a request to ingest some paths means, and which it cannot."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.wire import FileError

log = logging.getLogger(__name__)
# Editor backups, office lock files and the temporary files editors save
# through are never documents. Hidden names (".x") are ignored as a whole.
_IGNORED_PREFIXES = ("~$", ".~lock", ".#", "#", "~WRL", "~WRD")
_IGNORED_SUFFIXES = ("~", "#", ".tmp", ".temp", ".swp", ".swx", ".part", ".crdownload")
DEFAULT_MAX_FILE_MB = 512
OUTSIDE = "a symbolic link that leads outside every watched folder: not read"
OUTSIDE_FOLDER = "a symbolic link to a folder outside every watched folder: not walked"
BROKEN_LINK = "broken symbolic link"
LINK_LOOP = "symbolic link loop"
# What is said of entries met in a folder: kept as the file's row in the journal too,
# so that /v1/documents/errors lists them as the job did.
ENTRY_REASONS = frozenset({OUTSIDE, OUTSIDE_FOLDER, BROKEN_LINK, LINK_LOOP})
# What an older version read through such a link stays in the index until the
# next start's rescan finds it outside every watched folder and removes it.
OUTSIDE_INDEXED = (
    "outside every watched folder (an older version read it through a symbolic link "
    "that leads out): removed from the index"
)


@dataclass(frozen=True, kw_only=True)
class IgnoreRules:
    """What ingestion and the folder watcher leave alone; the one place for it."""

    max_file_bytes: int = DEFAULT_MAX_FILE_MB * 1024 * 1024

    def too_large(self, size: int) -> str | None:
        """The reason a file of `size` bytes is refused, or None."""
        if size <= self.max_file_bytes:
            return None
        return f"larger than the size limit ({self.max_file_bytes // (1024 * 1024)} MB)"


@dataclass(frozen=True, kw_only=True)
class Discovery:
    files: list[Path]
    errors: list[FileError] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)  # walked, for removing vanished files

    @property
    def entries(self) -> list[FileError]:
        """The errors about links met in a folder (ENTRY_REASONS): the journal keeps them."""
        return [e for e in self.errors if e.reason in ENTRY_REASONS]


def is_ignored(name: str) -> bool:
    lowered = name.lower()
    return (
        name.startswith(".")
        or name.startswith(_IGNORED_PREFIXES)
        or lowered.endswith(_IGNORED_SUFFIXES)
    )


def is_candidate(*, path: Path, root: Path, suffixes: frozenset[str]) -> bool:
    """Whether a file under a watched `root` may be a document: a supported
    suffix, and no ignored name on the way down from the root."""
    if path.suffix.lower() not in suffixes:
        return False
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return False
    return not any(is_ignored(part) for part in parts)


def discover(
    *, paths: list[str], suffixes: frozenset[str], inside: Callable[[Path], bool] | None = None
) -> Discovery:
    """The files `paths` name or hold. With `inside` (is this real path in a watched
    folder?), a path in a watched folder whose real path (symbolic links followed)
    is not is listed as an error, never read: a link must not let an outside file in."""
    files: list[Path] = []
    errors: list[FileError] = []
    folders: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        named = path = Path(raw).expanduser()
        try:
            path = path.resolve(strict=True)
        except (FileNotFoundError, RuntimeError, OSError) as e:
            reason = "not found" if isinstance(e, FileNotFoundError) else f"cannot open: {e}"
            errors.append(FileError(path=str(path), reason=reason))
            continue
        if _leads_out(link=named.absolute(), target=path, inside=inside):
            errors.append(FileError(path=str(named), reason=OUTSIDE))
            continue
        if path.is_dir():
            folders.append(path)
            _walk(
                folder=path, suffixes=suffixes, files=files, errors=errors, seen=seen, inside=inside
            )
        elif path.suffix.lower() in suffixes:
            if path not in seen:
                seen.add(path)
                files.append(path)
        else:
            errors.append(
                FileError(path=str(path), reason=f"unsupported file type {path.suffix or '(none)'}")
            )
    return Discovery(files=files, errors=errors, folders=folders)


def _walk(
    *,
    folder: Path,
    suffixes: frozenset[str],
    files: list[Path],
    errors: list[FileError],
    seen: set[Path],
    inside: Callable[[Path], bool] | None,
) -> None:
    def on_error(e: OSError) -> None:
        errors.append(
            FileError(
                path=str(e.filename or folder), reason=f"cannot read folder: {e.strerror or e}"
            )
        )

    # followlinks=False: a symlink loop must not walk forever.
    for root, dirnames, filenames in os.walk(folder, onerror=on_error, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not is_ignored(d))
        for name in dirnames:
            _note_folder_link(link=Path(root) / name, errors=errors, inside=inside)
        for name in sorted(filenames):
            if is_ignored(name) or Path(name).suffix.lower() not in suffixes:
                continue
            path = Path(root) / name
            if path.is_symlink():
                link = path
                try:
                    path = path.resolve(strict=True)
                except FileNotFoundError:
                    errors.append(FileError(path=str(path), reason=BROKEN_LINK))
                    continue
                except (OSError, RuntimeError):  # Python 3.11 says RuntimeError for a loop
                    errors.append(FileError(path=str(path), reason=LINK_LOOP))
                    continue
                if _leads_out(link=link, target=path, inside=inside):
                    errors.append(FileError(path=str(link), reason=OUTSIDE))
                    continue
            if path not in seen:
                seen.add(path)
                files.append(path)


def _note_folder_link(
    *, link: Path, errors: list[FileError], inside: Callable[[Path], bool] | None
) -> None:
    """A link to a folder is never walked (a loop must not walk forever, and the
    folder it leads to is walked where it lies, if watched); one that leads out of
    every watched folder is listed, as a file link is."""
    if not link.is_symlink():
        return
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):
        return  # os.walk lists a broken or looping link with the files, not here
    if inside is not None and inside(link.parent) and not inside(target):
        log.warning(
            "not walked: %s is a symbolic link to a folder outside every watched folder", link
        )
        errors.append(FileError(path=str(link), reason=OUTSIDE_FOLDER))


def _leads_out(*, link: Path, target: Path, inside: Callable[[Path], bool] | None) -> bool:
    """Whether `link`, in a watched folder, resolves to `target` outside them all."""
    if inside is None or link == target:
        return False
    if inside(link.parent) and not inside(target):
        log.warning("not read: %s is a symbolic link that leads outside every watched folder", link)
        return True
    return False
