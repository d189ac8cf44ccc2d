"""Words for an ingestion job's pace: how fast it goes and how long is left."""

from __future__ import annotations

from engine.wire import FINAL_STATES, FileNote, IngestProgress

NOTES_SHOWN = 3


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


def work_permille(*, progress: IngestProgress) -> int:
    """How much of the job is done, 0 to 1000: by bytes when the engine counts
    them (a big file is most of the work), else by files."""
    p = progress
    if p.state == "done":
        return 1000
    if p.bytes_total > 0:
        return max(0, min(1000, p.bytes_done * 1000 // p.bytes_total))
    return p.files_done * 1000 // p.files_total if p.files_total > 0 else 0


def counts_line(*, progress: IngestProgress, jobs_waiting: int = 0) -> str:
    """Pages and chunks as they are read and embedded, not only per file done.
    The figures are the job's so far: "pages read", since under "Working on
    policy.pdf" a bare "477 pages" read as that file's (it has 193)."""
    p = progress
    counts = []
    if p.pages_read:
        counts.append(f"{p.pages_read:,} page{'s' if p.pages_read != 1 else ''} read")
    if p.chunks_found > p.chunks_embedded and p.state not in FINAL_STATES:
        counts.append(f"{p.chunks_embedded:,} of {p.chunks_found:,} new chunks embedded")
    counts.append(f"{p.chunks_added:,} chunks added")
    if p.files_skipped:
        counts.append(f"{p.files_skipped} unchanged")
    if p.errors:
        counts.append(f"{len(p.errors)} could not be read")
    if jobs_waiting:
        counts.append(f"{jobs_waiting} more job{'s' if jobs_waiting > 1 else ''} waiting")
    return " · ".join(counts)


def notes_text(*, notes: list[FileNote]) -> str:
    """The first notes about files read ("only the first 100,000 rows were read")."""
    lines = [f"{_base_name(n.path)}: {n.note}" for n in notes[:NOTES_SHOWN]]
    if len(notes) > NOTES_SHOWN:
        lines.append(f"and {len(notes) - NOTES_SHOWN} more notes")
    return "\n".join(lines)


def _base_name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]
