"""Downloads a person asks for, apart from libraries that would reach the hub on their own.

The engine process keeps HF_HUB_OFFLINE=1 so that no library (transformers,
sentence-transformers, huggingface_hub) fetches anything by itself: nothing leaves
the machine unless the person asks. A download the person starts from Recommended
models speaks HTTP itself (engine/service/models/download.py) and is refused only when the
*person* said offline: RAGDOLL_OFFLINE=1, or HF_HUB_OFFLINE=1 in the environment they
started RAGDOLL from. Reading HF_HUB_OFFLINE alone in the engine refused every
download: the launcher and the embedder's loading set it for the libraries.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

_TRUE = {"1", "true", "yes", "on"}


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def downloads_refused(env: Mapping[str, str] | None = None) -> bool:
    """The person asked for no downloads: RAGDOLL_OFFLINE when it is set (the engine's
    own start sets it), else HF_HUB_OFFLINE as they set it."""
    env = os.environ if env is None else env
    if "RAGDOLL_OFFLINE" in env:
        return _truthy(env["RAGDOLL_OFFLINE"])
    return _truthy(env.get("HF_HUB_OFFLINE"))


def engine_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for the engine process: the person's choice kept in RAGDOLL_OFFLINE, the
    libraries held offline."""
    out = dict(env)
    out["RAGDOLL_OFFLINE"] = "1" if downloads_refused(env) else "0"
    out["HF_HUB_OFFLINE"] = "1"
    return out
