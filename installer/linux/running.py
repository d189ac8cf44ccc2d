"""The installed app's running processes: found, stopped before files are replaced,
started again after. Standard library only (the installer runs it with the system
Python); Linux only (it reads /proc).

An engine left running under a replaced environment fails at its next lazy import
(`ModuleNotFoundError` for a module the new version moved), so an install stops
every process whose interpreter or script lives in the environment it replaces.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# What the window runs (no subcommand is `gui`); everything else but the engine is a
# command line that ends on its own (`ragdoll ask`), stopped like the engine.
_WINDOW_COMMANDS = frozenset({"gui", "open", "ask-folder"})


@dataclass(frozen=True, kw_only=True)
class AppProcess:
    pid: int
    uid: int
    argv: tuple[str, ...]
    kind: str  # "engine", "window", "command" or "helper" (a child the engine started)

    def describe(self) -> str:
        what = "the engine's helper" if self.kind == "helper" else f"the {self.kind}"
        return f"{what} (pid {self.pid})"


def classify(*, argv: tuple[str, ...]) -> str:
    """engine, window, command or helper, from a command line such as
    `venv/bin/python venv/bin/ragdoll open` or `venv/bin/python -m engine`."""
    rest = list(argv[1:])
    if rest[:2] == ["-m", "engine"]:
        return "engine"
    if rest[:1] == ["-m"] and rest[1:2] and rest[1].startswith("engine."):
        # The engine's own children (the parse sandbox, `-m engine.rag.ingest.sandbox_child
        # --fd=…`): with no subcommand they read as the window, and an engine that
        # had ingested anything made the installer ask to close a window nobody had
        # open, refuse without a terminal, and open the window after the upgrade.
        return "helper"
    if rest and rest[0] == "-m":
        rest = rest[2:]
    elif rest and rest[0].endswith("/ragdoll"):
        rest = rest[1:]
    words = [a for a in rest if not a.startswith("-")]
    sub = words[0] if words else "gui"
    if sub == "engine":
        return "engine"
    return "window" if sub in _WINDOW_COMMANDS else "command"


def find_app_processes(
    *, venv: Path, proc: Path = Path("/proc"), all_users: bool = False
) -> list[AppProcess]:
    """Processes whose interpreter or script is inside `venv` (this user's, or
    everyone's for a system-wide install run as root)."""
    inside = str(venv.absolute()).rstrip("/") + "/"
    me = os.getpid()
    found = []
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
            uid = entry.stat().st_uid
        except OSError:
            continue  # gone meanwhile, or not ours to read
        argv = tuple(a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0") if a)
        if not argv or (not all_users and uid != os.getuid()):
            continue
        if any(os.path.abspath(a).startswith(inside) for a in argv[:2]):
            found.append(
                AppProcess(pid=int(entry.name), uid=uid, argv=argv, kind=classify(argv=argv))
            )
    return found


def alive(*, pid: int, proc: Path = Path("/proc")) -> bool:
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]  # a zombie has exited


def stop(*, processes: list[AppProcess], timeout_s: float = 60.0) -> list[AppProcess]:
    """SIGTERM each (windows first: a window stops the engine it started), wait;
    returns those still running. The engine finishes the file at hand and closes its
    store on SIGTERM; it is never killed, so the index is never left half-written.
    The engine's helpers are signalled only once no engine or window is left: the
    file at hand is being parsed in one, and each ends with its engine anyway."""
    ordered = sorted(processes, key=lambda p: p.kind != "window")
    helpers = [p for p in ordered if p.kind == "helper"]
    for p in ordered:
        if p.kind != "helper":
            _terminate(pid=p.pid)
            if p.kind == "window":
                time.sleep(0.5)
    deadline = time.monotonic() + timeout_s
    left = list(ordered)
    while left and time.monotonic() < deadline:
        left = [p for p in left if alive(pid=p.pid)]
        if helpers and all(p.kind == "helper" for p in left):
            for p in left:
                _terminate(pid=p.pid)  # outlived its engine
            helpers = []
        if left:
            time.sleep(0.2)
    return left


def _terminate(*, pid: int) -> None:
    # Gone already, or another user's (a system-wide install run as root).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)


@dataclass(frozen=True, kw_only=True)
class Restarted:
    what: str  # "the window" or "the engine", in words
    process: subprocess.Popen[bytes]


def start_again(
    *, launcher: Path, stopped: list[AppProcess], env: dict[str, str]
) -> list[Restarted]:
    """Start what was stopped, for this user: the window where one ran and a display is
    here (it starts its engine), else the engine alone."""
    mine = [p for p in stopped if p.uid == os.getuid()]
    has_display = bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))
    window = any(p.kind == "window" for p in mine) and has_display
    engine = any(p.kind == "engine" for p in mine) or (
        any(p.kind == "window" for p in mine) and not has_display
    )
    argv = [str(launcher), "open"] if window else [str(launcher), "engine"] if engine else None
    if argv is None or not launcher.exists():
        return []
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # outlives the installer and its terminal
    )
    return [Restarted(what="the window" if window else "the engine", process=process)]


def _config_home(env: dict[str, str]) -> Path:
    home = Path(env.get("HOME") or Path.home())
    config = env.get("XDG_CONFIG_HOME", "").strip()
    return Path(config) if os.path.isabs(config) else home / ".config"


def endpoint_file(*, env: dict[str, str]) -> Path:
    """Where the engine says it is serving (engine/paths.py, on Linux)."""
    if env.get("RAGDOLL_HOME"):
        return Path(env["RAGDOLL_HOME"]).expanduser() / "run" / "engine.json"
    return _config_home(env) / "RAGDoll" / "run" / "engine.json"


def engine_log(*, env: dict[str, str]) -> Path:
    if env.get("RAGDOLL_HOME"):
        return Path(env["RAGDOLL_HOME"]).expanduser() / "logs" / "engine.log"
    state = env.get("XDG_STATE_HOME", "").strip()
    home = Path(env.get("HOME") or Path.home())
    base = Path(state) if os.path.isabs(state) else home / ".local" / "state"
    return base / "RAGDoll" / "log" / "engine.log"


def serving_pid(*, env: dict[str, str], proc: Path = Path("/proc")) -> int | None:
    """The pid of an engine that is serving for this user now, if one is."""
    try:
        pid = int(json.loads(endpoint_file(env=env).read_text(encoding="utf-8"))["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if alive(pid=pid, proc=proc) else None


def wait_until_serving(
    *,
    restarted: Restarted,
    env: dict[str, str],
    timeout_s: float = 300.0,
    every_s: float = 20.0,
    say: Callable[[str], None] = print,
) -> bool:
    """Wait until the engine answers (its endpoint file names a live process), saying
    every `every_s` that it is still starting; tell the person the outcome either way.
    A first start after an install imports PyTorch, LanceDB and the web stack (10-25 s
    on 2 loaded cores), which a loaded machine can stretch to minutes."""
    started = time.monotonic()
    told = started
    log_file = engine_log(env=env)
    while True:
        waited = time.monotonic() - started
        pid = serving_pid(env=env)
        if pid is not None:
            say(f"The engine is running again (pid {pid}, ready after {waited:.0f} s).")
            return True
        code = restarted.process.poll()
        if code is not None and (restarted.what == "the engine" or code != 0):
            say(
                f"{restarted.what.capitalize()} stopped as it started (exit code {code}); "
                f"its log: {log_file}"
            )
            return False
        if waited >= timeout_s:
            say(
                f"The engine is still starting after {waited:.0f} s (pid "
                f"{restarted.process.pid}); `ragdoll status` says when it answers, and its "
                f"log is {log_file}."
            )
            return False
        if time.monotonic() - told >= every_s:
            told = time.monotonic()
            say(f"  still starting ({waited:.0f} s)…")
        time.sleep(0.5)
