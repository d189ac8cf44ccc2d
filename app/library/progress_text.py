"""Words for an ingestion job's pace: how fast it goes and how long is left."""

from __future__ import annotations

from engine.wire import FINAL_STATES, IngestProgress


def rate_text(*, progress: IngestProgress) -> str:
    """Files per second, or chunks per second when files are slow (big PDFs):
    whichever reads as a number a person can follow."""
    if progress.files_per_s >= 0.1 or (progress.files_per_s > 0 and progress.chunks_per_s <= 0):
        return f"{_number(progress.files_per_s)} files/s"
    if progress.chunks_per_s > 0:
        return f"{_number(progress.chunks_per_s)} chunks/s"
    return ""


def eta_text(*, eta_s: float | None) -> str:
    if eta_s is None or eta_s < 0:
        return ""
    if eta_s < 1:
        return "almost done"
    if eta_s < 60:
        return f"about {round(eta_s)} s left"
    minutes = eta_s / 60
    if minutes < 60:
        return f"about {round(minutes)} min left"
    hours, rest = divmod(round(minutes), 60)
    return f"about {hours} h {rest} min left" if rest else f"about {hours} h left"


def pace_line(*, progress: IngestProgress) -> str:
    """One line under the bar: paused, or the rate and what is left."""
    if progress.state in FINAL_STATES:
        return ""
    if progress.paused:
        return "Paused: the engine finishes the file at hand, then waits for Resume."
    parts = [rate_text(progress=progress), eta_text(eta_s=progress.eta_s)]
    return " · ".join(p for p in parts if p)


def _number(value: float) -> str:
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"
