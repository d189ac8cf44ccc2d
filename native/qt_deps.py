"""Before the window starts on X11: does Qt's xcb plugin find its system libraries?

PySide6's wheels carry Qt but not the X11 helper libraries its xcb platform plugin
links against. When one is missing, Qt prints a message that names libxcb-cursor0
whatever is really missing, and the window never appears (or appears black). This
runs `ldd` on the plugin, maps each missing library to the package that provides it
on Debian/Ubuntu, Fedora and Arch, and says the command that installs them.

    python -m native.qt_deps          (what `make run` and the installer run)

The `ragdoll` launcher asks `window_problem` too before it imports Qt, so that a
person who starts it directly is told what is missing instead of Qt's abort.

Exit status 0 when nothing is missing (or nothing can be checked: not Linux, no
ldd, Qt told to use another platform), 1 with the list otherwise, and 1 when
there is no display to open the window on (DISPLAY and WAYLAND_DISPLAY unset;
`--always` checks only the libraries, as an installer run from a terminal does).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# soname -> (Debian/Ubuntu, Fedora, Arch) package. The libraries Qt 6's libqxcb.so
# and libQt6XcbQpa link against, beyond glibc.
PACKAGES: dict[str, tuple[str, str, str]] = {
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms", "xcb-util-keysyms"),
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor", "xcb-util-cursor"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image", "xcb-util-image"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util", "xcb-util"),
    "libxcb-render-util.so.0": (
        "libxcb-render-util0",
        "xcb-util-renderutil",
        "xcb-util-renderutil",
    ),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb", "libxcb"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb", "libxcb"),
    "libxcb-xinerama.so.0": ("libxcb-xinerama0", "libxcb", "libxcb"),
    "libxcb-xinput.so.0": ("libxcb-xinput0", "libxcb", "libxcb"),
    "libxcb.so.1": ("libxcb1", "libxcb", "libxcb"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb", "libx11"),
    "libX11.so.6": ("libx11-6", "libX11", "libx11"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon", "libxkbcommon"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11", "libxkbcommon-x11"),
    "libSM.so.6": ("libsm6", "libSM", "libsm"),
    "libICE.so.6": ("libice6", "libICE", "libice"),
    "libGL.so.1": ("libgl1", "libglvnd-glx", "libglvnd"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl", "libglvnd"),
    "libOpenGL.so.0": ("libopengl0", "libglvnd-opengl", "libglvnd"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype", "freetype2"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs", "dbus"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2", "glib2"),
    "libgthread-2.0.so.0": ("libglib2.0-0", "glib2", "glib2"),
}
FAMILIES = ("debian", "fedora", "arch")
INSTALL_COMMANDS = {
    "debian": "sudo apt install",
    "fedora": "sudo dnf install",
    "arch": "sudo pacman -S --needed",
}
_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found", re.MULTILINE)


@dataclass(frozen=True, kw_only=True)
class QtDepsReport:
    plugin: Path | None  # libqxcb.so, None where it could not be found
    missing: tuple[str, ...]  # sonames ldd could not resolve

    def packages(self, *, family: str) -> list[str]:
        """The packages that provide the missing libraries on this family, once each;
        a library not in the table is named as it is."""
        column = FAMILIES.index(family)
        found = [PACKAGES[s][column] if s in PACKAGES else s for s in self.missing]
        return list(dict.fromkeys(found))

    def message(self, *, family: str | None) -> str:
        lines = [
            "RAGDoll's window needs system libraries that Qt's X11 plugin could not find: "
            + ", ".join(self.missing)
            + ".",
            "Install them, then start RAGDoll again:",
        ]
        for fam in (family,) if family else FAMILIES:
            label = {"debian": "Debian/Ubuntu", "fedora": "Fedora", "arch": "Arch"}[fam]
            packages = " ".join(self.packages(family=fam))
            lines.append(f"  {label}: {INSTALL_COMMANDS[fam]} {packages}")
        return "\n".join(lines)


def xcb_plugin() -> Path | None:
    try:
        import PySide6
    except ImportError:
        return None
    plugin = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return plugin if plugin.is_file() else None


def missing_libraries(*, ldd_output: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(_NOT_FOUND.findall(ldd_output)))


def check(*, plugin: Path | None = None) -> QtDepsReport:
    plugin = plugin or xcb_plugin()
    ldd = shutil.which("ldd")
    if plugin is None or ldd is None:
        return QtDepsReport(plugin=plugin, missing=())
    out = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=60)
    return QtDepsReport(plugin=plugin, missing=missing_libraries(ldd_output=out.stdout))


def distro_family(*, os_release: Path = Path("/etc/os-release")) -> str | None:
    """debian, fedora or arch from /etc/os-release (ID and ID_LIKE), or None."""
    try:
        text = os_release.read_text(encoding="utf-8")
    except OSError:
        return None
    words: list[str] = []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key in ("ID", "ID_LIKE"):
            words += value.strip().strip('"').lower().split()
    aliases = {"ubuntu": "debian", "rhel": "fedora", "centos": "fedora", "manjaro": "arch"}
    for word in words:
        family = aliases.get(word, word)
        if family in FAMILIES:
            return family
    return None


NO_DISPLAY = (
    "RAGDoll's window needs a graphical session, and there is no display here "
    "(DISPLAY and WAYLAND_DISPLAY are not set). Start it from your desktop, or use "
    "the commands that need no window: `ragdoll ask`, `ragdoll ingest`, `ragdoll engine`."
)


def xcb_will_be_used(*, env: Mapping[str, str]) -> bool:
    """Whether Qt would load the xcb plugin here: on Linux, unless told to use
    another platform (the tests' offscreen) or in a Wayland session. Without any
    display too: Qt still loads the plugin first, and a missing library is what it
    reports then (wrongly blaming libxcb-cursor0)."""
    if platform.system() != "Linux":
        return False
    chosen = env.get("QT_QPA_PLATFORM", "").split(";")[0].split(":")[0].strip()
    if chosen:
        return chosen == "xcb"
    return not env.get("WAYLAND_DISPLAY")


def window_problem(*, env: Mapping[str, str]) -> str | None:
    """Why the window cannot open here, in words for a person (the packages to
    install, or that there is no display); None when nothing stands in its way
    as far as can be told."""
    if not xcb_will_be_used(env=env):
        return None
    report = check()
    if report.missing:
        return report.message(family=distro_family())
    if not env.get("DISPLAY"):
        return NO_DISPLAY
    return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--always" in args:  # the libraries only, whatever this session is
        report = check()
        if report.missing:
            print(report.message(family=distro_family()), file=sys.stderr)
            return 1
        return 0
    problem = window_problem(env=os.environ)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
