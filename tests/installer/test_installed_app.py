"""The whole path a person takes: build the Linux bundle, install it into a fresh
HOME, start the app through its .desktop entry under Xvfb, see the window, ingest
the sample collection and ask through the installed `ragdoll`, quit, uninstall.

Slow (a real install: a private environment with PyTorch, Qt, LanceDB — minutes).
pip runs with this machine's configuration (find-links with the CPU torch wheel,
its index); the quick form is tests/installer/test_bundle.py.
Set RAGDOLL_SCREENSHOT_DIR to keep the screenshots (docs/screenshots/installed-app.png).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from installer.linux.build_bundle import build
from installer.linux.running import find_app_processes, stop
from tests.installer.desktop_session import (
    exec_argv,
    home_env,
    missing_tools,
    screenshot,
    wait_for_window,
    xvfb,
)

REPO = Path(__file__).resolve().parents[2]
QUESTION = "How do I add a folder?"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def run(argv: list[str], *, env: dict[str, str], timeout: float = 900) -> str:
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{argv}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def pip_cache() -> str | None:
    out = subprocess.run(
        ["python3", "-m", "pip", "cache", "dir"], capture_output=True, text=True
    ).stdout.strip()
    return out or None


def keep_screenshot(shot: Path, name: str) -> None:
    target = os.environ.get("RAGDOLL_SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(target) / name)


def test_build_install_start_ask_quit_uninstall(tmp_path: Path) -> None:
    if missing_tools():
        pytest.skip(
            f"needs {', '.join(missing_tools())} (apt-get install xvfb xdotool imagemagick)"
        )
    if shutil.which("desktop-file-validate") is None:
        pytest.skip("desktop-file-validate is not installed (apt-get install desktop-file-utils)")

    # Build and unpack, as a person who downloaded the tarball would.
    bundle = build(out=tmp_path / "dist", wheelhouse=True, tarball=True)
    with tarfile.open(bundle.with_name(bundle.name + ".tar.gz")) as tar:
        tar.extractall(tmp_path / "download", filter="data")
    home = tmp_path / "home"
    home.mkdir()
    env = home_env(home=home)
    cache = pip_cache()
    if cache:
        env["PIP_CACHE_DIR"] = cache  # the same downloads as the rest of the machine
    docs = home / "Documents" / "samples"
    shutil.copytree(REPO / "resources" / "samples", docs)
    before = {p.name: p.read_bytes() for p in docs.iterdir()}

    # The one step, as on a fresh Debian/Ubuntu account: ~/.local/bin is not on PATH
    # yet, and ~/.profile adds it at the next login once it exists.
    (home / ".profile").write_text(
        'if [ -d "$HOME/.local/bin" ] ; then\n    PATH="$HOME/.local/bin:$PATH"\nfi\n'
    )
    bin_dir = home / ".local" / "bin"
    first_env = {
        **env,
        "PATH": os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != str(bin_dir)),
    }
    started = time.monotonic()
    result = subprocess.run(
        [str(tmp_path / "download" / bundle.name / "install.sh"), "--offline"],
        env=first_env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    install_s = time.monotonic() - started
    print(f"install took {install_s:.0f} s")
    log = result.stdout
    assert result.returncode == 0, f"{log[-3000:]}\n{result.stderr[-3000:]}"
    assert "PyTorch: torch==" in log
    # Issue 21, point 11: no alarming pip noise on success, and a closing message
    # that says when the command works by name.
    assert "dependency resolver" not in result.stderr + log, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert f"{bin_dir} joins your PATH at your next login" in log, log[-2000:]
    assert f"until then run {bin_dir / 'ragdoll'}" in log, log[-2000:]
    data = home / ".local" / "share"
    app_dir = data / "ragdoll-desktop"
    info = json.loads((app_dir / "install-info.json").read_text())
    assert info["version"] == "0.1.0"
    # No NVIDIA GPU here: the CPU build, and no CUDA runtime in the environment.
    assert info["torch"].endswith("+cpu")
    site = next((app_dir / "venv" / "lib").glob("python3*/site-packages"))
    assert not list(site.glob("nvidia*")) and not list(site.glob("triton*"))

    entry = data / "applications" / "ragdoll.desktop"
    subprocess.run(["desktop-file-validate", str(entry)], check=True)
    assert (data / "icons" / "hicolor" / "256x256" / "apps" / "ragdoll.png").is_file()

    endpoint = home / ".config" / "RAGDoll" / "run" / "engine.json"
    with xvfb(size="1200x800x24") as display:
        gui_env = {**env, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}
        xenv = {**os.environ, "DISPLAY": display}

        # 1. Start from the menu entry: the window appears, the engine behind it.
        gui = subprocess.Popen(
            exec_argv(entry=entry),
            env=gui_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_window(display=display, name="RAGDoll", timeout_s=180)
            deadline = time.monotonic() + 300
            while not endpoint.exists() and time.monotonic() < deadline:
                time.sleep(0.5)
            assert endpoint.exists(), "the window did not start the engine"
            keep_screenshot(
                screenshot(display=display, out=tmp_path / "first.png"),
                "installed-app-first-start.png",
            )

            # 2. The installed command line, against the engine the window started.
            ragdoll = str(home / ".local" / "bin" / "ragdoll")
            out = run([ragdoll, "ingest", str(docs)], env=env)
            assert "2 ingested" in out, out
            answer = json.loads(run([ragdoll, "ask", QUESTION, "--json"], env=env))
            assert answer["citations"], answer
            assert any(c["path"].startswith(str(docs)) for c in answer["citations"])
        finally:
            gui.send_signal(signal.SIGTERM)
            assert gui.wait(timeout=120) == 0
        # The window asks its engine to stop and exits; the engine then closes its
        # store and pipelines and removes its endpoint file, moments later.
        deadline = time.monotonic() + 30
        while endpoint.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not endpoint.exists(), "quitting the window left its engine running"

        # 3. "Ask RAGDoll about this folder": the entry's Exec with the folder as %F.
        gui = subprocess.Popen(
            exec_argv(entry=entry, files=[str(docs)]),
            env=gui_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            window = wait_for_window(display=display, name="RAGDoll", timeout_s=180)
            time.sleep(20)  # the engine starts, re-reads the folder (unchanged)
            subprocess.run(["xdotool", "windowfocus", "--sync", window], env=xenv, check=True)
            subprocess.run(
                ["xdotool", "mousemove", "700", "740", "click", "1"], env=xenv, check=True
            )
            subprocess.run(["xdotool", "type", "--delay", "30", QUESTION], env=xenv, check=True)
            subprocess.run(["xdotool", "key", "Return"], env=xenv, check=True)
            time.sleep(20)
            shot = screenshot(display=display, out=tmp_path / "installed-app.png")
            keep_screenshot(shot, "installed-app.png")
            assert shot.stat().st_size > 10_000  # a drawn window, not a black screen
        finally:
            gui.send_signal(signal.SIGTERM)
            assert gui.wait(timeout=120) == 0

    # 4. Uninstall, keeping the index: the program goes, documents and index stay.
    index = data / "RAGDoll" / "index"
    assert index.is_dir()
    out = run([str(app_dir / "uninstall.sh"), "--keep-index"], env=env)
    assert "uninstalled" in out
    assert not app_dir.exists() and not entry.exists()
    assert not (home / ".local" / "bin" / "ragdoll").is_symlink()
    assert not (data / "icons" / "hicolor" / "256x256" / "apps" / "ragdoll.png").exists()
    assert index.is_dir() and any(index.iterdir())
    assert {p.name: p.read_bytes() for p in docs.iterdir()} == before


def _tree(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def _wait_for(predicate, *, timeout_s: float, what: str, explain=None) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    while not predicate():
        waited = time.monotonic() - started
        assert waited < timeout_s, f"timed out waiting for {what}" + (
            f"\n{explain()}" if explain else ""
        )
        time.sleep(0.5)
    print(f"{what}: {time.monotonic() - started:.1f} s")


def _wait_for_engine(  # type: ignore[no-untyped-def]
    *, endpoint: Path, venv: Path, what: str, explain, not_pid: int | None = None
) -> int:
    """Until an engine serves (its endpoint file names a live process other than
    `not_pid`): says every 30 s that it is still starting, and fails at once when no
    engine runs from the installed environment any more (it died as it started),
    with its output and log. The bound is only for a hung start."""
    started = told = time.monotonic()
    gone_since: float | None = None
    while True:
        now = time.monotonic()
        pid = _engine_pid(endpoint)
        if pid is not None and pid != not_pid and _alive(pid):
            print(f"{what}: serving after {now - started:.1f} s (pid {pid})")
            return pid
        engines = [p for p in find_app_processes(venv=venv) if p.kind == "engine"]
        gone_since = None if engines else (gone_since or now)
        assert gone_since is None or now - gone_since < 15, (
            f"{what}: no engine runs from {venv} (it stopped as it started)\n{explain()}"
        )
        assert now - started < 900, f"{what}: still not serving after 900 s\n{explain()}"
        if now - told >= 30:
            told = now
            print(f"{what}: still starting after {now - started:.0f} s ({engines})")
        time.sleep(0.5)


def _tail(path: Path, *, chars: int = 3000) -> str:
    try:
        return f"--- {path.name}:\n" + path.read_text(errors="replace")[-chars:]
    except OSError:
        return f"--- {path.name}: absent"


def _engine_pid(endpoint: Path) -> int | None:
    try:
        return int(json.loads(endpoint.read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _without_write_permission(
    *, argv: list[str], home: Path, app_dir: Path
) -> tuple[list[str], str]:
    """`argv` run where the install cannot be written, and the reason the installer
    should give. Root may write anywhere, so as root the home folder is mounted
    read-only in a private mount namespace; otherwise the program folder loses its
    write permission (the caller gives it back)."""
    if os.getuid() != 0:
        app_dir.chmod(0o555)
        return argv, "you do not have permission to write there"
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is needed to make the home folder read-only as root")
    remount = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return ["unshare", "--mount", "sh", "-c", remount, str(home), *argv], (
        "it is on a read-only file system"
    )


@pytest.mark.timeout(5400)  # four real installs and engine starts, on a loaded machine
def test_reinstall_running_engine_interrupted_upgrade_failed_integration(tmp_path: Path) -> None:
    """Issue 21, points 8-11, on real installs: reinstalling with the engine running
    stops it and starts it again; Ctrl+C mid-upgrade puts the previous install back;
    a failed integration step leaves the previous install and no new file; no write
    permission is a message, with the running engine left alone."""
    bundle = build(out=tmp_path / "dist", wheelhouse=True, tarball=False)
    home = tmp_path / "home"
    home.mkdir()
    env = home_env(home=home)
    cache = pip_cache()
    if cache:
        env["PIP_CACHE_DIR"] = cache
    install = [str(bundle / "install.sh"), "--offline", "--yes"]
    app_dir = home / ".local" / "share" / "ragdoll-desktop"
    ragdoll = str(home / ".local" / "bin" / "ragdoll")
    endpoint = home / ".config" / "RAGDoll" / "run" / "engine.json"
    run(install, env=env, timeout=1500)

    output = tmp_path / "engine-output.txt"
    engine_log = home / ".local" / "state" / "RAGDoll" / "log" / "engine.log"

    def explain() -> str:
        return _tail(output) + "\n" + _tail(engine_log)

    with output.open("wb") as sink:
        engine = subprocess.Popen(
            [ragdoll, "engine"], env=env, stdout=sink, stderr=sink, start_new_session=True
        )
    venv = app_dir / "venv"
    try:
        assert (
            _wait_for_engine(endpoint=endpoint, venv=venv, what="first start", explain=explain)
            == engine.pid
        )

        # The engine has read a file, so its parse sandbox runs beside it: the
        # installer must not take that for a window.
        docs = home / "Documents"
        docs.mkdir()
        (docs / "kettle.md").write_text("The kettle is kept in the garden shed.\n")
        assert "1 ingested" in run([ragdoll, "ingest", str(docs)], env=env)
        helpers = [p for p in find_app_processes(venv=venv) if p.kind == "helper"]
        assert helpers, find_app_processes(venv=venv)

        # 8. Reinstall with the engine running: stopped first, started again after,
        # and the installer waits until it serves again.
        log = run(install, env=env, timeout=1500)
        assert f"Stopping RAGDoll: the engine (pid {engine.pid})" in log, log
        assert f"the engine's helper (pid {helpers[0].pid})" in log, log
        assert "the window" not in log, log
        assert "Started the engine again; waiting for it to answer" in log
        assert "The engine is running again (pid" in log, log
        assert engine.wait(timeout=5) is not None
        restarted = _wait_for_engine(
            endpoint=endpoint, venv=venv, what="after the reinstall", explain=explain
        )
        assert restarted != engine.pid
        run([ragdoll, "status"], env=env)

        # 9. Ctrl+C during an upgrade (the terminal sends SIGINT to the whole group).
        (app_dir / "venv" / "marker-previous").write_text("the working copy")
        upgrade = subprocess.Popen(
            install,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        _wait_for(
            lambda: (app_dir / "venv.old").is_dir() and (app_dir / "venv" / "bin").is_dir(),
            timeout_s=300,
            what="the upgrade to start building",
            explain=explain,
        )
        time.sleep(5)  # pip is at work
        os.killpg(upgrade.pid, signal.SIGINT)
        out, err = upgrade.communicate(timeout=900)
        assert upgrade.returncode != 0
        assert "interrupted: the previous installation is back in place" in err, err
        assert "Traceback" not in err
        assert "The engine is running again (pid" in out, out
        assert (app_dir / "venv" / "marker-previous").read_text() == "the working copy"
        assert not (app_dir / "venv.old").exists()
        assert not (app_dir / "install-journal.json").exists()
        run([ragdoll, "--help"], env=env)
        _wait_for_engine(
            endpoint=endpoint, venv=venv, what="after the interruption", explain=explain
        )
        run([ragdoll, "status"], env=env)

        # 10. A failed integration step: the icons cannot be written.
        data = home / ".local" / "share"
        icons = data / "icons"
        icons.rename(data / "icons.aside")
        icons.write_text("a file where the icon folder goes")

        def integration_files() -> set[Path]:
            # Where integration writes, except the program and the index.
            return (
                (_tree(data) | _tree(home / ".local" / "bin"))
                - _tree(app_dir)
                - _tree(data / "RAGDoll")
            )

        before = integration_files()
        result = subprocess.run(install, env=env, capture_output=True, text=True, timeout=1500)
        assert result.returncode != 0
        assert "failed: the previous installation is back in place" in result.stderr
        assert "The engine is running again (pid" in result.stdout, result.stdout
        assert "Traceback" not in result.stderr
        assert (app_dir / "venv" / "marker-previous").is_file()
        after = integration_files()
        assert after - before == set(), f"left behind: {sorted(after - before)}"
        listed = json.loads((app_dir / "installed-files.json").read_text())["files"]
        assert all(Path(p).exists() or Path(p).is_symlink() for p in listed if "/icons/" not in p)
        icons.unlink()
        (data / "icons.aside").rename(icons)
        run([ragdoll, "--help"], env=env)

        # 11. No write permission: a message before anything is touched, and the
        # engine that serves from the working install is not stopped for nothing.
        serving = _wait_for_engine(
            endpoint=endpoint, venv=venv, what="after the failed integration", explain=explain
        )
        info_before = (app_dir / "install-info.json").read_bytes()
        argv, why = _without_write_permission(argv=install, home=home, app_dir=app_dir)
        try:
            result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        finally:
            app_dir.chmod(0o755)
        assert result.returncode != 0
        assert "Traceback" not in result.stderr, result.stderr
        assert f"install: cannot write to {app_dir}: {why}" in result.stderr, result.stderr
        assert "--prefix DIR" in result.stderr and ".deb" in result.stderr
        assert "Stopping RAGDoll" not in result.stdout, result.stdout
        assert _engine_pid(endpoint) == serving and _alive(serving)
        assert (app_dir / "install-info.json").read_bytes() == info_before
        assert not (app_dir / "install-journal.json").exists()
        run([ragdoll, "status"], env=env)
    finally:
        # Whatever runs from the installed environment (an engine started again may
        # still be starting, with no endpoint file yet).
        engine.kill()
        assert stop(processes=find_app_processes(venv=app_dir / "venv"), timeout_s=120) == []
    out = run([str(app_dir / "uninstall.sh"), "--remove-index", "--yes"], env=env)
    assert "uninstalled" in out and not app_dir.exists()
