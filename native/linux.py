"""Linux desktop integration of an installed RAGDoll: write it, record it, remove it.

`integrate` writes the .desktop entry, the AppStream metainfo, the hicolor icons,
the file-manager actions, the `ragdoll` link in ~/.local/bin and the uninstall
script. Each file is recorded in the manifest before it is written, so that an
uninstall, or the installer's rollback after a failure at any point, removes exactly
what was written and nothing else.
Run by the bundle's installer as `python -m native.linux integrate --app-dir DIR`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from native import desktop_entry
from native.icons import icons_dir
from native.identity import IDENTITY
from native.metainfo import metainfo_name, metainfo_xml
from native.xdg import XdgDirs, xdg_dirs

APP_DIR_NAME = "ragdoll-desktop"
MANIFEST = "installed-files.json"
INSTALL_INFO = "install-info.json"  # written by the bundle's install.py on every OS


@dataclass(frozen=True, kw_only=True)
class InstallLayout:
    """Where an installed copy lives: a private environment under the data folder."""

    app_dir: Path

    @property
    def venv(self) -> Path:
        return self.app_dir / "venv"

    @property
    def launcher(self) -> Path:
        return self.venv / "bin" / "ragdoll"

    @property
    def manifest(self) -> Path:
        return self.app_dir / MANIFEST

    @property
    def uninstall_script(self) -> Path:
        return self.app_dir / "uninstall.sh"

    @classmethod
    def default(cls, *, dirs: XdgDirs) -> InstallLayout:
        return cls(app_dir=dirs.data_home / APP_DIR_NAME)


def uninstall_script(*, launcher: Path) -> str:
    quoted = "'" + str(launcher).replace("'", "'\\''") + "'"
    return "\n".join(
        [
            "#!/bin/sh",
            "# Removes RAGDoll. Your documents are never touched; you choose whether the",
            "# index goes too (--keep-index / --remove-index; asked when not given).",
            f'exec {quoted} uninstall "$@"',
            "",
        ]
    )


def integration_files(*, layout: InstallLayout, dirs: XdgDirs) -> dict[Path, tuple[str, bool]]:
    """Every text file `integrate` writes: path -> (text, executable)."""
    exe = layout.launcher
    app_id = IDENTITY.app_id
    entry = desktop_entry.app_entry(launcher=exe, uninstaller=layout.uninstall_script)
    return {
        dirs.applications / f"{app_id}.desktop": (entry, False),
        dirs.data_home / "metainfo" / metainfo_name(): (
            metainfo_xml(version=_version(), date=time.strftime("%Y-%m-%d")),
            False,
        ),
        dirs.data_home / "kio" / "servicemenus" / f"{app_id}-ask-folder.desktop": (
            desktop_entry.kde_service_menu(launcher=exe),
            True,  # Plasma 6 only runs executable service menus
        ),
        dirs.data_home / "nemo" / "actions" / f"{app_id}-ask-folder.nemo_action": (
            desktop_entry.nemo_action(launcher=exe),
            False,
        ),
        dirs.data_home / "nautilus" / "scripts" / IDENTITY.ask_folder_label: (
            desktop_entry.nautilus_script(launcher=exe),
            True,
        ),
        layout.uninstall_script: (uninstall_script(launcher=exe), True),
    }


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("ragdoll-desktop")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def integrate(*, layout: InstallLayout, dirs: XdgDirs, icons: Path | None = None) -> list[Path]:
    """Write the desktop integration for `layout`; returns (and records) every path.

    A failure part-way removes what this run added and leaves the manifest as it was,
    then raises; files of an earlier version that this one no longer writes go."""
    icons = icons or icons_dir()
    previous = read_manifest(layout=layout)
    written: list[Path] = []

    def record(path: Path) -> Path:
        written.append(path)
        write_manifest(layout=layout, paths=list(dict.fromkeys([*previous, *written])))
        return path

    try:
        _write_all(layout=layout, dirs=dirs, icons=icons, record=record)
    except OSError:
        for path in written:
            if path not in previous:
                _unlink(path)
        if previous:
            write_manifest(layout=layout, paths=previous)
        else:
            layout.manifest.unlink(missing_ok=True)
        raise
    for path in previous:
        if path not in written:
            _unlink(path)
    write_manifest(layout=layout, paths=written)
    refresh_caches(dirs=dirs)
    return written


def _write_all(
    *, layout: InstallLayout, dirs: XdgDirs, icons: Path, record: Callable[[Path], Path]
) -> None:
    sources = sorted((icons / "hicolor").glob(f"*/apps/{IDENTITY.app_id}.png"))
    if not sources:
        raise FileNotFoundError(f"no hicolor PNGs under {icons}; run python -m native.icons")
    for path, (text, executable) in integration_files(layout=layout, dirs=dirs).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        record(path).write_text(text, encoding="utf-8")
        if executable:
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    copies = [(png, dirs.icons / png.relative_to(icons / "hicolor")) for png in sources]
    svg = f"{IDENTITY.app_id}.svg"
    copies.append((icons / svg, dirs.icons / "scalable" / "apps" / svg))
    for source, target in copies:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, record(target))
    link = dirs.bin / "ragdoll"
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    record(link).symlink_to(layout.launcher)


def _unlink(path: Path) -> None:
    path.unlink(missing_ok=True)


def write_manifest(*, layout: InstallLayout, paths: list[Path]) -> None:
    layout.app_dir.mkdir(parents=True, exist_ok=True)
    body = {"app_dir": str(layout.app_dir), "files": [str(p) for p in paths]}
    layout.manifest.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


def read_manifest(*, layout: InstallLayout) -> list[Path]:
    try:
        body = json.loads(layout.manifest.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as e:
        raise ValueError(f"{layout.manifest}: unreadable install manifest ({e})") from e
    return [Path(p) for p in body.get("files", [])]


def remove_integration(*, layout: InstallLayout, dirs: XdgDirs) -> list[Path]:
    """Remove the files the manifest lists (only those); returns what was removed."""
    removed = []
    for path in read_manifest(layout=layout):
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
    refresh_caches(dirs=dirs)
    return removed


def refresh_caches(*, dirs: XdgDirs) -> None:
    """Tell the desktop about new entries and icons, where its tools are installed."""
    commands = (
        ["update-desktop-database", "-q", str(dirs.applications)],
        ["gtk-update-icon-cache", "-q", "-t", "-f", str(dirs.icons)],
    )
    for argv in commands:
        if shutil.which(argv[0]) and Path(argv[-1]).is_dir():
            subprocess.run(argv, check=False, capture_output=True, timeout=60)


def installed_layout(*, env: dict[str, str] | None = None) -> InstallLayout | None:
    """The installed copy this interpreter runs from, if it is one."""
    prefix = Path(sys.prefix)
    if prefix.name == "venv" and (prefix.parent / INSTALL_INFO).exists():
        return InstallLayout(app_dir=prefix.parent)
    layout = InstallLayout.default(dirs=xdg_dirs(env=env))
    return layout if (layout.app_dir / INSTALL_INFO).exists() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m native.linux")
    parser.add_argument("action", choices=["integrate", "remove"])
    parser.add_argument("--app-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    dirs = xdg_dirs(env=dict(os.environ))
    layout = InstallLayout(app_dir=args.app_dir.resolve())
    if args.action == "integrate":
        try:
            written = integrate(layout=layout, dirs=dirs)
        except OSError as e:
            print(
                f"desktop integration failed, nothing of it was left: {e.strerror or e}: "
                f"{e.filename or ''}",
                file=sys.stderr,
            )
            return 1
        for path in written:
            print(f"  {path}")
    else:
        for path in remove_integration(layout=layout, dirs=dirs):
            print(f"  removed {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
