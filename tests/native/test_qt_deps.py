"""native/qt_deps.py: what `make run` checks before the window starts on X11."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from native.qt_deps import (
    NO_DISPLAY,
    QtDepsReport,
    check,
    distro_family,
    missing_libraries,
    xcb_will_be_used,
)

# ldd on PySide6 6.x's libqxcb.so on a fresh Debian 12 (the walkthrough's machine).
LDD = """\
\tlibxcb-cursor.so.0 => /lib/x86_64-linux-gnu/libxcb-cursor.so.0 (0x00007f41eb39a000)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-util.so.1 => /lib/x86_64-linux-gnu/libxcb-util.so.1 (0x00007f41eb392000)
\tlibxcb-keysyms.so.1 => not found
\tlibxcb-icccm.so.4 => not found
\tlibfoo-unknown.so.3 => not found
"""


def test_the_missing_libraries_are_named_with_their_packages_per_distribution() -> None:
    missing = missing_libraries(ldd_output=LDD)
    assert missing == ("libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libfoo-unknown.so.3")
    report = QtDepsReport(plugin=Path("libqxcb.so"), missing=missing[:2])
    assert report.packages(family="debian") == ["libxcb-icccm4", "libxcb-keysyms1"]
    assert report.packages(family="fedora") == ["xcb-util-wm", "xcb-util-keysyms"]
    assert report.packages(family="arch") == ["xcb-util-wm", "xcb-util-keysyms"]
    text = report.message(family=None)
    assert "sudo apt install libxcb-icccm4 libxcb-keysyms1" in text
    assert "sudo dnf install xcb-util-wm xcb-util-keysyms" in text
    assert "sudo pacman -S --needed xcb-util-wm xcb-util-keysyms" in text
    assert "libxcb-cursor0" not in text  # Qt's own message blamed it; it was installed
    assert "Fedora" not in report.message(family="debian")


def test_the_distribution_family_comes_from_os_release(tmp_path: Path) -> None:
    cases = {
        "ID=ubuntu\nID_LIKE=debian\n": "debian",
        'ID="fedora"\n': "fedora",
        "ID=manjaro\nID_LIKE=arch\n": "arch",
        'ID=linuxmint\nID_LIKE="ubuntu debian"\n': "debian",
        "ID=gentoo\n": None,
    }
    for text, family in cases.items():
        (tmp_path / "os-release").write_text(text)
        assert distro_family(os_release=tmp_path / "os-release") == family
    assert distro_family(os_release=tmp_path / "absent") is None


def test_only_an_x11_start_is_checked() -> None:
    assert xcb_will_be_used(env={"DISPLAY": ":0"})
    assert not xcb_will_be_used(env={"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"})
    assert xcb_will_be_used(env={"QT_QPA_PLATFORM": "xcb"})
    assert not xcb_will_be_used(env={"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"})
    # No display at all: Qt still loads its X11 plugin first (and aborts).
    assert xcb_will_be_used(env={})


def _headless_env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        env.pop(name, None)
    return env


@pytest.mark.parametrize(
    "command", [["-m", "native.qt_deps"], ["-m", "app.cli"]], ids=["qt_deps", "ragdoll"]
)
def test_without_a_display_the_start_says_why_it_cannot_open_the_window(
    command: list[str], tmp_path: Path
) -> None:
    """Issue #44, 6: `ragdoll` started without a display (or without the X libraries)
    aborted with Qt's message, which blamed libxcb-cursor0; `python -m native.qt_deps`
    printed nothing and exited 0 without DISPLAY."""
    env = {**_headless_env(), "RAGDOLL_HOME": str(tmp_path / "home")}
    run = subprocess.run(
        [sys.executable, *command], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 1, (run.returncode, run.stderr)
    missing = check().missing
    if missing:
        assert ", ".join(missing) in run.stderr
    else:
        assert NO_DISPLAY in run.stderr
    assert "qt.qpa" not in run.stderr and "xcb-cursor0 is needed" not in run.stderr
    assert not (tmp_path / "home").exists()  # no engine was started for a window that never came


def test_the_real_plugin_is_checked_and_make_run_passes_headless() -> None:
    report = check()
    assert report.plugin is not None and report.plugin.name == "libqxcb.so"
    # What `make run` runs first: headless (the tests' offscreen) it never stops the start.
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "DISPLAY": ":99"}
    result = subprocess.run([sys.executable, "-m", "native.qt_deps"], env=env, capture_output=True)
    assert result.returncode == 0
    # Told to check: it fails exactly when ldd finds something missing, and says what.
    forced = subprocess.run(
        [sys.executable, "-m", "native.qt_deps", "--always"], capture_output=True, text=True
    )
    assert forced.returncode == (1 if report.missing else 0)
    for soname in report.missing:
        assert soname in forced.stderr


# A fresh Debian desktop as the walkthrough met it: the two xcb helpers absent. A private
# mount namespace puts a copy of the library folder without them over the real one, so
# that ldd and Qt see what that machine had; nothing outside this test's process changes.
HIDE_XCB_HELPERS = """
set -e
lib=$1; scratch=$2; shift 2
mkdir -p "$scratch/orig" "$scratch/fake"
mount --bind "$lib" "$scratch/orig"
mount -t tmpfs tmpfs "$scratch/fake"
for f in "$scratch"/orig/* "$scratch"/orig/.[!.]*; do
  name=${f##*/}
  case "$name" in libxcb-icccm.so*|libxcb-keysyms.so*) continue;; esac
  ln -s "$scratch/orig/$name" "$scratch/fake/$name"
done
mount --bind "$scratch/fake" "$lib"
exec "$@"
"""
LIB_DIR = Path("/usr/lib/x86_64-linux-gnu")


def _can_hide_libraries() -> bool:
    if not (LIB_DIR / "libxcb-icccm.so.4").exists() or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return probe.returncode == 0


def test_a_desktop_without_the_xcb_helpers_is_told_the_packages(tmp_path: Path) -> None:
    """What `make run` runs before the window, on a machine where libxcb-icccm4 and
    libxcb-keysyms1 are missing: it names them (Qt itself blamed libxcb-cursor0)."""
    if not _can_hide_libraries():
        pytest.skip("needs root, unshare and Debian's x86_64 library folder with the xcb helpers")
    hide = ["unshare", "-m", "bash", "-c", HIDE_XCB_HELPERS, "hide", str(LIB_DIR), str(tmp_path)]
    run = subprocess.run(
        [*hide, sys.executable, "-m", "native.qt_deps", "--always"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stderr
    assert "libxcb-icccm.so.4, libxcb-keysyms.so.1." in run.stderr
    if distro_family() == "debian":
        assert "Debian/Ubuntu: sudo apt install libxcb-icccm4 libxcb-keysyms1" in run.stderr
    # The `ragdoll` launcher itself, on a desktop (a display set), says the same.
    env = {**_headless_env(), "DISPLAY": ":0", "RAGDOLL_HOME": str(tmp_path / "home")}
    launcher = subprocess.run(
        [*hide, sys.executable, "-m", "app.cli"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert launcher.returncode == 1, launcher.stderr
    assert "libxcb-icccm.so.4, libxcb-keysyms.so.1." in launcher.stderr
    assert "qt.qpa" not in launcher.stderr
    assert "libxcb-cursor0" not in run.stderr


def test_the_install_doc_lists_the_packages_for_each_distribution() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "install.md").read_text(encoding="utf-8")
    # The helpers a fresh desktop lacks, and the two the Debian list once
    # left out: on Debian 12 no package in it depends on libxcb-shape0 or
    # libglib2.0-0, and libqxcb / libQt6Core link both (apt-cache depends --recurse).
    helpers = (
        "libxcb-icccm.so.4",
        "libxcb-keysyms.so.1",
        "libxcb-cursor.so.0",
        "libxcb-shape.so.0",
        "libglib-2.0.so.0",
    )
    report = QtDepsReport(plugin=None, missing=helpers)
    for family, label in (("debian", "Debian, Ubuntu"), ("fedora", "Fedora"), ("arch", "Arch")):
        line = next(x for x in doc.splitlines() if x.startswith(f"| {label} | "))
        for package in report.packages(family=family):
            assert f" {package}" in line, (label, package)
