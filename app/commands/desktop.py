"""Desktop commands: `ragdoll open` (alias `ask-folder`), `ragdoll autostart`,
`ragdoll uninstall`.

`open` is what the .desktop entry and the file-manager actions run: the window,
with the given folders or files added once it is connected to the engine.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

from app.commands.session import fail


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "open",
        aliases=["ask-folder"],
        help="open the window, adding folders or files to the collection",
        description="Open the RAGDoll window; the given folders or files are added to the "
        "collection once the engine is up (what 'Ask RAGDoll about this folder' runs).",
    )
    p.add_argument("paths", nargs="*", metavar="PATH")
    p.add_argument("--choose-folder", action="store_true", help="ask for a folder to add")
    p.add_argument("--samples", action="store_true", help="add the sample collection")
    p.set_defaults(func=run_open)

    a = sub.add_parser(
        "autostart",
        help="start the engine at login, for background folder watching",
        description="Turn starting the engine at login on or off (Linux: XDG autostart; "
        "macOS: a LaunchAgent).",
    )
    a.add_argument("state", choices=["on", "off", "status"])
    a.set_defaults(func=run_autostart)

    u = sub.add_parser(
        "uninstall",
        help="remove the installed app; your documents are never touched",
        description="Remove the installed RAGDoll: its environment, menu entry, icons, "
        "file-manager actions and login start. Your documents are never touched. The index "
        "(and the app's settings, cache and logs) is kept or removed as you choose.",
    )
    choice = u.add_mutually_exclusive_group()
    choice.add_argument("--keep-index", dest="remove_index", action="store_false", default=None)
    choice.add_argument("--remove-index", dest="remove_index", action="store_true")
    u.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    u.add_argument(
        "--keep-program-files",
        action="store_true",
        help="leave the program folder to the platform's uninstaller (Windows)",
    )
    u.set_defaults(func=run_uninstall)


def run_open(args: argparse.Namespace) -> int:
    paths: list[str] = []
    for raw in args.paths:
        path = Path(raw).expanduser()
        if not path.exists():
            print(f"ragdoll: not found, not added: {raw}", file=sys.stderr)
            continue
        paths.append(str(path.resolve()))
    if args.paths and not paths:
        return fail("none of the given paths exists; nothing to open")
    return _open_window(paths=paths, choose_folder=args.choose_folder, samples=args.samples)


def _open_window(*, paths: list[str], choose_folder: bool, samples: bool) -> int:
    """The window of `ragdoll gui`, which adds `paths` once the engine is connected."""
    import logging

    from PySide6.QtWidgets import QApplication

    from app.main import _quit_on_terminal_signals, configure_app
    from app.main_window import MainWindow

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    configure_app(app)
    window = MainWindow()
    add_on_connect(window=window, paths=paths, choose_folder=choose_folder, samples=samples)
    window.show()
    _quit_on_terminal_signals(app)
    code = app.exec()
    window.close()
    return code


def add_on_connect(*, window: Any, paths: list[str], choose_folder: bool, samples: bool) -> None:
    """On the window's first connection to the engine, add `paths` (and ask for a
    folder, or add the samples) through its library pane, so that progress shows as
    if they were added by hand. A reconnect does not add them again."""
    from app.qt_compat import emit

    pending = {"first": True}
    window.opening = list(paths)
    window.adding_on_start = bool(paths) or choose_folder or samples

    def on_connected(_status: object) -> None:
        if not pending.pop("first", False):
            return
        if choose_folder:
            window.library.choose_and_add_folder()
        if samples:
            window.library.add_sample_collection()
        if paths:
            emit(window.library.sig_add_paths, list(paths))

    window.bridge.sig_connected.connect(on_connected)


def _launcher() -> Path:
    from native.linux import installed_layout

    layout = installed_layout()
    if layout is not None:
        return layout.launcher
    found = Path(sys.argv[0]).resolve()
    return found if found.name == "ragdoll" else Path(sys.prefix) / "bin" / "ragdoll"


def run_autostart(args: argparse.Namespace) -> int:
    from native import autostart

    launcher = _launcher()
    try:
        if args.state == "on":
            print(f"the engine starts at login: {autostart.enable(launcher=launcher)}")
        elif args.state == "off":
            removed = autostart.disable(launcher=launcher)
            print(f"removed {removed}" if removed else "login start was already off")
        else:
            print("on" if autostart.is_enabled(launcher=launcher) else "off")
    except (NotImplementedError, OSError) as e:
        return fail(str(e))
    return 0


def run_uninstall(args: argparse.Namespace) -> int:
    from engine.paths import resolve_paths
    from native import autostart
    from native.linux import installed_layout, remove_integration
    from native.uninstall import carry_out, plan_uninstall
    from native.xdg import xdg_dirs

    layout = installed_layout()
    if layout is None:
        return fail(
            "no installed RAGDoll found (this one runs from a checkout?); "
            "nothing to uninstall. Remove the checkout's .venv to remove it."
        )
    dirs = xdg_dirs()
    paths = resolve_paths()
    remove_index = args.remove_index
    if remove_index is None:
        if not sys.stdin.isatty():
            return fail("say --keep-index or --remove-index (no terminal to ask in)")
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
    if not args.yes and sys.stdin.isatty() and not _ask_yes_no("Go ahead? [y/N] "):
        print("nothing removed")
        return 1
    _stop_engine(paths=paths)
    # Windows: the installer's Run value goes with its own uninstaller.
    with contextlib.suppress(NotImplementedError):
        autostart.disable(launcher=layout.launcher, dirs=dirs)
    for path in remove_integration(layout=layout, dirs=dirs):
        print(f"  removed {path}")
    carry_out(plan=plan)
    print(
        "RAGDoll is uninstalled." + ("" if remove_index else f" The index stays in {paths.data}.")
    )
    return 0


def _ask_yes_no(prompt: str) -> bool:
    try:
        return input(prompt).strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _watched_folders(*, paths) -> list[Path]:  # type: ignore[no-untyped-def]
    from engine.folders import FolderRegistry

    try:
        return [Path(f.path) for f in FolderRegistry(file=paths.folders_file).list()]
    except (OSError, ValueError):
        return []


def _stop_engine(*, paths) -> None:  # type: ignore[no-untyped-def]
    """A running engine holds the index open; ask it to stop before files go."""
    from engine.client import EngineClient
    from engine.errors import EngineRequestError, EngineUnavailableError

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
    from engine.launcher import read_endpoint

    deadline = time.monotonic() + 20
    while read_endpoint(paths=paths) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
