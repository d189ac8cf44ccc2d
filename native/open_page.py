"""Open a document in the system's viewer, at a page where the viewer allows it.

`viewer_command` only builds the command (tested on every OS without launching
anything); `open_at_page` runs it, detached, and never waits for the viewer.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

Which = Callable[[str], str | None]

# Linux PDF viewers that take a page, in order of preference: (program, page argv).
_LINUX_PDF_VIEWERS: tuple[tuple[str, Callable[[int], list[str]]], ...] = (
    ("evince", lambda page: [f"--page-index={page}"]),
    ("okular", lambda page: ["--page", str(page)]),
    ("zathura", lambda page: ["--page", str(page)]),
    ("atril", lambda page: [f"--page-index={page}"]),
    ("xreader", lambda page: [f"--page-index={page}"]),
)
# Windows viewers that take a page; otherwise the shell's default for the file.
_WINDOWS_PDF_VIEWERS: tuple[tuple[str, Callable[[int], list[str]]], ...] = (
    ("SumatraPDF", lambda page: ["-page", str(page)]),
)


@dataclass(frozen=True, kw_only=True)
class ViewerCommand:
    argv: list[str]
    honours_page: bool  # False: the document opens at its first page


def viewer_command(
    *, path: Path, page: int | None = None, system: str | None = None, which: Which = shutil.which
) -> ViewerCommand:
    """The command that opens `path` (at 1-based `page` for a PDF when a viewer can)."""
    if page is not None and page < 1:
        raise ValueError(f"page must be 1 or more, not {page}")
    system = system or platform.system()
    target = str(path)
    is_pdf = path.suffix.lower() == ".pdf"
    if system == "Darwin":
        # Preview has no page argument; `open` hands the file to the user's default app.
        return ViewerCommand(argv=["open", target], honours_page=False)
    viewers = _LINUX_PDF_VIEWERS if system != "Windows" else _WINDOWS_PDF_VIEWERS
    if is_pdf and page is not None:
        for program, page_args in viewers:
            exe = which(program)
            if exe:
                return ViewerCommand(argv=[exe, *page_args(page), target], honours_page=True)
    if system == "Windows":
        # `start` needs the empty title argument, or a quoted path becomes the title.
        return ViewerCommand(argv=["cmd", "/c", "start", "", target], honours_page=False)
    return ViewerCommand(argv=["xdg-open", target], honours_page=False)


def open_at_page(
    *,
    path: Path,
    page: int | None = None,
    system: str | None = None,
    which: Which = shutil.which,
    launch: Callable[[list[str]], object] | None = None,
) -> ViewerCommand:
    """Open `path` in the system viewer; returns the command it ran."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such document: {path}")
    command = viewer_command(path=path, page=page, system=system, which=which)
    (launch or _detached)(command.argv)
    return command


def _detached(argv: list[str]) -> object:
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
