"""The workload of `ragdoll bench pipeline` (RAGDoll §6.1, scaled to this machine).

A generated corpus of maintenance records (text files and PDFs, fixed seed) is ingested
through the real path into a LanceDB store on disk with the bundled MiniLM embedder;
each question asks about one fact of that corpus. Arrivals are a Poisson process over
four intervals of equal length whose rates rise 1 : 2 : 3 : 4, as the paper's 4, 8, 12,
16 requests per minute; the rates themselves are scaled to the service time measured
here, so that the last intervals overload a server that does not batch.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.ingest import WORDS
from bench.ingest_many import wait_for_job
from engine.environ import EngineEnviron

INTERVALS = 4
RATE_STEPS = (1, 2, 3, 4)  # the paper's 4, 8, 12, 16 per minute, as multiples of the first
# The paper's serial baselines take batches of 4·λ with λ per minute and 20-minute
# intervals: the requests expected in a fifth of an interval. Kept as that ratio here.
_ACC_BATCH_SHARE = 4 / 20

_THINGS = ("pump", "valve", "boiler", "filter", "charger", "compressor", "heater", "fan")
_PLACES = ("harbour", "greenhouse", "workshop", "cellar", "ferry", "garage", "attic", "mill")
_PEOPLE = ("Ada", "Bruno", "Chiara", "Dmitri", "Elif", "Farid", "Greta", "Hiro")


@dataclass(frozen=True, kw_only=True)
class Fact:
    doc: int
    sentence: str
    question: str


@dataclass(frozen=True, kw_only=True)
class Arrival:
    index: int
    at_s: float  # seconds after the workload's start
    interval: int  # 0..3
    question: str


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """The arrivals every system sees, and the rates they were drawn at."""

    arrivals: tuple[Arrival, ...]
    interval_s: float
    rates_per_s: tuple[float, ...]
    accelerate_batches: tuple[int, ...]  # 4λ per interval, the serial baseline's batch

    @property
    def window_s(self) -> float:
        return self.interval_s * INTERVALS

    def interval_at(self, t: float) -> int:
        return min(INTERVALS - 1, max(0, int(t // self.interval_s)))


def write_corpus(*, folder: Path, docs: int, facts_per_doc: int, seed: int) -> list[Fact]:
    """Text files and (every third document) PDFs of facts among filler sentences."""
    from fpdf import FPDF

    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    facts: list[Fact] = []
    for d in range(docs):
        place = _PLACES[d % len(_PLACES)]
        lines = [f"Maintenance record {d} for the {place} site."]
        for f in range(facts_per_doc):
            thing = f"{_THINGS[f % len(_THINGS)]} {d * facts_per_doc + f}"
            days, person = rng.randint(3, 90), rng.choice(_PEOPLE)
            sentence = f"The {thing} at the {place} is serviced every {days} days by {person}."
            filler = " ".join(rng.choice(WORDS) for _ in range(rng.randint(25, 45)))
            lines.append(f"{sentence} {filler.capitalize()}.")
            facts.append(
                Fact(
                    doc=d,
                    sentence=sentence,
                    question=f"How often is the {thing} at the {place} serviced, and by whom?",
                )
            )
        if d % 3 == 2:
            pdf = FPDF(format="A4")
            pdf.add_page()
            pdf.set_font("Helvetica", size=10)
            for line in lines:
                pdf.multi_cell(0, 4.6, line)
                pdf.ln(2)
            pdf.output(str(folder / f"record {d:03d}.pdf"))
        else:
            (folder / f"record {d:03d}.txt").write_text("\n\n".join(lines), encoding="utf-8")
    return facts


def ingest(*, root: Path, corpus: Path, embedder: Any) -> tuple[Any, dict[str, Any]]:
    """The corpus through the real ingestion queue into a LanceStore under `root`. Its
    index maintainer does not run in the background: an index build in the middle of a
    run would be timed as retrieval (pipeline_store.py builds what the run searches)."""
    from engine.rag.ingest.jobs import IngestQueue
    from engine.rag.ingest.pipeline import CommitPolicy
    from engine.rag.store.lance_store import LanceStore

    store = LanceStore(
        scorer=EngineEnviron.from_environ().ivf_scorer, folder=root / "index", background=False
    )
    store.ensure_embedder(embedder_id=embedder.info.id, dimension=embedder.info.dimension)
    queue = IngestQueue(
        store=store,
        embedder=lambda: embedder,
        commits=CommitPolicy.with_files(EngineEnviron.from_environ().ingest_commit_files),
    )
    try:
        progress = wait_for_job(queue.submit(paths=[str(corpus)]))
    finally:
        queue.stop()
    if progress.errors:
        raise RuntimeError(f"the generated corpus failed to ingest: {progress.errors[:3]}")
    docs = store.list_documents()
    return store, {"documents": len(docs), "chunks": int(progress.chunks_added)}


def schedule(*, facts: list[Fact], last_rate_per_s: float, window_s: float, seed: int) -> Schedule:
    """Poisson arrivals: four intervals of window_s / 4, rates last_rate · (1, 2, 3, 4) / 4."""
    if last_rate_per_s <= 0 or window_s <= 0:
        raise ValueError("the arrival rate and the window must be positive")
    interval_s = window_s / INTERVALS
    rates = tuple(last_rate_per_s * step / RATE_STEPS[-1] for step in RATE_STEPS)
    rng = np.random.default_rng(seed)
    picks = random.Random(seed)
    arrivals: list[Arrival] = []
    for i, rate in enumerate(rates):
        t, end = i * interval_s, (i + 1) * interval_s
        while True:
            t += float(rng.exponential(1.0 / rate))
            if t >= end:
                break
            fact = picks.choice(facts)
            arrivals.append(
                Arrival(index=len(arrivals), at_s=t, interval=i, question=fact.question)
            )
    batches = tuple(max(1, round(rate * interval_s * _ACC_BATCH_SHARE)) for rate in rates)
    return Schedule(
        arrivals=tuple(arrivals),
        interval_s=interval_s,
        rates_per_s=rates,
        accelerate_batches=batches,
    )
