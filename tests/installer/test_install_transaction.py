"""The installer's upgrade as a transaction (installer/linux/transaction.py and
install.py's run_install): an interruption or a failure at any step puts the previous
installation back, and the run after an interrupted one never deletes the last
working copy. Quick: fake install steps instead of pip; the slow form with real
installs is tests/installer/test_installed_app.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from installer.linux import transaction

INSTALLER = Path(__file__).resolve().parents[2] / "installer" / "linux"


@pytest.fixture
def bundle(quick_bundle: Path) -> Path:
    return quick_bundle


def old_install(prefix: Path) -> transaction.Layout:
    """A working install: an environment, its desktop files, its install-info.json."""
    layout = transaction.Layout(prefix=prefix)
    (layout.venv / "bin").mkdir(parents=True)
    (layout.venv / "bin" / "ragdoll").write_text("old")
    entry = prefix.parent / "applications" / "ragdoll.desktop"
    entry.parent.mkdir(parents=True)
    entry.write_text("[Desktop Entry]\n")
    layout.manifest.write_text(json.dumps({"files": [str(entry)]}))
    layout.info.write_text(json.dumps({"version": "0.0.9"}))
    return layout


def driver(*, bundle: Path, prefix: Path, steps: list[str]) -> list[str]:
    """A process that runs install.py's run_install with these Python snippets as steps."""
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(bundle)!r})
        sys.argv = [{str(bundle / "install.py")!r}]
        import install
        from torch_choice import TorchChoice
        from pathlib import Path
        choice = TorchChoice(variant="cpu", requirement="torch", index_url=None, reason="test")
        steps = [[sys.executable, "-c", s] for s in {steps!r}]
        install.run_install(prefix=Path({str(prefix)!r}), choice=choice, commands=steps,
                            integrate=False)
        """
    )
    return [sys.executable, "-c", code]


# A step that half-builds the new environment and writes one desktop file, recording
# it first (as native.linux.integrate does), then waits to be interrupted.
def half_built_step(*, prefix: Path, ready: Path) -> str:
    orphan = prefix.parent / "icons" / "ragdoll.png"
    return textwrap.dedent(
        f"""
        import json, time
        from pathlib import Path
        prefix = Path({str(prefix)!r})
        (prefix / "venv" / "lib").mkdir(parents=True)
        (prefix / "venv" / "lib" / "half.py").write_text("new, unfinished")
        orphan = Path({str(orphan)!r})
        manifest = prefix / "installed-files.json"
        files = json.loads(manifest.read_text())["files"] + [str(orphan)]
        manifest.write_text(json.dumps({{"files": files}}))
        orphan.parent.mkdir(parents=True, exist_ok=True)
        orphan.write_text("png")
        Path({str(ready)!r}).write_text("ready")
        time.sleep(120)
        """
    )


def assert_old_install_back(layout: transaction.Layout) -> None:
    assert (layout.venv / "bin" / "ragdoll").read_text() == "old"
    assert not (layout.venv / "lib").exists()
    assert not layout.old.exists() and not layout.journal.exists()
    assert json.loads(layout.info.read_text())["version"] == "0.0.9"
    files = json.loads(layout.manifest.read_text())["files"]
    assert [Path(f).name for f in files] == ["ragdoll.desktop"]
    assert not (layout.prefix.parent / "icons" / "ragdoll.png").exists()
    assert (layout.prefix.parent / "applications" / "ragdoll.desktop").is_file()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_an_interrupted_upgrade_puts_the_previous_install_back(
    bundle: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    layout = old_install(tmp_path / "data" / "ragdoll-desktop")
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        driver(
            bundle=bundle,
            prefix=layout.prefix,
            steps=[half_built_step(prefix=layout.prefix, ready=ready)],
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a terminal of its own: the signal goes to the group
    )
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ready.exists(), proc.communicate(timeout=10)
    assert layout.old.is_dir() and layout.journal.is_file()  # mid-upgrade, as Ctrl+C finds it
    # As Ctrl+C (or closing the terminal) does: to the whole foreground process group.
    os.killpg(proc.pid, sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "Traceback" not in err, err  # nor the step's own KeyboardInterrupt
    assert "interrupted: the previous installation is back in place" in err
    assert_old_install_back(layout)


def test_a_failed_step_puts_the_previous_install_back_with_a_message(
    bundle: Path, tmp_path: Path
) -> None:
    layout = old_install(tmp_path / "data" / "ragdoll-desktop")
    failing = "import sys; from pathlib import Path; " + (
        f"Path({str(layout.venv)!r}).mkdir(); sys.exit(3)"
    )
    result = subprocess.run(
        driver(bundle=bundle, prefix=layout.prefix, steps=[failing]),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "failed: the previous installation is back in place" in result.stderr
    assert "Traceback" not in result.stderr
    assert_old_install_back(layout)


def test_a_first_install_that_fails_leaves_nothing(bundle: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "data" / "ragdoll-desktop"
    ready = tmp_path / "ready"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "ragdoll-desktop").mkdir()
    transaction.Layout(prefix=prefix).manifest.write_text(json.dumps({"files": []}))
    proc = subprocess.Popen(
        driver(bundle=bundle, prefix=prefix, steps=[half_built_step(prefix=prefix, ready=ready)]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "nothing was left installed" in err
    assert not (tmp_path / "data" / "icons" / "ragdoll.png").exists()
    assert not (prefix / "venv").exists() and not (prefix / "install-journal.json").exists()


def test_the_run_after_an_interruption_never_deletes_the_last_working_copy(
    tmp_path: Path,
) -> None:
    # Killed (no chance to roll back) after the swap, with a half-built venv/.
    layout = old_install(tmp_path / "a" / "ragdoll-desktop")
    transaction.begin(layout=layout)
    (layout.venv / "lib").mkdir(parents=True)
    outcome = transaction.recover(layout=layout)
    assert outcome is not None and outcome.restored_previous
    assert_old_install_back(layout)
    # Killed during the commit, after venv.old became venv.trash: the new one is good.
    layout = old_install(tmp_path / "b" / "ragdoll-desktop")
    transaction.begin(layout=layout)
    (layout.venv / "bin").mkdir(parents=True)
    (layout.venv / "bin" / "ragdoll").write_text("new")
    layout.old.rename(layout.trash)
    assert transaction.recover(layout=layout) is None
    assert (layout.venv / "bin" / "ragdoll").read_text() == "new"
    assert not layout.trash.exists() and not layout.journal.exists()
    # Left by the installer before journals: venv.old beside a half-built venv/.
    layout = old_install(tmp_path / "c" / "ragdoll-desktop")
    layout.venv.rename(layout.old)
    (layout.venv / "lib").mkdir(parents=True)
    assert transaction.recover(layout=layout) is not None
    assert (layout.venv / "bin" / "ragdoll").read_text() == "old"
    # A finished install: nothing to do, nothing touched.
    assert transaction.recover(layout=layout) is None
    assert (layout.venv / "bin" / "ragdoll").read_text() == "old"


def test_commit_keeps_the_new_install_and_its_info(tmp_path: Path) -> None:
    layout = old_install(tmp_path / "ragdoll-desktop")
    transaction.begin(layout=layout)
    (layout.venv / "bin").mkdir(parents=True)
    (layout.venv / "bin" / "ragdoll").write_text("new")
    transaction.commit(layout=layout, info={"version": "0.1.0"})
    assert (layout.venv / "bin" / "ragdoll").read_text() == "new"
    assert json.loads(layout.info.read_text()) == {"version": "0.1.0"}
    assert not layout.old.exists() and not layout.trash.exists() and not layout.journal.exists()


def _other_user(argv: list[str]) -> list[str]:
    """Run as nobody where this test runs as root (root may write anywhere)."""
    if os.getuid() != 0:
        return argv
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]


@pytest.fixture
def readable_bundle(bundle: Path) -> Iterator[Path]:
    """The installer's files where another user can read them (pytest's tmp is 0700),
    and a home folder nobody may write to."""
    if os.getuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to run as another user")
    where = Path(tempfile.mkdtemp(prefix="ragdoll-bundle-"))
    try:
        where.chmod(0o755)
        for name in (
            "install.py",
            "running.py",
            "transaction.py",
            "wheel_fit.py",
            "torch_choice.py",
        ):
            shutil.copy2(bundle / name, where / name)
        shutil.copy2(bundle / "bundle.json", where / "bundle.json")
        shutil.copy2(next(bundle.glob("ragdoll_desktop-*.whl")), where)
        (where / "wheels").mkdir()
        (where / "constraints.txt").write_text("")
        (where / "home").mkdir()
        for path in where.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        (where / "home").chmod(0o555)
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


@pytest.mark.parametrize("case", ["prefix in /opt", "read-only home"])
def test_no_write_permission_is_a_message_not_a_traceback(readable_bundle: Path, case: str) -> None:
    home = readable_bundle / "home"
    args = ["--prefix", "/opt/ragdoll-test"] if case == "prefix in /opt" else []
    result = subprocess.run(
        _other_user(["/usr/bin/python3", "-S", str(readable_bundle / "install.py"), *args]),
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
        timeout=60,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    where = "/opt" if case == "prefix in /opt" else str(home)
    assert f"install: cannot write to {where}: you do not have permission" in result.stderr
    assert "--prefix DIR" in result.stderr and ".deb" in result.stderr
    # Only a --prefix elsewhere is sent back home; an unwritable home is not.
    back_home = "leave out --prefix" in result.stderr
    assert back_home == (case == "prefix in /opt"), result.stderr
    assert ("--no-integrate" in result.stderr) == (case == "read-only home"), result.stderr
    assert not Path("/opt/ragdoll-test").exists()


def test_a_rollback_before_the_journal_was_written_touches_nothing(tmp_path: Path) -> None:
    """begin() failed before it wrote anything (say, a full disk): the working install,
    its desktop files and their list stay as they were."""
    layout = old_install(tmp_path / "data" / "ragdoll-desktop")
    outcome = transaction.rollback(layout=layout)
    assert outcome.restored_previous and outcome.removed_files == ()
    assert_old_install_back(layout)


def test_an_interrupted_step_ends_with_the_children_it_started(tmp_path: Path) -> None:
    """`python -m venv` runs ensurepip as a child: Ctrl+C must end that child too, or it
    goes on writing into the environment the rollback deletes ("Directory not empty").

    The step is interrupted in a fresh interpreter, as the installer runs: in the test
    process, after the int8 embedder's tests had run OpenVINO and NNCF in it, the
    SIGALRM that stands in for Ctrl+C ended pytest with a segmentation fault (cause
    not found; the installer loads neither)."""
    here = Path(transaction.__file__).parent
    marker = tmp_path / "child-pid"
    script = (
        f"import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(marker)!r}, 'w').write(str(child.pid))\n"
        f"time.sleep(60)\n"
    )
    # What the bundle holds beside install.py (torch_choice.py comes from native/).
    driver = textwrap.dedent(
        f"""
        import signal, sys
        sys.path[:0] = [{str(here)!r}, {str(here.parents[1] / "native")!r}]
        from installer.linux.install import run_step

        def interrupt(_signum, _frame):
            raise KeyboardInterrupt

        signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 3.0)
        try:
            run_step([sys.executable, "-c", {script!r}])
        except KeyboardInterrupt:
            print("interrupted")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(here.parents[1])}
    out = subprocess.run(
        [sys.executable, "-c", driver], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["interrupted"]
    child = int(marker.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        if state == "Z":
            break  # killed, waiting for init to reap it
        time.sleep(0.1)
    else:
        assert not Path(f"/proc/{child}").exists()
