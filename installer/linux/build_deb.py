"""The .deb beside the tarball: `apt install ./ragdoll_VERSION_all.deb`, `apt remove ragdoll`.

    python -m installer.linux.build_deb --bundle dist/ragdoll-VERSION-linux --out dist

The package carries the bundle (installer, app wheel, pure-Python wheels) under
/opt/ragdoll/bundle and the system-wide desktop files (menu entry, icons, AppStream
metainfo, /usr/bin/ragdoll). Its postinst runs the bundle's install.py into
/opt/ragdoll/venv, choosing PyTorch for the machine exactly as install.sh does (so
the package is Architecture: all, and it downloads at install time: PyTorch and the
compiled dependencies); its prerm stops every user's RAGDoll running from it; its
postrm deletes the environment the postinst made. Users' documents, indexes and
settings (in their home folders) are never touched.

Built with dpkg-deb only (no debhelper), so it builds on any Debian-like machine.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from installer.spec import REPO, load_spec
from native.desktop_entry import app_entry
from native.identity import IDENTITY
from native.metainfo import metainfo_name, metainfo_xml
from native.qt_deps import PACKAGES, check

PACKAGE = "ragdoll"
OPT = Path("/opt/ragdoll")
LAUNCHER = OPT / "venv" / "bin" / "ragdoll"
# What the window needs whatever ldd finds here (Qt's xcb plugin links them all).
_QT_FALLBACK = (
    "libxcb-icccm4",
    "libxcb-keysyms1",
    "libxcb-cursor0",
    "libxcb-image0",
    "libxcb-render-util0",
    "libxcb-shape0",
    "libxkbcommon-x11-0",
    "libgl1",
    "libegl1",
    "libfontconfig1",
    "libdbus-1-3",
    "libglib2.0-0",
)
# What the postinst's environment can reach is chosen by whoever runs apt:
# RAGDOLL_OFFLINE=1 (no PyTorch index: pip's own configuration), RAGDOLL_WHEELS=DIR
# (a folder of wheels, no index at all), RAGDOLL_TORCH=cpu|cuda|cu128…
POSTINST = """#!/bin/sh
set -e
case "$1" in
  configure)
    set -- --prefix /opt/ragdoll --no-integrate --managed-by deb --yes
    if [ -n "$RAGDOLL_OFFLINE" ]; then set -- "$@" --offline; fi
    if [ -n "$RAGDOLL_WHEELS" ]; then set -- "$@" --wheels "$RAGDOLL_WHEELS"; fi
    echo "ragdoll: installing PyTorch and the app's dependencies into /opt/ragdoll/venv" \\
         "(a few minutes; about 2.8 GB with the CPU PyTorch)"
    if ! /usr/bin/python3 -B /opt/ragdoll/bundle/install.py "$@"; then
      echo "ragdoll: the Python environment could not be installed (see above)." >&2
      echo "ragdoll: fix that, then: sudo dpkg --configure ragdoll" >&2
      exit 1
    fi
    if command -v update-desktop-database >/dev/null 2>&1; then
      update-desktop-database -q /usr/share/applications || true
    fi
    ;;
esac
exit 0
"""
PRERM = """#!/bin/sh
set -e
case "$1" in
  remove|upgrade|deconfigure)
    # Every user's window and engine running from /opt/ragdoll: an engine left
    # running under a replaced environment fails at its next import.
    if [ -f /opt/ragdoll/bundle/install.py ]; then
      /usr/bin/python3 -B /opt/ragdoll/bundle/install.py --stop-only --prefix /opt/ragdoll || true
    fi
    ;;
esac
exit 0
"""
POSTRM = """#!/bin/sh
set -e
case "$1" in
  remove|purge)
    # What the postinst made (dpkg only knows the files it unpacked). Users' own
    # folders (~/.local/share/RAGDoll, ~/.config/RAGDoll) are not touched.
    rm -rf /opt/ragdoll/venv /opt/ragdoll/venv.old /opt/ragdoll/venv.trash \\
           /opt/ragdoll/bundle/__pycache__
    rm -f /opt/ragdoll/install-info.json /opt/ragdoll/install-journal.json \\
          /opt/ragdoll/installed-files.json
    rmdir /opt/ragdoll/bundle /opt/ragdoll 2>/dev/null || true
    ;;
esac
exit 0
"""


def qt_depends() -> list[str]:
    """The Debian packages of the libraries Qt's xcb plugin links (from ldd where
    it runs, the fixed list otherwise)."""
    report = check()
    if report.plugin is None or shutil.which("ldd") is None:
        return list(_QT_FALLBACK)
    out = subprocess.run(["ldd", str(report.plugin)], capture_output=True, text=True).stdout
    names = [line.split()[0] for line in out.splitlines() if "=>" in line]
    found = {PACKAGES[n][0] for n in names if n in PACKAGES}
    return sorted(found | set(_QT_FALLBACK))


def control(*, version: str, installed_kb: int, depends: list[str]) -> str:
    spec = load_spec()
    return (
        f"Package: {PACKAGE}\n"
        f"Version: {version}\n"
        "Architecture: all\n"
        f"Maintainer: {spec.publisher} <ragdoll@localhost>\n"
        f"Installed-Size: {installed_kb}\n"
        f"Depends: python3 (>= {spec.python_min}), python3-venv, {', '.join(depends)}\n"
        "Recommends: libnotify-bin\n"
        "Section: utils\n"
        "Priority: optional\n"
        f"Homepage: {spec.homepage}\n"
        f"Description: {IDENTITY.summary}\n"
        " RAGDoll indexes the documents in folders you choose (PDF, Office, OpenDocument,\n"
        " EPUB, HTML, Markdown, text, CSV, RTF, e-mail) and answers questions about them\n"
        " with citations, entirely on this machine.\n"
        " .\n"
        " Installing downloads PyTorch (the CPU build, about 190 MB, from\n"
        " download.pytorch.org; a CUDA build where an NVIDIA driver is present) and the\n"
        " compiled dependencies (about 480 MB, from PyPI) into /opt/ragdoll/venv, about\n"
        " 2.8 GB installed. RAGDOLL_OFFLINE=1 or RAGDOLL_WHEELS=DIR in apt's environment\n"
        " installs without the PyTorch index, or from a folder of wheels.\n"
    )


def sha256_file(*, path: Path) -> Path:
    """path.sha256 in `sha256sum` format, so that `sha256sum -c` checks the download."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    out = path.with_name(path.name + ".sha256")
    out.write_text(f"{digest.hexdigest()}  {path.name}\n", encoding="utf-8")
    return out


def _write(path: Path, text: str, *, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)


def build_deb(*, bundle: Path, out: Path, date: str | None = None) -> Path:
    import time

    if shutil.which("dpkg-deb") is None:
        raise FileNotFoundError("dpkg-deb is not installed (Debian/Ubuntu: apt install dpkg)")
    spec = load_spec()
    version = spec.version
    root = out / f"{PACKAGE}_{version}_all"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(bundle, root / OPT.relative_to("/") / "bundle")
    share = root / "usr" / "share"
    _write(share / "applications" / f"{IDENTITY.app_id}.desktop", app_entry(launcher=LAUNCHER))
    _write(
        share / "metainfo" / metainfo_name(),
        metainfo_xml(version=version, date=date or time.strftime("%Y-%m-%d")),
    )
    icons = spec.icon_png_dir
    for png in sorted(icons.glob(f"*/apps/{spec.app_id}.png")):
        target = share / "icons" / "hicolor" / png.relative_to(icons)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png, target)
    svg = share / "icons" / "hicolor" / "scalable" / "apps" / f"{spec.app_id}.svg"
    svg.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(spec.icon_svg, svg)
    _write(
        share / "doc" / PACKAGE / "copyright",
        f"RAGDoll {version}\nCopyright: {spec.publisher}\nLicense: {spec.license}\n",
    )
    usr_bin = root / "usr" / "bin"
    usr_bin.mkdir(parents=True)
    (usr_bin / "ragdoll").symlink_to(LAUNCHER)  # works once the postinst has run
    for path in root.rglob("*"):
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() or path.suffix == ".sh" else 0o644)
    (root / OPT.relative_to("/") / "bundle" / "install.py").chmod(0o755)
    size_kb = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) // 1024
    debian = root / "DEBIAN"
    debian.mkdir()
    debian.chmod(0o755)
    _write(
        debian / "control",
        control(version=version, installed_kb=size_kb, depends=qt_depends()),
    )
    for name, text in (("postinst", POSTINST), ("prerm", PRERM), ("postrm", POSTRM)):
        _write(debian / name, text, mode=0o755)
    deb = out / f"{PACKAGE}_{version}_all.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    shutil.rmtree(root)
    sha256_file(path=deb)
    return deb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m installer.linux.build_deb")
    parser.add_argument("--bundle", type=Path, required=True, help="a built bundle folder")
    parser.add_argument("--out", type=Path, default=REPO / "dist")
    args = parser.parse_args(argv)
    print(build_deb(bundle=args.bundle, out=args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
