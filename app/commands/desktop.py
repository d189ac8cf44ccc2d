"""Desktop commands: `ragdoll open` (alias `ask-folder`), `ragdoll autostart`,
`ragdoll uninstall`.

`open` is what the .desktop entry and the file-manager actions run: the window,
with the given folders or files added once it is connected to the engine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.commands.session import fail
from app.commands.uninstall import register_arguments


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
    register_arguments(u)


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
