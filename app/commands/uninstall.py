"""`ragdoll uninstall`: in a terminal, or from the menu entry's *Uninstall* action and a
double-clicked uninstall.sh, where nobody sees a terminal: then the question is a
dialog, progress a progress dialog, and the outcome a notification (or a message box
where no notification service runs)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from app.commands.session import fail

KEEP, REMOVE = "keep", "remove"


def register_arguments(u: argparse.ArgumentParser) -> None:
    choice = u.add_mutually_exclusive_group()
    choice.add_argument("--keep-index", dest="remove_index", action="store_false", default=None)
    choice.add_argument("--remove-index", dest="remove_index", action="store_true")
    u.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    u.add_argument(
        "--keep-program-files",
        action="store_true",
        help="leave the program folder to the platform's uninstaller (Windows)",
    )
    u.add_argument(
        "--gui",
        action="store_true",
        help="ask in a dialog and report in a notification (what the menu's Uninstall runs)",
    )
    u.set_defaults(func=run_uninstall)


def _has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def notify(*, summary: str, body: str, gui: bool) -> None:
    """Say it where the person looks: the terminal always, and without one a
    notification (or a message box where no notification service answers)."""
    if not gui:
        return
    sender = shutil.which("notify-send")
    if sender:
        sent = subprocess.run(
            [sender, "--app-name=RAGDoll", "--icon=ragdoll", summary, body],
            check=False,
            capture_output=True,
            timeout=10,
        )
        if sent.returncode == 0:
            return
    if _has_display():
        from PySide6.QtWidgets import QApplication, QMessageBox

        _app = QApplication.instance() or QApplication(["ragdoll-uninstall"])
        QMessageBox.information(None, summary, body)


def ask_in_dialog() -> str | None:
    """keep, remove, or None (cancelled), asked in a dialog."""
    from PySide6.QtWidgets import QApplication, QMessageBox

    _app = QApplication.instance() or QApplication(["ragdoll-uninstall"])
    box = QMessageBox()
    box.setWindowTitle("Uninstall RAGDoll")
    box.setText("Uninstall RAGDoll? Your documents are never touched.")
    box.setInformativeText(
        "The index (with your settings and conversations) can stay, so that a later "
        "install finds everything again, or go too."
    )
    keep = box.addButton("Uninstall, keep the index", QMessageBox.ButtonRole.AcceptRole)
    remove = box.addButton("Uninstall and remove the index", QMessageBox.ButtonRole.DestructiveRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(keep)
    box.exec()
    clicked = box.clickedButton()
    return KEEP if clicked is keep else REMOVE if clicked is remove else None


def terminal_progress() -> Callable[[int, int], None]:
    shown = {"last": -1}

    def show(done: int, total: int) -> None:
        percent = 100 * done // max(total, 1)
        if sys.stdout.isatty():
            print(f"\r  removing… {percent:3d}% ({done:,} of {total:,} files)", end="", flush=True)
            if done >= total:
                print()
        elif percent // 10 != shown["last"]:
            shown["last"] = percent // 10
            print(f"  removing… {percent}% ({done:,} of {total:,} files)", flush=True)

    return show


def dialog_progress() -> Callable[[int, int], None]:
    from PySide6.QtWidgets import QApplication, QProgressDialog

    app = QApplication.instance() or QApplication(["ragdoll-uninstall"])
    dialog = QProgressDialog("Removing RAGDoll…", "", 0, 100)
    dialog.setCancelButton(None)  # half a program is worse than either
    dialog.setWindowTitle("Uninstall RAGDoll")
    dialog.setMinimumDuration(0)
    console = terminal_progress()

    def show(done: int, total: int) -> None:
        console(done, total)
        dialog.setValue(100 * done // max(total, 1))
        app.processEvents()

    return show


def run_uninstall(args: argparse.Namespace) -> int:
    from engine.paths import resolve_paths
    from native import autostart
    from native.linux import INSTALL_INFO, installed_layout, remove_integration
    from native.uninstall import carry_out, plan_uninstall
    from native.xdg import xdg_dirs

    gui = args.gui or (not sys.stdin.isatty() and not sys.stdout.isatty() and _has_display())

    def stop(message: str) -> int:
        notify(summary="RAGDoll was not uninstalled", body=message, gui=gui)
        return fail(message)

    layout = installed_layout()
    if layout is None:
        return stop(
            "no installed RAGDoll found (this one runs from a checkout?); "
            "nothing to uninstall. Remove the checkout's .venv to remove it."
        )
    with contextlib.suppress(OSError, ValueError):
        info = json.loads((layout.app_dir / INSTALL_INFO).read_text(encoding="utf-8"))
        if info.get("managed_by") == "deb":
            return stop(
                "RAGDoll was installed with the system's package manager; remove it with "
                "'sudo apt remove ragdoll' (your documents and index stay either way)"
            )
    dirs = xdg_dirs()
    paths = resolve_paths()
    remove_index = args.remove_index
    if remove_index is None:
        if gui and _has_display():
            answer = ask_in_dialog()
            if answer is None:
                return stop("cancelled; nothing removed")
            remove_index = answer == REMOVE
        elif not sys.stdin.isatty():
            return stop("say --keep-index or --remove-index (no terminal to ask in)")
        else:
            remove_index = _ask_yes_no(
                f"Remove the index and settings in {paths.data} too? "
                "Your documents are not touched either way. [y/N] "
            )
    plan = plan_uninstall(
        paths=paths,
        remove_index=remove_index,
        program_dir=None if args.keep_program_files else layout.app_dir,
        watched=_watched_folders(paths=paths),
        home=dirs.home,
    )
    print("Uninstalling RAGDoll. Your documents are not touched.")
    for folder in plan.remove:
        print(f"  remove {folder}")
    for folder in plan.keep:
        print(f"  keep   {folder}")
    for folder, why in plan.refused:
        print(f"  keep   {folder} ({why})")
    confirm = not args.yes and not gui and sys.stdin.isatty()
    if confirm and not _ask_yes_no("Go ahead? [y/N] "):
        print("nothing removed")
        return 1
    _stop_engine(paths=paths)
    # Windows: the installer's Run value goes with its own uninstaller.
    with contextlib.suppress(NotImplementedError):
        autostart.disable(launcher=layout.launcher, dirs=dirs)
    for path in remove_integration(layout=layout, dirs=dirs):
        print(f"  removed {path}")
    progress = dialog_progress() if gui and _has_display() else terminal_progress()
    try:
        carry_out(plan=plan, progress=progress)
    except OSError as e:
        return stop(f"stopped while removing {e.filename}: {e.strerror or e}")
    done = "RAGDoll is uninstalled." + (
        " The index was removed too." if remove_index else f" The index stays in {paths.data}."
    )
    print(done)
    notify(
        summary="RAGDoll is uninstalled", body=done + " Your documents were not touched.", gui=gui
    )
    return 0


def _ask_yes_no(prompt: str) -> bool:
    try:
        return input(prompt).strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _watched_folders(*, paths) -> list[Path]:  # type: ignore[no-untyped-def]
    from engine.service.folders import FolderRegistry

    try:
        return [Path(f.path) for f in FolderRegistry(file=paths.folders_file).list()]
    except (OSError, ValueError):
        return []


def _stop_engine(*, paths) -> None:  # type: ignore[no-untyped-def]
    """A running engine holds the index open; ask it to stop before files go."""
    from engine.errors import EngineRequestError, EngineUnavailableError
    from engine.service.client import EngineClient

    try:
        client = EngineClient.connect(paths=paths, start=False, wait_s=2.0)
    except (EngineUnavailableError, EngineRequestError, OSError):
        return
    try:
        client.shutdown()
    except (EngineUnavailableError, EngineRequestError):
        pass
    finally:
        client.close()
    # The engine releases its lock as it exits; removing the index before would
    # race with its last writes.
    from engine.service.launcher import read_endpoint

    deadline = time.monotonic() + 20
    while read_endpoint(paths=paths) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
