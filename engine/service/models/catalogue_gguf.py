"""The GGUF files of the recommended models, with what they cost on this machine.

Kept apart from the catalogue's own entries (resources/models_gguf.json beside
resources/models.json) so that either list can change alone. The executor holds a GGUF
file's layers compressed in every tier (on a CPU in the forms of torch's kernels,
engine/runtime/executor/kernel_forms.py), so each variant gets its own verdict and speed
estimate: the model planned at the sizes it is held in (engine/runtime/planner/stored.py's
`compressed_spec`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.runtime.planner.sizes import format_gib
from engine.wire import GGUFVariantAdvice, ModelAdvice
from resources import resource_path


@dataclass(frozen=True, kw_only=True)
class GGUFVariant:
    model: str  # the catalogue entry's repo id
    repo: str  # the repo holding the GGUF file
    file: str
    quant: str  # Q4_K_M, Q8_0, ...
    bits_per_weight: float


def load_gguf_variants(*, file: Path | None = None) -> tuple[GGUFVariant, ...]:
    """Every GGUF variant; a broken list is a packaging bug, so it raises."""
    path = file or resource_path("models_gguf.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    return tuple(
        GGUFVariant(
            model=str(v["model"]),
            repo=str(v["repo"]),
            file=str(v["file"]),
            quant=str(v["quant"]),
            bits_per_weight=float(v["bits_per_weight"]),
        )
        for v in data["variants"]
    )


def gguf_advice(
    *,
    model: str,
    params: int,
    verdict: str,
    installed: dict[str, Path],
    variants: tuple[GGUFVariant, ...],
    verdict_for: Callable[[GGUFVariant], str] | None = None,
    speed_for: Callable[[GGUFVariant], float | None] | None = None,
) -> list[GGUFVariantAdvice]:
    """The variants of catalogue model `model` (with `params` parameters and the
    planner's `verdict` for it); `installed`: GGUF file name → local path;
    `verdict_for(variant)`: the planner's verdict for the variant held compressed
    (None: the model's own verdict); `speed_for(variant)`: its estimated decode
    tokens/s, put in the note."""
    out = []
    for v in variants:
        if v.model != model:
            continue
        size = int(params * v.bits_per_weight / 8)
        path = installed.get(v.file)
        speed = speed_for(v) if speed_for is not None else None
        pace = f"; about {_pace(speed)} tokens/s here (estimate)" if speed else ""
        out.append(
            GGUFVariantAdvice(
                repo=v.repo,
                file=v.file,
                quant=v.quant,
                file_bytes=size,
                verdict=verdict_for(v) if verdict_for is not None else verdict,
                note=f"{v.quant}: about {format_gib(size)}, held so in memory and on disk{pace}",
                installed_path=str(path) if path else None,
            )
        )
    return out


def installed_gguf_files(
    *,
    variants: tuple[GGUFVariant, ...],
    hub_cache: Path,
    own_folder: Callable[[str], Path] | None = None,
) -> dict[str, Path]:
    """GGUF files of `variants` already on disk, by file name: downloaded by RAGDoll
    (`own_folder(repo)`, the Models dialog's download) or in the Hugging Face cache."""
    found: dict[str, Path] = {}
    for v in variants:
        mine = own_folder(v.repo) / v.file if own_folder is not None else None
        if mine is not None and mine.is_file():
            found[v.file] = mine
            continue
        snapshots = hub_cache / f"models--{v.repo.replace('/', '--')}" / "snapshots"
        if not snapshots.is_dir():
            continue
        for snapshot in snapshots.iterdir():
            candidate = snapshot / v.file
            if candidate.is_file():
                found[v.file] = candidate
    return found


def with_gguf_variants(
    models: list[ModelAdvice],
    *,
    hub_cache: Path | None = None,
    verdict_for: Callable[[GGUFVariant], str] | None = None,
    speed_for: Callable[[GGUFVariant], float | None] | None = None,
    chosen_model: str | None = None,
    own_folder: Callable[[str], Path] | None = None,
) -> list[ModelAdvice]:
    """`models` with each one's GGUF variants attached; a model whose GGUF file is
    `chosen_model` (the model in use) is marked chosen."""
    from engine.runtime.models.resolve import hub_cache as default_hub_cache

    variants = load_gguf_variants()
    installed = installed_gguf_files(
        variants=variants, hub_cache=hub_cache or default_hub_cache(), own_folder=own_folder
    )
    out = []
    for m in models:
        advice = gguf_advice(
            model=m.id,
            params=m.params,
            verdict=m.verdict,
            installed=installed,
            variants=variants,
            verdict_for=verdict_for,
            speed_for=speed_for,
        )
        chosen = m.chosen or any(
            _same_file(v.installed_path, chosen_model) for v in advice if v.installed_path
        )
        out.append(dataclasses.replace(m, gguf_variants=advice, chosen=chosen))
    return out


def _same_file(path: str, chosen_model: str | None) -> bool:
    if not chosen_model or not chosen_model.lower().endswith(".gguf"):
        return False
    chosen = Path(chosen_model).expanduser()
    return chosen.is_file() and chosen.resolve() == Path(path).resolve()


def _pace(tokens_per_s: float) -> str:
    digits = 0 if tokens_per_s >= 10 else 1 if tokens_per_s >= 1 else 2
    return f"{tokens_per_s:.{digits}f}"
