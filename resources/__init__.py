"""Files shipped with the app (icons, prompts, samples), found relative to this
package so that they resolve the same from a checkout and from an installed bundle."""

from __future__ import annotations

from pathlib import Path


def resource_path(*parts: str) -> Path:
    """Path of a shipped resource, e.g. resource_path("samples", "ragdoll-user-guide.md")."""
    return Path(__file__).resolve().parent.joinpath(*parts)


def sample_collection_dir() -> Path:
    """The folder of sample documents a person can ingest to try RAGDoll."""
    return resource_path("samples")
