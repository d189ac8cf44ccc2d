"""Recommended models and what the planner says of each on this machine.

The catalogue (resources/models.json) names Hugging Face repos and the bundled
config (resources/model_configs) that sizes each one, so a verdict needs no
download and no network: `plan()` on the cached hardware profile decides "fits on
GPU", "offloaded N%" or "too large".

The expected speed is a roofline estimate for decoding one sequence, not a
measurement. Every decode step reads every weight once, so a step takes at least
the time to move the offloaded weights to the compute tier (disk and PCIe, at the
measured bandwidths where the profile has them) and at least the time for the
compute tier to read its resident weights from its own memory (RAM as the hardware
profile measured it; a nominal figure for GPU memory, which it does not). Streaming overlaps
compute (the executor prefetches), so the step time is the larger of the two.
KV reads, prefill and kernel overheads are left out, which is why it is an upper
bound and the pane calls it an estimate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.paths import Paths
from engine.runtime.hardware.profile import HardwareProfile, load_profile
from engine.runtime.planner import ModelSpec, Placement, StoreSpec, Workload, load_model_spec, plan
from engine.runtime.planner.sizes import format_gib
from engine.wire import ModelAdvice, RecommendedModels, Verdict
from resources import resource_path

# Nominal bandwidths where the profile has no measurement. Deliberately modest
# (a mid-range card, dual-channel DDR4, PCIe 3 x16, a SATA SSD): an estimate that
# promises less than the machine gives disappoints nobody.
NOMINAL_GPU_MEMORY_BYTES_PER_S = 300e9
NOMINAL_UNIFIED_MEMORY_BYTES_PER_S = 100e9
NOMINAL_RAM_BYTES_PER_S = 20e9
NOMINAL_PCIE_BYTES_PER_S = 12e9
NOMINAL_DISK_BYTES_PER_S = 500e6

DOWNLOADED_MODELS_DIR = "models"  # under the data folder; see engine/service/models/download.py


@dataclass(frozen=True, kw_only=True)
class CatalogueEntry:
    id: str
    name: str
    config: str  # a file name (without .json) in resources/model_configs
    # What a download fetches (safetensors weights and tokenizer files), from the
    # sizes the hub lists; the tests hold it to the config's weight bytes.
    download_bytes: int
    licence: str
    description: str

    def config_path(self) -> Path:
        return resource_path("model_configs", f"{self.config}.json")


@dataclass(frozen=True, kw_only=True)
class SpeedEstimate:
    tokens_per_s: float | None
    note: str


def load_catalogue(*, file: Path | None = None) -> tuple[CatalogueEntry, ...]:
    """The recommended models; a broken catalogue is a packaging bug, so it raises."""
    path = file or resource_path("models.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    entries = tuple(
        CatalogueEntry(
            id=str(m["id"]),
            name=str(m["name"]),
            config=str(m["config"]),
            download_bytes=int(m["download_bytes"]),
            licence=str(m["licence"]),
            description=str(m["description"]),
        )
        for m in data["models"]
    )
    if len({e.id for e in entries}) != len(entries):
        raise ValueError(f"{path}: a model id appears twice")
    return entries


def find_entry(*, repo_id: str) -> CatalogueEntry | None:
    return next((e for e in load_catalogue() if e.id == repo_id), None)


def verdict_of(placement: Placement) -> tuple[Verdict, str, int]:
    """(kind, words, offloaded percent of the weights) for one plan."""
    if not placement.fits:
        return "too_large", f"too large: {format_gib(placement.missing_bytes)} missing", 0
    w = placement.weights
    if placement.memory_model == "cpu_only":
        percent = _percent(w.disk, w.total)
        if percent == 0:
            return "ram", "fits in RAM (no GPU)", 0
        return "offloaded", f"offloaded {percent}% to disk (no GPU)", percent
    off = w.disk if placement.memory_model == "unified" else w.cpu + w.disk
    percent = _percent(off, w.total)
    if percent == 0:
        return "gpu", "fits on GPU", 0
    return "offloaded", f"offloaded {percent}%", percent


def estimate_speed(*, placement: Placement, hardware: HardwareProfile) -> SpeedEstimate:
    """Decode tokens/s of one sequence by the roofline in the module docstring."""
    if not placement.fits:
        return SpeedEstimate(tokens_per_s=None, note="does not fit: no speed to expect")
    w = placement.weights
    assumed: list[str] = []
    gpu = hardware.gpu
    disk_bw = hardware.disk.read_bytes_per_s or _assume(assumed, "disk", NOMINAL_DISK_BYTES_PER_S)
    if placement.memory_model == "discrete" and gpu is not None:
        compute_bw = NOMINAL_GPU_MEMORY_BYTES_PER_S
        pcie_bw = gpu.h2d_bytes_per_s or _assume(assumed, "PCIe", NOMINAL_PCIE_BYTES_PER_S)
        # Disk bytes cross PCIe too, behind the slower disk read.
        stream_s = w.cpu / pcie_bw + w.disk / min(disk_bw, pcie_bw)
        resident = w.gpu
    elif placement.memory_model == "unified":
        compute_bw = NOMINAL_UNIFIED_MEMORY_BYTES_PER_S
        stream_s = w.disk / disk_bw
        resident = w.gpu + w.cpu
    else:
        compute_bw = hardware.ram_read_bytes_per_s or _assume(
            assumed, "RAM", NOMINAL_RAM_BYTES_PER_S
        )
        stream_s = w.disk / disk_bw
        resident = w.gpu + w.cpu
    compute_s = resident / compute_bw
    step_s = max(stream_s, compute_s)
    if step_s <= 0:
        return SpeedEstimate(tokens_per_s=None, note="no weights to read")
    bound = "streaming" if stream_s > compute_s else "memory reads"
    streamed = w.cpu + w.disk if placement.memory_model == "discrete" else w.disk
    note = f"estimate: {format_gib(w.total)} of weights read per token"
    if streamed:
        note += f", {format_gib(streamed)} of it streamed"
    note += f"; limited by {bound}"
    note += f"; nominal {', '.join(assumed)} bandwidth" if assumed else "; measured bandwidths"
    return SpeedEstimate(tokens_per_s=1.0 / step_s, note=note)


def advise(
    *,
    entry: CatalogueEntry,
    spec: ModelSpec,
    hardware: HardwareProfile,
    store: StoreSpec,
    workload: Workload,
    installed_path: Path | None = None,
    chosen: bool = False,
) -> ModelAdvice:
    placement = plan(hardware=hardware, model=spec, store=store, workload=workload)
    kind, words, percent = verdict_of(placement)
    speed = estimate_speed(placement=placement, hardware=hardware)
    return ModelAdvice(
        id=entry.id,
        name=entry.name,
        params=spec.parameter_count,
        licence=entry.licence,
        description=entry.description,
        weight_bytes=spec.weight_bytes,
        download_bytes=entry.download_bytes,
        verdict=words,
        verdict_kind=kind,
        offloaded_percent=percent,
        missing_bytes=placement.missing_bytes,
        expected_tokens_per_s=speed.tokens_per_s,
        speed_note=speed.note,
        installed=installed_path is not None or chosen,
        installed_path=str(installed_path) if installed_path else None,
        chosen=chosen,
    )


def recommended(
    *,
    paths: Paths,
    chosen_model: str | None,
    store: StoreSpec,
    workload: Workload | None = None,
    hardware: HardwareProfile | None = None,
    chosen_reranker: str | None = None,
) -> RecommendedModels:
    """Every catalogue model planned on this machine's cached profile (no measuring:
    the answer must come in well under a second), then the rerankers
    (engine/service/models/reranker_catalogue.py)."""
    hardware = hardware or load_profile(paths=paths, measure=False)
    workload = workload or Workload()
    models = []
    specs: dict[str, ModelSpec] = {}
    for entry in load_catalogue():
        spec = load_model_spec(source=entry.config_path())
        specs[entry.id] = spec
        installed = installed_folder(repo_id=entry.id, paths=paths)
        models.append(
            advise(
                entry=entry,
                spec=spec,
                hardware=hardware,
                store=store,
                workload=workload,
                installed_path=installed,
                chosen=is_chosen(repo_id=entry.id, chosen_model=chosen_model, folder=installed),
            )
        )
    from engine.runtime.planner.stored import compressed_spec
    from engine.service.models.catalogue_gguf import GGUFVariant, with_gguf_variants

    placed: dict[str, Placement] = {}

    def placed_for(variant: GGUFVariant) -> Placement:
        # On a CPU the variant is computed in its kernel forms: planned at their sizes.
        if variant.file not in placed:
            held = compressed_spec(
                specs[variant.model],
                bits_per_weight=variant.bits_per_weight,
                name=variant.quant,
                cpu=hardware.gpu is None,
            )
            placed[variant.file] = plan(
                hardware=hardware, model=held, store=store, workload=workload
            )
        return placed[variant.file]

    def verdict_for(variant: GGUFVariant) -> str:
        return verdict_of(placed_for(variant))[1]

    def speed_for(variant: GGUFVariant) -> float | None:
        return estimate_speed(placement=placed_for(variant), hardware=hardware).tokens_per_s

    from engine.service.models.reranker_catalogue import advise_reranker, load_rerankers

    rerankers = []
    for entry in load_rerankers():
        installed = installed_folder(repo_id=entry.id, paths=paths)
        rerankers.append(
            advise_reranker(
                entry=entry,
                hardware=hardware,
                installed_path=installed,
                chosen=is_chosen(repo_id=entry.id, chosen_model=chosen_reranker, folder=installed),
            )
        )
    return RecommendedModels(
        models=with_gguf_variants(
            models,
            verdict_for=verdict_for,
            speed_for=speed_for,
            chosen_model=chosen_model,
            own_folder=lambda repo: download_folder(repo_id=repo, paths=paths),
        )
        + rerankers,
        hardware_note=_hardware_note(hardware),
    )


def download_folder(*, repo_id: str, paths: Paths) -> Path:
    """Where a download of `repo_id` goes: a plain model folder in the data folder."""
    return paths.data / DOWNLOADED_MODELS_DIR / repo_id.replace("/", "--")


def installed_folder(*, repo_id: str, paths: Paths) -> Path | None:
    """A complete local copy: a finished download, or a snapshot in the HF cache."""
    from engine.errors import ModelLoadError
    from engine.runtime.models.resolve import resolve_model_path

    own = downloaded_folder(repo_id=repo_id, paths=paths)
    if own is not None:
        return own
    try:
        return resolve_model_path(model=repo_id, app_cache=paths.cache)
    except (ModelLoadError, OSError, ValueError):
        return None


def downloaded_folder(*, repo_id: str, paths: Paths) -> Path | None:
    """The finished download of `repo_id` in the data folder, if there is one."""
    own = download_folder(repo_id=repo_id, paths=paths)
    return own if _complete(own) else None


def is_chosen(*, repo_id: str, chosen_model: str | None, folder: Path | None) -> bool:
    if not chosen_model:
        return False
    if chosen_model == repo_id:
        return True
    chosen = Path(chosen_model).expanduser()
    return folder is not None and chosen.exists() and chosen.resolve() == folder.resolve()


def _complete(folder: Path) -> bool:
    from engine.service.models.download import COMPLETE_MARKER

    return (folder / COMPLETE_MARKER).is_file() and (folder / "config.json").is_file()


def _percent(part: int, whole: int) -> int:
    if part <= 0 or whole <= 0:
        return 0
    # Never round a real offload down to 0% nor a partial one up to 100%.
    return min(99, max(1, round(100 * part / whole))) if part < whole else 100


def _assume(assumed: list[str], what: str, value: float) -> float:
    assumed.append(what)
    return value


def _hardware_note(h: HardwareProfile) -> str:
    gpu = h.gpu
    where = f"{gpu.name}, {format_gib(gpu.free_bytes)} free" if gpu else "no GPU"
    measured = "measured bandwidths" if h.measured_at else "bandwidths not measured yet"
    return (
        f"Planned for this machine: {where}; {format_gib(h.ram_available_bytes)} RAM "
        f"available; {measured}. Speeds are estimates, not measurements."
    )
