"""installer/linux/build_deb.py: the .deb's contents and scripts (quick: built from a
bundle without its wheelhouse). Installing and removing it for real with apt is what
docs/install.md reports; it needs root and minutes."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from installer.linux.build_deb import build_deb

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")


@pytest.fixture(scope="module")
def deb(quick_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_deb(bundle=quick_bundle, out=tmp_path_factory.mktemp("deb"), date="2026-11-24")


def field(deb: Path, name: str) -> str:
    return subprocess.run(
        ["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_package_says_what_it_needs(deb: Path) -> None:
    assert deb.name == "ragdoll_0.1.0_all.deb"
    assert field(deb, "Package") == "ragdoll" and field(deb, "Architecture") == "all"
    depends = field(deb, "Depends")
    for needed in ("python3 (>= 3.11)", "python3-venv", "libxcb-icccm4", "libxcb-keysyms1"):
        assert needed in depends
    assert "download.pytorch.org" in field(deb, "Description")


def test_the_package_holds_the_bundle_and_the_system_wide_desktop_files(
    deb: Path, tmp_path: Path
) -> None:
    subprocess.run(["dpkg-deb", "-R", str(deb), str(tmp_path / "x")], check=True)
    root = tmp_path / "x"
    assert (root / "opt/ragdoll/bundle/install.py").is_file()
    assert (root / "opt/ragdoll/bundle/transaction.py").is_file()
    link = root / "usr/bin/ragdoll"
    assert link.is_symlink() and str(link.readlink()) == "/opt/ragdoll/venv/bin/ragdoll"
    entry = (root / "usr/share/applications/ragdoll.desktop").read_text()
    assert "Exec=/opt/ragdoll/venv/bin/ragdoll open %F" in entry
    assert "uninstall" not in entry  # apt removes a package, not the app itself
    assert (root / "usr/share/metainfo/org.ragdoll.RAGDoll.metainfo.xml").is_file()
    assert (root / "usr/share/icons/hicolor/256x256/apps/ragdoll.png").is_file()
    for script in ("postinst", "prerm", "postrm"):
        path = root / "DEBIAN" / script
        assert path.stat().st_mode & 0o111, script
        subprocess.run(["sh", "-n", str(path)], check=True)
    postinst = (root / "DEBIAN/postinst").read_text()
    assert "--managed-by deb" in postinst and "--no-integrate" in postinst
    assert "rm -rf /opt/ragdoll/venv" in (root / "DEBIAN/postrm").read_text()
    if shutil.which("desktop-file-validate"):
        subprocess.run(
            ["desktop-file-validate", str(root / "usr/share/applications/ragdoll.desktop")],
            check=True,
        )


def test_each_download_has_a_checksum_file_sha256sum_accepts(deb: Path) -> None:
    sums = deb.with_name(deb.name + ".sha256")
    digest = hashlib.sha256(deb.read_bytes()).hexdigest()
    assert sums.read_text() == f"{digest}  {deb.name}\n"
    subprocess.run(["sha256sum", "-c", sums.name], cwd=deb.parent, check=True, capture_output=True)
