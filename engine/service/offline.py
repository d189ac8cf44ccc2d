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

from collections.abc import Mapping

from engine.environ import OFFLINE_ENV, downloads_refused

__all__ = ["downloads_refused", "engine_environment"]


def engine_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for the engine process: the person's choice kept in RAGDOLL_OFFLINE, the
    libraries held offline."""
    out = dict(env)
    out[OFFLINE_ENV] = "1" if downloads_refused(env) else "0"
    out["HF_HUB_OFFLINE"] = "1"
    return out
