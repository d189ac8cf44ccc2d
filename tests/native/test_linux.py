from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from native.icons import SIZES, icons_dir
from native.linux import InstallLayout, integrate, read_manifest, remove_integration
from native.xdg import xdg_dirs


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_DATA_HOME": str(tmp_path / "home" / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "home" / "config"),
    }


def test_xdg_dirs_follow_the_environment_and_ignore_relative_values(tmp_path: Path) -> None:
    dirs = xdg_dirs(env={"HOME": "/h", "XDG_DATA_HOME": "rel", "XDG_CONFIG_HOME": "/c"})
    assert dirs.data_home == Path("/h/.local/share") and dirs.config_home == Path("/c")
    assert dirs.autostart == Path("/c/autostart") and dirs.bin == Path("/h/.local/bin")


def test_the_committed_icons_cover_every_hicolor_size() -> None:
    for size in SIZES:
        png = icons_dir() / "hicolor" / f"{size}x{size}" / "apps" / "ragdoll.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        width, height = (
            int.from_bytes(png.read_bytes()[16:20]),
            int.from_bytes(png.read_bytes()[20:24]),
        )
        assert (width, height) == (size, size)


def test_integrate_writes_everything_and_remove_takes_exactly_that(
    home: dict[str, str], tmp_path: Path
) -> None:
    dirs = xdg_dirs(env=home)
    layout = InstallLayout.default(dirs=dirs)
    # A file of the person's own beside ours must survive the removal.
    mine = dirs.applications / "someone-elses.desktop"
    mine.parent.mkdir(parents=True)
    mine.write_text("[Desktop Entry]\n")
    written = integrate(layout=layout, dirs=dirs)
    entry = dirs.applications / "ragdoll.desktop"
    assert entry in written and str(layout.launcher) in entry.read_text()
    assert (dirs.icons / "48x48" / "apps" / "ragdoll.png").is_file()
    assert (dirs.icons / "scalable" / "apps" / "ragdoll.svg").is_file()
    script = dirs.data_home / "nautilus" / "scripts" / "Ask RAGDoll about this folder"
    assert script.stat().st_mode & stat.S_IXUSR
    assert (dirs.data_home / "kio" / "servicemenus" / "ragdoll-ask-folder.desktop").is_file()
    link = dirs.bin / "ragdoll"
    assert link.is_symlink() and Path(os.readlink(link)) == layout.launcher
    assert layout.uninstall_script.stat().st_mode & stat.S_IXUSR
    assert read_manifest(layout=layout) == written
    # Integrating again (an upgrade) rewrites the same files, no error.
    assert integrate(layout=layout, dirs=dirs) == written

    removed = remove_integration(layout=layout, dirs=dirs)
    assert sorted(removed) == sorted(written)
    assert not any(p.exists() or p.is_symlink() for p in written)
    assert mine.read_text() == "[Desktop Entry]\n"


def test_the_module_entry_point_integrates_into_the_given_environment(
    home: dict[str, str], tmp_path: Path
) -> None:
    app_dir = tmp_path / "home" / "data" / "ragdoll-desktop"
    env = {**os.environ, **home}
    subprocess.run(
        [sys.executable, "-m", "native.linux", "integrate", "--app-dir", str(app_dir)],
        check=True,
        env=env,
        capture_output=True,
    )
    assert (Path(home["XDG_DATA_HOME"]) / "applications" / "ragdoll.desktop").is_file()
    assert (app_dir / "installed-files.json").is_file()


def test_a_failed_integration_step_leaves_no_orphans(home: dict[str, str]) -> None:
    dirs = xdg_dirs(env=home)
    layout = InstallLayout.default(dirs=dirs)
    # The icons cannot be written (a file where the folder must go): the entry, the
    # metainfo and the folder actions were already written when that fails.
    dirs.data_home.mkdir(parents=True)
    (dirs.data_home / "icons").write_text("not a folder")
    with pytest.raises(OSError):
        integrate(layout=layout, dirs=dirs)
    assert not (dirs.applications / "ragdoll.desktop").exists()
    assert not (dirs.data_home / "metainfo" / "org.ragdoll.RAGDoll.metainfo.xml").exists()
    assert not (dirs.data_home / "kio" / "servicemenus" / "ragdoll-ask-folder.desktop").exists()
    assert not layout.uninstall_script.exists() and not layout.manifest.exists()
    left = [p for p in Path(home["HOME"]).rglob("*") if p.is_file()]
    assert left == [dirs.data_home / "icons"]


def test_every_file_is_recorded_before_it_is_written(
    home: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed part-way (no chance to clean up), the manifest still lists every file
    on disk, so the installer's rollback or an uninstall finds them all."""
    dirs = xdg_dirs(env=home)
    layout = InstallLayout.default(dirs=dirs)
    import native.linux as linux

    seen: list[tuple[Path, bool]] = []
    real_copy = linux.shutil.copyfile

    def copy_and_check(src: Path, dst: Path) -> Path:
        seen.append((Path(dst), Path(dst) in read_manifest(layout=layout)))
        return real_copy(src, dst)

    monkeypatch.setattr(linux.shutil, "copyfile", copy_and_check)
    written = integrate(layout=layout, dirs=dirs)
    assert seen and all(recorded for _, recorded in seen)
    assert read_manifest(layout=layout) == written


def test_an_upgrade_removes_files_the_new_version_no_longer_writes(home: dict[str, str]) -> None:
    dirs = xdg_dirs(env=home)
    layout = InstallLayout.default(dirs=dirs)
    written = integrate(layout=layout, dirs=dirs)
    stale = dirs.data_home / "applications" / "ragdoll-old-name.desktop"
    stale.write_text("[Desktop Entry]\n")
    from native.linux import write_manifest

    write_manifest(layout=layout, paths=[*written, stale])
    assert integrate(layout=layout, dirs=dirs) == written
    assert not stale.exists()


def test_the_menu_entry_offers_uninstall_and_every_format(home: dict[str, str]) -> None:
    from engine.rag.ingest.parsers import SUPPORTED_SUFFIXES
    from installer.spec import load_spec

    dirs = xdg_dirs(env=home)
    layout = InstallLayout.default(dirs=dirs)
    integrate(layout=layout, dirs=dirs)
    entry = (dirs.applications / "ragdoll.desktop").read_text()
    assert "Actions=ask-folder;add-samples;uninstall;" in entry
    assert f"Exec={layout.uninstall_script} --gui" in entry
    assert {a.extension for a in load_spec().associations} == set(SUPPORTED_SUFFIXES)
    mimes = next(line for line in entry.splitlines() if line.startswith("MimeType="))
    assert len(mimes.split("=", 1)[1].rstrip(";").split(";")) == 17
    if shutil.which("desktop-file-validate"):
        subprocess.run(
            ["desktop-file-validate", str(dirs.applications / "ragdoll.desktop")], check=True
        )
