"""A small disk for one test: a tmpfs of a few MB mounted on a folder, in a mount
namespace of its own (an unprivileged user namespace: no root needed where the
kernel allows them), kept by a holder process so that engines started one after
another see the same disk. Engines run inside it with nsenter; the test reaches
the files on it through /proc/HOLDER/root."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

_UNSHARE = ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]


@dataclass(frozen=True, kw_only=True)
class SmallDisk:
    holder: int  # the pid whose mount namespace holds the disk
    mount: Path

    def inside(self, path: Path) -> Path:
        """`path` as seen from outside the namespace (the disk's files included)."""
        return Path(f"/proc/{self.holder}/root") / Path(path).resolve().relative_to("/")

    def popen(self, argv: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        """A process that sees the small disk (nsenter execs it: its pid is argv's)."""
        enter = [
            "nsenter",
            f"--target={self.holder}",
            "--user",
            "--mount",
            "--preserve-credentials",
        ]
        return subprocess.Popen([*enter, *argv], **kwargs)  # type: ignore[call-overload]

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.inside(self.mount)).free


@contextmanager
def small_disk(*, mount: Path, size_mb: float) -> Iterator[SmallDisk]:
    """Skips the test where user and mount namespaces are not available."""
    if os.name != "posix" or not (shutil.which("unshare") and shutil.which("nsenter")):
        pytest.skip("needs unshare and nsenter (Linux)")
    mount.mkdir(parents=True, exist_ok=True)
    script = 'mount -t tmpfs -o size="$1" tmpfs "$2" && echo ready && exec sleep 86400'
    size = f"{int(size_mb * 1024)}k"
    holder = subprocess.Popen(
        [*_UNSHARE, "sh", "-c", script, "sh", size, str(mount)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != "ready":
            holder.kill()
            _, err = holder.communicate()
            pytest.skip(f"no mount namespace here: {err.strip()}")
        yield SmallDisk(holder=holder.pid, mount=mount)
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()
