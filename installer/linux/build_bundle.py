"""Build the Linux bundle: what `make dist` runs.

    python -m installer.linux.build_bundle --out dist [--no-wheelhouse]

dist/ragdoll-VERSION-linux/ (and a .tar.gz of it) holds:
  install.sh, install.py, torch_choice.py   the one-step installer (stdlib only)
  ragdoll_desktop-VERSION-py3-none-any.whl  the app (engine, window, native/, resources)
  constraints.txt                           the exact versions, without torch
  wheels/                                   the pure-Python dependencies (any Python, any CPU)
  bundle.json, README.txt, ragdoll.png

Binary dependencies (numpy, pyarrow, lancedb, PySide6, …) are not vendored: their
wheels depend on the Python version of the machine that installs, which the bundle
cannot know, so pip fetches them (or finds them in its configured find-links) at
install time, pinned by constraints.txt. PyTorch is chosen for the machine then too.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import re
import shutil
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from installer.linux.build_deb import sha256_file
from installer.spec import REPO, load_spec, pyproject_version

DIST_NAME = "ragdoll-desktop"
# Chosen per machine at install time, never vendored.
_NOT_VENDORED = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")


def constraints_without_torch(*, text: str) -> str:
    kept = [
        line
        for line in text.splitlines()
        if not _NOT_VENDORED.match(canonicalize_name(line.split("==")[0].strip() or "-"))
    ]
    return "\n".join(kept) + "\n"


def runtime_closure(*, root: str = DIST_NAME) -> dict[str, metadata.Distribution]:
    """The installed distributions `root` needs at run time (no extras), by
    canonical name, following markers for this Python; torch and CUDA excluded."""
    env = default_environment()
    found: dict[str, metadata.Distribution] = {}
    followed: set[str] = set()
    todo: list[tuple[str, tuple[str, ...]]] = [(root, ())]
    while todo:
        name, extras = todo.pop()
        key = canonicalize_name(name)
        if key in found or key in followed:
            continue
        if _NOT_VENDORED.match(key) and key != "torch":
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency this environment does not have
        if key == "torch":
            followed.add(key)  # not vendored, but its pure dependencies are
        else:
            found[key] = dist
        for raw in dist.requires or []:
            req = Requirement(raw)
            ok = any(
                req.marker is None or req.marker.evaluate({**env, "extra": extra})
                for extra in (extras or ("",))
            )
            if ok:
                todo.append((req.name, tuple(req.extras)))
    found.pop(canonicalize_name(root), None)
    return found


def is_pure(dist: metadata.Distribution) -> bool:
    """A wheel that installs on any Python 3 and any CPU (its WHEEL file says so)."""
    wheel = dist.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    return (
        "Root-Is-Purelib: true" in wheel
        and bool(tags)
        and all(tag.endswith("-none-any") for tag in tags)
        and any(tag.startswith(("py3", "py2.py3")) for tag in tags)
    )


def pip(*args: str) -> None:
    argv = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    print("+ " + " ".join(argv), flush=True)
    subprocess.run(argv, check=True)


def build_app_wheel(*, into: Path) -> None:
    """setuptools builds in the checkout's build/ folder, so two builds at once (two test
    workers, two `make dist`) trip over each other's files; one at a time, then. And it
    copies the sources over what an earlier build left there without removing a module
    since deleted or moved, which the wheel would then ship: each build starts empty."""
    build_dir = REPO / "build"
    lock = build_dir / ".wheel.lock"
    lock.parent.mkdir(exist_ok=True)
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        for left in build_dir.iterdir():
            if left.is_dir():
                shutil.rmtree(left)
            elif left != lock:
                left.unlink()
        pip("wheel", "--no-deps", "--quiet", "-w", str(into), str(REPO))


def build(*, out: Path, wheelhouse: bool = True, tarball: bool = True, deb: bool = False) -> Path:
    spec = load_spec()
    version = pyproject_version()
    if spec.version != version:
        raise SystemExit(f"app_spec.toml says {spec.version}, pyproject.toml {version}")
    bundle = out / f"{spec.app_id}-{version}-linux"
    shutil.rmtree(bundle, ignore_errors=True)
    bundle.mkdir(parents=True)
    here = Path(__file__).resolve().parent
    for name in ("install.sh", "install.py", "running.py", "transaction.py", "wheel_fit.py"):
        shutil.copy2(here / name, bundle / name)
    shutil.copy2(REPO / "native" / "torch_choice.py", bundle / "torch_choice.py")
    shutil.copy2(
        spec.icon_png_dir / "256x256" / "apps" / f"{spec.app_id}.png", bundle / "ragdoll.png"
    )
    (bundle / "constraints.txt").write_text(
        constraints_without_torch(text=(REPO / "constraints.txt").read_text(encoding="utf-8"))
    )
    # The app's own wheel, built from this checkout (build isolation: no dev tools leak in).
    build_app_wheel(into=bundle)
    pure: list[str] = []
    if wheelhouse:
        closure = runtime_closure()
        pure = sorted(f"{d.metadata['Name']}=={d.version}" for d in closure.values() if is_pure(d))
        (bundle / "wheels").mkdir()
        # `pip wheel`, not `download`: a few (odfpy) exist only as sdists, built here once.
        pip("wheel", "--quiet", "--no-deps", "-w", str(bundle / "wheels"), *pure)
    else:
        (bundle / "wheels").mkdir()
    (bundle / "bundle.json").write_text(
        json.dumps({"name": spec.name, "version": version, "vendored": pure}, indent=2) + "\n"
    )
    (bundle / "README.txt").write_text(
        f"{spec.name} {version} for Linux\n\n"
        "Install: run ./install.sh (or double-click it and choose Run).\n"
        "It needs Python 3.11 or newer with venv (Debian/Ubuntu: apt install python3-venv),\n"
        "and, for the first install, access to PyPI (the compiled dependencies) and to\n"
        "download.pytorch.org (PyTorch's CPU or CUDA build), or a folder of wheels\n"
        "(./install.sh --wheels DIR; docs/install.md says how to fill it).\n"
        "Nothing is installed outside your home folder; no root needed.\n"
        "Remove: ~/.local/share/ragdoll-desktop/uninstall.sh, or Uninstall in the menu\n"
        "entry's right-click menu (keeps your documents).\n"
        "Check the download: sha256sum -c ragdoll-VERSION-linux.tar.gz.sha256\n"
    )
    if tarball:
        archive = out / f"{bundle.name}.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(bundle, arcname=bundle.name)
        print(archive)
        print(sha256_file(path=archive))
    if deb:
        from installer.linux.build_deb import build_deb

        package = build_deb(bundle=bundle, out=out)
        print(package)
        print(package.with_name(package.name + ".sha256"))
    print(bundle)
    return bundle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m installer.linux.build_bundle")
    parser.add_argument("--out", type=Path, default=REPO / "dist")
    parser.add_argument("--no-wheelhouse", action="store_true", help="skip the pure wheels")
    parser.add_argument("--no-tarball", action="store_true")
    parser.add_argument("--deb", action="store_true", help="also build the .deb (dpkg-deb)")
    parser.add_argument(
        "--recipes", type=Path, default=None, help="also render the Windows/macOS recipes here"
    )
    args = parser.parse_args(argv)
    bundle = build(
        out=args.out,
        wheelhouse=not args.no_wheelhouse,
        tarball=not args.no_tarball,
        deb=args.deb and shutil.which("dpkg-deb") is not None,
    )
    if args.recipes is not None:
        from installer.render import render

        for path in render(out=args.recipes, spec=load_spec(), bundle=bundle):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
