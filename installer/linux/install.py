#!/usr/bin/env python3
"""Install RAGDoll from this bundle for the current user (no root needed).

    ./install.sh            (or: python3 install.py [options])

Creates a private environment under the data folder (Linux: ~/.local/share/
ragdoll-desktop, or --prefix), installs into it the PyTorch build for this machine
(CUDA where an NVIDIA driver is present, the CPU build otherwise; see
torch_choice.py), then the app from its wheel with the pinned versions of
constraints.txt, using the pure-Python wheels in wheels/ and pip's own
configuration (index, find-links) for the rest, or only a folder of wheels with
--wheels. Then the desktop integration: menu entry, icons, "Ask RAGDoll about this
folder", the `ragdoll` command.

Standard library only: it runs with the system Python, 3.11 or newer. Installing
again upgrades in place and keeps the index: a running RAGDoll is stopped first and
started again after, and any failure or interruption puts the previous installation
back (transaction.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import running  # noqa: E402
import transaction  # noqa: E402
import wheel_fit  # noqa: E402
from torch_choice import TorchChoice, choose_torch, probe_machine  # noqa: E402

MIN_PYTHON = (3, 11)
INFO = transaction.INFO


class Interrupted(Exception):
    """Ctrl+C, or the terminal closed (SIGHUP), or SIGTERM, during an install."""


def default_prefix() -> Path:
    system = platform.system()
    home = Path.home()
    if system == "Darwin":
        return home / "Library" / "Application Support" / "ragdoll-desktop"
    if system == "Windows":
        return Path(os.environ.get("LOCALAPPDATA", home)) / "RAGDoll" / "app"
    return data_home() / "ragdoll-desktop"


def data_home() -> Path:
    data = os.environ.get("XDG_DATA_HOME", "")
    return Path(data) if os.path.isabs(data) else Path.home() / ".local" / "share"


def bundle_version() -> str:
    return json.loads((HERE / "bundle.json").read_text(encoding="utf-8"))["version"]


def app_wheel() -> Path:
    wheels = sorted(HERE.glob("ragdoll_desktop-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"install: expected one ragdoll_desktop wheel in {HERE}, found {wheels}")
    return wheels[0]


def venv_python(venv: Path) -> Path:
    if platform.system() == "Windows":
        return venv / "Scripts" / "python.exe"
    return venv / "bin" / "python"


def plan(
    *,
    prefix: Path,
    offline: bool,
    torch_override: str | None,
    integrate: bool,
    wheels: Path | None = None,
    constraints: Path = HERE / "constraints.txt",
    skip_vendored: frozenset[Path] = frozenset(),
) -> tuple[TorchChoice, list[list[str]]]:
    """The commands an install runs, in order, and the torch choice behind them.
    `skip_vendored`: bundle wheels this Python cannot install (wheel_fit.py), whose
    pins `constraints` leaves out."""
    env = dict(os.environ)
    if torch_override:
        env["RAGDOLL_TORCH"] = torch_override
    choice = choose_torch(facts=probe_machine(env=env))
    venv = prefix / "venv"
    py = str(venv_python(venv))
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
    if hasattr(os, "getuid") and os.getuid() == 0:
        pip.append("--root-user-action=ignore")  # a system-wide install (the .deb) runs as root
    local = ["-c", str(constraints), "--find-links", str(HERE / "wheels")]
    if wheels is not None:
        local += ["--no-index", "--find-links", str(wheels)]
    vendored = sorted(str(w) for w in (HERE / "wheels").glob("*.whl") if w not in skip_vendored)
    commands = [[sys.executable, "-m", "venv", str(venv)]]
    # The steps before the last leave the environment incomplete on purpose (the
    # app's compiled dependencies come last); pip's conflict report about that
    # state is noise, so only the last step checks.
    partial = ["--no-warn-conflicts"]
    if vendored:
        # First, and from the bundle only: pip would otherwise fetch the same
        # versions again from an index it finds before the find-links.
        commands.append([*pip, *partial, "--no-index", "--no-deps", *vendored])
    commands += [
        [*pip, *partial, *local, *choice.pip_args(offline=offline or wheels is not None)],
        [*pip, *local, str(app_wheel())],
        # The installed command must start before the old copy is let go.
        [
            str(venv / ("Scripts" if platform.system() == "Windows" else "bin") / "ragdoll"),
            "--help",
        ],
    ]
    if integrate:
        commands.append([py, "-m", "native.linux", "integrate", "--app-dir", str(prefix)])
    return choice, commands


def installed_version(prefix: Path) -> str | None:
    try:
        return json.loads((prefix / INFO).read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None


def q(path: Path | str) -> str:
    """A path as the person can paste it into a shell."""
    return shlex.quote(str(path))


def unwritable(*, paths: list[Path]) -> tuple[Path, str] | None:
    """The first path that cannot be written (its nearest existing folder, and why)."""
    for path in paths:
        probe = path
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if probe.exists() and not probe.is_dir():
            return probe, "it is a file, not a folder"
        try:
            read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        if read_only:
            return probe, "it is on a read-only file system"
        if not os.access(probe, os.W_OK | os.X_OK):
            return probe, "you do not have permission to write there"
    return None


def notify(*, summary: str, body: str) -> None:
    """A desktop notification when nobody sees the terminal (double-clicked install.sh)."""
    if sys.stdout.isatty() or not shutil.which("notify-send"):
        return
    subprocess.run(["notify-send", "--app-name=RAGDoll", summary, body], check=False, timeout=10)


def fail(message: str) -> SystemExit:
    notify(summary="RAGDoll was not installed", body=message)
    return SystemExit(f"install: {message}")


def confirm_closing(*, windows: list[running.AppProcess], assume_yes: bool) -> bool:
    if assume_yes or not windows:
        return True
    pids = ", ".join(str(p.pid) for p in windows)
    if not sys.stdin.isatty():
        return False
    try:
        answer = input(
            f"RAGDoll is open (pid {pids}). Close it to install, and open it again after? [Y/n] "
        )
    except EOFError:
        return False
    return answer.strip().lower() in ("", "y", "yes")


# A person's shell settings that would make pip install into, or see, somewhere else
# than the new environment (a PYTHONPATH with a checkout made pip skip the app).
_LEAKY = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PIP_USER", "PIP_TARGET", "PIP_PREFIX")


def quiet_help(argv: list[str]) -> int | None:
    return subprocess.DEVNULL if argv[-1:] == ["--help"] else None


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _LEAKY and k != "VIRTUAL_ENV"}


def run_step(argv: list[str]) -> None:
    """One install step in its own process group: Ctrl+C (SIGINT to the terminal's
    group) reaches only the installer, which then ends the whole step, children
    included (`python -m venv` runs ensurepip as a child that would otherwise go on
    writing into the environment the rollback is deleting)."""
    step = subprocess.Popen(argv, env=clean_env(), stdout=quiet_help(argv), process_group=0)
    try:
        code = step.wait()
    except BaseException:
        end_group(step=step)
        raise
    if code != 0:
        raise subprocess.CalledProcessError(code, argv)


def end_group(*, step: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """SIGKILL every process of a step's group and wait until none is left (the step
    itself reaped here; its orphaned children by init)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(step.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            break
        step.poll()
        time.sleep(0.05)
    step.wait()


def _raise_interrupted(signum: int, _frame: object) -> None:
    raise Interrupted(signal.Signals(signum).name)


def run_install(
    *,
    prefix: Path,
    choice: TorchChoice,
    commands: list[list[str]],
    integrate: bool,
    managed_by: str | None = None,
) -> None:
    layout = transaction.Layout(prefix=prefix)
    outcome = transaction.recover(layout=layout)
    if outcome is not None:
        print("install: the last install was interrupted; the installation before it is back")
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    for sig in previous:
        signal.signal(sig, _raise_interrupted)
    try:
        transaction.begin(layout=layout)
        for argv in commands:
            print("+ " + " ".join(argv), flush=True)
            # Its own process group: Ctrl+C (SIGINT to the terminal's group) reaches
            # only the installer, which stops the step quietly and rolls back.
            run_step(argv)
    except (OSError, subprocess.CalledProcessError, KeyboardInterrupt, Interrupted) as e:
        # A second Ctrl+C must not stop the rollback half-way.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        stopped = isinstance(e, (KeyboardInterrupt, Interrupted))
        print(
            "\ninstall: interrupted; putting the previous installation back…"
            if stopped
            else f"install: {e}",
            file=sys.stderr,
            flush=True,
        )
        back = transaction.rollback(layout=layout)
        if back.restored_previous and integrate:
            # The failed run may have rewritten the old entries; write the old ones again.
            python = str(venv_python(layout.venv))
            subprocess.run(
                [python, "-m", "native.linux", "integrate", "--app-dir", str(prefix)],
                env=clean_env(),
                check=False,
                capture_output=True,
            )
        what = (
            "the previous installation is back in place"
            if back.restored_previous
            else "nothing was left installed"
        )
        raise fail(("interrupted: " if stopped else "failed: ") + what) from e
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    transaction.commit(
        layout=layout,
        info={
            "version": bundle_version(),
            "torch": choice.requirement,
            "torch_reason": choice.reason,
            "python": sys.version.split()[0],
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **({"managed_by": managed_by} if managed_by else {}),
        },
    )


def path_advice(*, bin_dir: Path) -> str:
    """Whether `ragdoll` works by name in a new terminal, and when it will."""
    on_path = any(
        Path(p).expanduser() == bin_dir for p in os.environ.get("PATH", "").split(os.pathsep) if p
    )
    if on_path:
        return "In a terminal: ragdoll --help"
    profiles = [Path.home() / n for n in (".profile", ".bash_profile", ".zprofile")]
    adds = any(
        ".local/bin" in (p.read_text(errors="replace") if p.is_file() else "") for p in profiles
    )
    if adds:
        return (
            f"{q(bin_dir)} joins your PATH at your next login (your ~/.profile adds it once "
            f"it exists); until then run {q(bin_dir / 'ragdoll')}"
        )
    return (
        f"{q(bin_dir)} is not on your PATH: run {q(bin_dir / 'ragdoll')}, or add it with\n"
        "  echo 'export PATH=\"$HOME/.local/bin:$PATH\"' >> ~/.profile   (then log in again)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Install RAGDoll for this user.")
    parser.add_argument("--prefix", type=Path, default=None, help="where the app goes")
    parser.add_argument(
        "--torch", default=None, help="cpu, cuda, or a CUDA build such as cu128 (default: detect)"
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="add no PyTorch index; pip's own configuration and wheels/ must have everything",
    )
    parser.add_argument(
        "--wheels",
        type=Path,
        default=None,
        metavar="DIR",
        help="install from this folder of wheels only, with no index at all (docs/install.md)",
    )
    parser.add_argument("--no-integrate", action="store_true", help="no menu entry, icons, etc.")
    parser.add_argument("--if-needed", action="store_true", help="do nothing when up to date")
    parser.add_argument("--dry-run", action="store_true", help="print the plan as JSON and stop")
    parser.add_argument(
        "--yes", action="store_true", help="close a running RAGDoll window without asking"
    )
    parser.add_argument(
        "--stop-only",
        action="store_true",
        help="stop the RAGDoll running from this installation, install nothing (the .deb's prerm)",
    )
    # The .deb's postinst: `ragdoll uninstall` then points to apt instead.
    parser.add_argument("--managed-by", default=None, help=argparse.SUPPRESS)
    return parser


def stop_running(*, prefix: Path, assume_yes: bool) -> list[running.AppProcess]:
    """Stop what runs from `prefix` (asking before closing a window); returns it."""
    if platform.system() != "Linux":
        return []
    system_wide = hasattr(os, "getuid") and os.getuid() == 0
    found = running.find_app_processes(venv=prefix / "venv", all_users=system_wide)
    windows = [p for p in found if p.kind == "window"]
    if not confirm_closing(windows=windows, assume_yes=assume_yes):
        raise fail(
            "RAGDoll is open; close its window (File ▸ Quit) and install again, "
            "or run ./install.sh --yes to close it"
        )
    if found:
        print("Stopping RAGDoll: " + ", ".join(p.describe() for p in found), flush=True)
        left = running.stop(processes=found)
        if left:
            raise fail(
                "these did not stop within a minute, so nothing was replaced: "
                + ", ".join(p.describe() for p in left)
            )
    return found


def check_writable(*, targets: list[Path], prefix_given: bool) -> None:
    blocked = unwritable(paths=targets)
    if blocked is not None:
        where, why = blocked
        # Without --prefix the home folder itself is what cannot be written: saying
        # "install into your home folder" then would send the person round in a circle.
        instead = (
            "Install into your home folder (leave out --prefix), or choose a folder you own "
            "with --prefix DIR"
            if prefix_given
            else "Choose a folder you can write to with --prefix DIR (and --no-integrate, "
            "since the menu entry and the command go into your home folder)"
        )
        raise fail(
            f"cannot write to {q(where)}: {why}.\n  {instead};\n"
            "  for every user of this machine, install the .deb package "
            "instead (sudo apt install ./ragdoll_VERSION_all.deb)."
        )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if sys.version_info < MIN_PYTHON:
        need = ".".join(map(str, MIN_PYTHON))
        raise fail(f"RAGDoll needs Python {need} or newer, this is {sys.version.split()[0]}")
    prefix = (args.prefix or default_prefix()).expanduser().resolve()
    if args.stop_only:
        stop_running(prefix=prefix, assume_yes=True)
        return 0
    if args.if_needed and installed_version(prefix) == bundle_version():
        return 0
    if args.wheels is not None and not args.wheels.is_dir():
        raise fail(f"--wheels {q(args.wheels)}: no such folder")
    integrate = not args.no_integrate and platform.system() == "Linux"
    unfit = wheel_fit.unfit_wheels(
        wheels=sorted((HERE / "wheels").glob("*.whl")), python=sys.version_info[:3]
    )
    constraints = HERE / "constraints.txt"
    if unfit and not args.dry_run:
        constraints = Path(tempfile.mkdtemp(prefix="ragdoll-install-")) / "constraints.txt"
        constraints.write_text(
            wheel_fit.constraints_without(
                text=(HERE / "constraints.txt").read_text(encoding="utf-8"),
                names={u.name for _, u in unfit},
            ),
            encoding="utf-8",
        )
    for _, u in unfit:
        print(
            f"note: {u.name} {u.version} needs Python {u.requires_python}, this is "
            f"{sys.version.split()[0]}: pip installs the newest {u.name} that runs here",
            file=sys.stderr,
        )
    try:
        choice, commands = plan(
            prefix=prefix,
            offline=args.offline,
            torch_override=args.torch,
            integrate=integrate,
            wheels=args.wheels,
            constraints=constraints,
            skip_vendored=frozenset(w for w, _ in unfit),
        )
    except ValueError as e:
        raise SystemExit(f"install: {e}") from e
    if args.dry_run:
        body = {
            "prefix": str(prefix),
            "version": bundle_version(),
            "torch": {
                "variant": choice.variant,
                "requirement": choice.requirement,
                "index_url": None if args.offline or args.wheels else choice.index_url,
                "reason": choice.reason,
            },
            "commands": commands,
        }
        print(json.dumps(body, indent=2))
        return 0
    bin_dir = Path.home() / ".local" / "bin"
    check_writable(
        targets=[prefix] + ([data_home(), bin_dir] if integrate else []),
        prefix_given=args.prefix is not None,
    )
    found = stop_running(prefix=prefix, assume_yes=args.yes)
    print(f"Installing RAGDoll {bundle_version()} into {q(prefix)}")
    print(f"PyTorch: {choice.requirement} ({choice.reason})", flush=True)
    launcher = prefix / "venv" / ("Scripts" if platform.system() == "Windows" else "bin")
    launcher = launcher / "ragdoll"
    try:
        run_install(
            prefix=prefix,
            choice=choice,
            commands=commands,
            integrate=integrate,
            managed_by=args.managed_by,
        )
    except OSError as e:
        raise fail(f"{e.strerror or e}: {q(e.filename or prefix)}") from e
    finally:
        if constraints.parent != HERE:
            shutil.rmtree(constraints.parent, ignore_errors=True)  # the adjusted pins
        # Also after a failure: the previous version is back and runs again.
        for restarted in running.start_again(launcher=launcher, stopped=found, env=clean_env()):
            print(f"Started {restarted.what} again; waiting for it to answer…", flush=True)
            running.wait_until_serving(
                restarted=restarted,
                env=clean_env(),
                say=lambda line: print(line, flush=True),
            )
    if integrate:
        # Names the system packages the window still needs, if any (it does not fail the install).
        qt_check = [str(venv_python(prefix / "venv")), "-m", "native.qt_deps", "--always"]
        subprocess.run(qt_check, check=False, env=clean_env())
    print(f"\nRAGDoll {bundle_version()} is installed in {q(prefix)}.")
    if integrate:
        print("Start it from the applications menu. " + path_advice(bin_dir=bin_dir) + ".")
        print(
            f"To remove it: {q(prefix / 'uninstall.sh')}, or Uninstall in the menu entry's "
            "right-click menu. Your documents are never touched."
        )
    elif args.managed_by == "deb":
        print("Start it from the applications menu, or run: ragdoll (/usr/bin/ragdoll)")
    else:
        print(f"Run it: {q(launcher)}")
    notify(summary="RAGDoll is installed", body="Start it from the applications menu.")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("install: interrupted before anything was changed")
