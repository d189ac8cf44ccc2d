"""Which ranker re-orders each question's candidates, from the settings' `reranker`.

- None: retrieval's own order (the default);
- "model": the language model in use (engine/rag/answer/model_ranker.py), none in
  extractive mode;
- anything else: a cross-encoder from a local folder, the Models dialog's downloads
  or the Hugging Face cache (engine/rag/answer/reranker.py), loaded once and kept while
  the setting names it, on the device the planner picks for its size
  (engine/service/models/reranker_catalogue.py).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from engine.paths import Paths
from engine.rag.answer.model_ranker import MODEL_RANKER, ModelRanker
from engine.rag.answer.reranker import CandidateRanker, Reranker

if TYPE_CHECKING:
    from engine.rag.answer.in_use import ModelInUse

_NONE = ("", "none", "off")


def setting_of(name: str | None, *, paths: Paths | None = None) -> str | None:
    """The setting a person's choice means: None for "none"/"off"/"", "model" as it
    is, a local folder with its home expanded, a repo id the Models dialog downloaded
    (with `paths`) as its folder, any other Hugging Face id as given."""
    name = (name or "").strip()
    if name.lower() in _NONE:
        return None
    if name.lower() == MODEL_RANKER:
        return MODEL_RANKER
    local = Path(name).expanduser()
    if local.exists():
        return str(local.resolve())
    if paths is not None:
        from engine.service.models.catalogue import downloaded_folder

        own = downloaded_folder(repo_id=name, paths=paths)
        if own is not None:
            return str(own)
    return name


def device_for(*, name: str, paths: Paths | None) -> str:
    """Where the planner puts cross-encoder `name` (engine/service/models/reranker_catalogue.py);
    the CPU when its size or the machine's profile cannot be read."""
    if paths is None:
        return "cpu"
    from engine.errors import ModelLoadError
    from engine.runtime.hardware.profile import load_profile
    from engine.runtime.models.resolve import resolve_model_path
    from engine.service.models.reranker_catalogue import reranker_device, size_of_config

    try:
        app_cache = paths.cache if paths is not None else None
        size = size_of_config(resolve_model_path(model=name, app_cache=app_cache) / "config.json")
        hardware = load_profile(paths=paths, measure=False)
    except (ModelLoadError, OSError, ValueError, KeyError, TypeError):
        return "cpu"
    return reranker_device(hardware=hardware, size=size).device


class RankerChoice:
    """The cross-encoder is loaded once per name (about 90 MB, seconds on a CPU)."""

    def __init__(self, *, paths: Paths | None = None) -> None:
        self._cross: Reranker | None = None
        self._lock = threading.Lock()
        self._paths = paths  # the hardware profile and the downloads live there

    def current(
        self, *, setting: str | None, model: ModelInUse | None, model_lock: threading.Lock
    ) -> CandidateRanker | None:
        if setting == MODEL_RANKER:  # sharing the lock of the engine's other model runs
            # A model on a server gives no likelihoods over its OpenAI API.
            if model is None or model.remote:
                return None
            return ModelRanker(answerer=model.answerer, lock=model_lock)  # type: ignore[arg-type]
        if not setting:
            return None
        return self.cross_encoder(setting)

    def cross_encoder(self, name: str) -> Reranker:
        """The cross-encoder `name`, loaded now unless it is the one kept. Raises
        ModelLoadError (a name that does not load is never kept)."""
        with self._lock:
            if self._cross is None or self._cross.info.id != name:
                self._cross = Reranker(model=name, device=device_for(name=name, paths=self._paths))
            return self._cross
