"""Which folder a model name means: a local path, or a snapshot already in the Hugging
Face cache. Nothing here downloads (engine/service/models/download.py does, on request).

The planner, the catalogue and the engine resolve names here; loading the model is
engine/runtime/models/loading.py's part.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from huggingface_hub import snapshot_download

from engine.errors import ModelLoadError

# A repo id is "name" or "org/name" (see huggingface_hub's validate_repo_id).
_REPO_ID = re.compile(r"^(?:[\w.-]+/)?[\w.-]+$")


def resolve_model_path(
    *, model: str, cache_dir: Path | None = None, app_cache: Path | None = None
) -> Path:
    """The folder of a model named by a local path or a Hugging Face repo id.

    Only what is already on disk is considered: a folder with config.json, a .gguf file,
    or a snapshot in the local Hugging Face cache (`cache_dir`, else HF_HUB_CACHE /
    HF_HOME as set now). A GGUF file (or a snapshot of GGUF files, its Q4_K_M first)
    resolves to its companion folder in the app's cache (engine/runtime/models/gguf_file.py):
    `app_cache`, the engine's `Paths.cache`; None (tools, tests) the one `resolve_paths`
    names.
    """
    # One answer for every local path that holds no model (missing, a file, no
    # config.json, a name too long, unreadable): the API must not tell a caller
    # whether some path on this machine exists.
    no_model = ModelLoadError(
        f"No model folder at {model}: the folder does not exist or holds no config.json."
    )
    local = Path(model).expanduser()
    try:
        is_gguf = local.is_file() and local.suffix.lower() == ".gguf"
        is_folder = local.is_dir() and (local / "config.json").is_file()
    except OSError:  # e.g. [Errno 36] File name too long
        is_gguf = is_folder = False
    if is_gguf:
        return _gguf_folder(gguf_path=local, app_cache=app_cache)
    if is_folder:
        check_model_folder(local)
        return local.resolve()
    # "./x" matches the repo-id pattern but is clearly meant as a path.
    if not _REPO_ID.match(model) or model.startswith(".") or local.is_absolute():
        raise no_model
    cache = cache_dir if cache_dir is not None else _hub_cache()
    try:
        snapshot = _cached_snapshot(repo_id=model, cache=cache)
    except OSError:  # a name too long for a folder is in no cache
        snapshot = None
    if snapshot is not None and not (snapshot / "config.json").is_file():
        return _gguf_folder(gguf_path=_pick_gguf(snapshot), app_cache=app_cache)
    if snapshot is None:
        raise ModelLoadError(
            f"Model {model!r} was not found: it is neither a folder on this computer nor "
            f"downloaded into the Hugging Face cache at {cache}. "
            "Give the path of a model folder, or download the model first."
        )
    check_model_folder(snapshot)
    return snapshot


def hub_cache() -> Path:
    """The Hugging Face hub cache folder as the environment sets it now."""
    return _hub_cache()


def _hub_cache() -> Path:
    # Read at call time: huggingface_hub.constants freezes the environment at import.
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "huggingface" / "hub"


def _cached_snapshot(*, repo_id: str, cache: Path) -> Path | None:
    try:
        return Path(snapshot_download(repo_id, cache_dir=cache, local_files_only=True))
    except Exception:
        # Offline lookups fail for many reasons (no refs/main, malformed id, missing
        # files); scanning the snapshots folder below still finds a usable copy.
        pass
    snapshots = cache / f"models--{repo_id.replace('/', '--')}" / "snapshots"
    if not snapshots.is_dir():
        return None
    candidates = [
        s for s in snapshots.iterdir() if (s / "config.json").is_file() or any(s.glob("*.gguf"))
    ]
    if not candidates:
        return None
    return max(candidates, key=lambda s: s.stat().st_mtime)


def _gguf_folder(*, gguf_path: Path, app_cache: Path | None) -> Path:
    from engine.paths import resolve_paths
    from engine.runtime.models.gguf_file import companion_folder

    cache = app_cache if app_cache is not None else resolve_paths().cache
    return companion_folder(gguf_path=gguf_path, cache=cache)


# Which file of a repo holding several quantizations: the common 4-bit default first.
_GGUF_PREFERENCE = ("q4_k_m", "q4_0", "q8_0", "f16")


def _pick_gguf(snapshot: Path) -> Path:
    files = sorted(p for p in snapshot.glob("*.gguf") if "mmproj" not in p.name.lower())
    if not files:
        raise ModelLoadError(f"{snapshot} has neither config.json nor a .gguf file.")
    for wanted in _GGUF_PREFERENCE:
        for file in files:
            if wanted in file.name.lower():
                return file
    return files[0]


def check_model_folder(folder: Path) -> None:
    if (folder / "gguf_source.json").is_file() and (folder / "config.json").is_file():
        return  # a GGUF file's companion folder (engine/runtime/models/gguf_file.py)
    if not (folder / "config.json").is_file():
        raise ModelLoadError(f"{folder} is not a model folder: it has no config.json.")
    if not any(folder.glob("*.safetensors")):
        raise ModelLoadError(
            f"{folder} has no .safetensors weights. RAGDoll only loads safetensors, "
            "because other weight formats can run code when they are opened."
        )


def display_name(*, model_path: Path) -> str:
    """'org/name' for a model in the Hugging Face cache, else the folder's name."""
    source = model_path / "gguf_source.json"
    if source.is_file():  # a GGUF file's companion folder: the file's own name
        return Path(json.loads(source.read_text(encoding="utf-8"))["file"]).name
    parent = model_path.parent
    if parent.name == "snapshots" and parent.parent.name.startswith("models--"):
        return parent.parent.name.removeprefix("models--").replace("--", "/")
    return model_path.name
