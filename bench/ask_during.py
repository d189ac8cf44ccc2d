"""`ragdoll bench ingest --parts ask-during`: questions asked while a long PDF
of real manual pages is being embedded, through the real engine process.

An engine is started as the app starts it (`python -m engine`, its own
RAGDOLL_HOME in a temporary folder, no language model: extractive answers), a
few real manuals go in, then whole answers (`/v1/ask`, the stream read to its
end) and searches (`/v1/search`) are timed idle, then again while a PDF of
`pages` real pages (PDFs of a folder concatenated with PDFium, every page
different) is being embedded; medians. The engine's process id is written to
`engine.pid` in the bench folder, so that `py-spy dump` can look at a slow one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import time
from itertools import zip_longest
from pathlib import Path
from typing import Any

# Every question is asked once. The relevance gate keeps the sentence vectors of
# earlier answers (engine/rag/answer/sentence_memo.py): a question asked again finds
# its passages' sentences embedded and costs little more than a search, so the
# bench timed the memo, not the answer, while it repeated its warm-up questions.
# New questions on the same manuals may still meet sentences an earlier one
# embedded, as a person's questions do; the idle and the busy phase take
# alternate questions of each topic, so neither gets the warmer memo by design.
WARM_UP = (
    "How are maintainer scripts installed into the package?",
    "What does git bisect do when a commit cannot be tested?",
    "How do I set the default shell options in bash?",
    "Which fields are mandatory in a debian/control file?",
    "How does apt pin a package to a release?",
)
_APT = (  # apt-guide.txt
    "How do I upgrade every installed package with apt-get?",
    "What does apt-get dist-upgrade do that upgrade does not?",
    "How can I remove a package together with its configuration files?",
    "Where does apt keep the list of package sources?",
    "How do I search the package cache for a program by name?",
    "What does apt-get clean delete from the local archive?",
    "How do I install a specific version of a package?",
    "How does apt handle a package that is held back?",
    "What does apt-get check verify?",
    "How do I fix broken dependencies after an interrupted install?",
    "How can I download a package's source code with apt?",
    "What is the purpose of the sources.list deb-src line?",
)
_BISECT = (  # git-bisect.txt
    "How do I start a bisect session between a good and a bad commit?",
    "How can I run a script automatically at each bisect step?",
    "How do I end a bisect and go back to the original branch?",
    "Can I use words other than good and bad during a bisect?",
    "How do I see the log of the bisect so far?",
    "How can I replay a bisect log after a mistake?",
    "What exit code tells git bisect run to skip a commit?",
    "How do I limit a bisect to changes in certain paths?",
)
_MAINT = (  # maint-guide.pdf
    "How do I create the initial debian directory for a new package?",
    "What goes into the debian/changelog file?",
    "How do I build a package with debuild?",
    "What is the role of the debian/rules file?",
    "How do I check a package for policy problems with lintian?",
    "What does the debian/copyright file have to contain?",
    "How should a patch to the upstream source be kept?",
    "How do I upload a package to the Debian archive?",
    "What is a watch file used for?",
    "How do I name the upstream tarball for a Debian package?",
)
# The three manuals' questions in turn, so that any first 2n of them cover all three.
TIMED = tuple(q for row in zip_longest(_APT, _BISECT, _MAINT) for q in row if q is not None)
SEED_FILES = ("apt-guide.txt", "git-bisect.txt", "maint-guide.pdf")


def long_pdf(*, sources: list[Path], pages: int, out: Path) -> int:
    """A PDF of `pages` real pages: the source PDFs' pages in turn, each once
    while they last (then again from the first)."""
    import pypdfium2 as pdfium

    target = pdfium.PdfDocument.new()
    while len(target) < pages:
        before = len(target)
        for file in sources:
            if len(target) >= pages:
                break
            try:
                src = pdfium.PdfDocument(str(file))
            except pdfium.PdfiumError:
                continue  # an encrypted or broken one: the next
            try:
                take = min(len(src), pages - len(target))
                target.import_pages(src, list(range(take)))
            finally:
                src.close()
        if len(target) == before:
            raise RuntimeError("no readable pages in the source PDFs")
    target.save(str(out))
    count = len(target)
    target.close()
    return count


def phase_questions(*, count: int) -> tuple[list[str], list[str]]:
    """`count` questions for the idle phase and `count` others for the busy one,
    none of them a warm-up question: alternate questions of `TIMED` (each
    topic's in turn), so both phases ask about the same manuals."""
    if 2 * count > len(TIMED):
        raise ValueError(f"{count} questions a phase: the bench has {len(TIMED)} in all")
    return list(TIMED[0 : 2 * count : 2]), list(TIMED[1 : 2 * count : 2])


def pdf_sources(folder: Path) -> list[Path]:
    return sorted(f for f in folder.rglob("*.pdf") if f.is_file())


def _time_ask(client: Any, question: str) -> float:
    started = time.perf_counter()
    client.ask(question=question, k=5)
    return time.perf_counter() - started


def _time_search(client: Any, question: str) -> float:
    started = time.perf_counter()
    client.search(query=question, k=5)
    return time.perf_counter() - started


def _wait(client: Any, job_id: str, *, until: Any, timeout_s: float = 3600) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        progress = client.ingest_progress(job_id=job_id)
        if until(progress):
            return progress
        time.sleep(0.5)
    raise RuntimeError(f"the ingestion job {job_id} did not get there in {timeout_s:.0f} s")


def ask_during(
    *, root: Path, corpus: Path, pages: int, pdf_from: Path | None, rounds: int, say: Any
) -> dict[str, Any]:
    from engine.environ import HOME_ENV
    from engine.paths import resolve_paths
    from engine.service.client import EngineClient

    home = root / "home"
    saved = os.environ.get(HOME_ENV)
    os.environ[HOME_ENV] = str(home)
    try:
        paths = resolve_paths()
        client = EngineClient.connect(paths=paths, start=True, wait_s=120)
    finally:
        if saved is None:
            os.environ.pop(HOME_ENV, None)
        else:
            os.environ[HOME_ENV] = saved
    try:
        (root / "engine.pid").write_text(str(client.status().pid))
        seed = root / "seed"
        seed.mkdir()
        for name in SEED_FILES:
            if (corpus / name).exists():
                shutil.copy(corpus / name, seed / name)
        seeded = client.add_paths(paths=[str(seed)])
        _wait(client, seeded.job_id, until=lambda p: p.state in ("done", "failed", "cancelled"))
        for q in WARM_UP:  # warm-up: the first answer loads what answers need
            client.ask(question=q, k=5)
        idle, during = phase_questions(count=len(WARM_UP) * rounds)
        idle_ask = [_time_ask(client, q) for q in idle]
        idle_search = [_time_search(client, q) for q in idle]
        big = root / "big"
        big.mkdir()
        sources = pdf_sources(pdf_from or corpus)
        made = long_pdf(sources=sources, pages=pages, out=big / "manuals.pdf")
        say(f"a PDF of {made} real pages written; asking while it is embedded…")
        job = client.add_paths(paths=[str(big)])
        _wait(client, job.job_id, until=lambda p: p.chunks_embedded > 0 or p.state != "running")
        during_ask, during_search, embedding = [], [], []
        first = client.ingest_progress(job_id=job.job_id)
        window_started = time.perf_counter()
        for q in during:
            if client.ingest_progress(job_id=job.job_id).state != "running":
                break
            during_ask.append(_time_ask(client, q))
            during_search.append(_time_search(client, q))
            after = client.ingest_progress(job_id=job.job_id)
            # Still embedding: running, with chunks found and not yet embedded.
            running = after.state == "running"
            embedding.append(running and after.chunks_embedded < after.chunks_found)
            time.sleep(1.0)
        last = client.ingest_progress(job_id=job.job_id)
        window_s = time.perf_counter() - window_started
        client.cancel_ingest(job_id=job.job_id)
    finally:
        with contextlib.suppress(Exception):  # the engine may be gone already
            client.shutdown()
        client.close()
    return {
        "ask_pdf_pages": made,
        "ask_pdf_chunks_found": last.chunks_found,
        "ask_pdf_chunks_embedded_by_the_end": last.chunks_embedded,
        # What the questions cost ingestion: its pace while they were asked.
        "ingest_chunks_per_s_while_asking": round(
            (last.chunks_embedded - first.chunks_embedded) / window_s, 2
        ),
        "ingest_nice": os.environ.get("RAGDOLL_INGEST_NICE", "10 (default)"),
        **_medians("ask", idle_ask, during_ask),
        **_medians("search", idle_search, during_search),
        "ask_during_samples": len(during_ask),
        "ask_during_all_while_embedding": all(embedding),
        # The engine's own choice for ingestion's chunks, from its log (the
        # bench's process never ingests here).
        "engine_ingest_embedder": engine_ingest_embedder(log=paths.engine_log),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def engine_ingest_embedder(*, log: Path) -> str:
    """ "int8" when the engine's log says ingestion embedded in int8, else "float"."""
    from engine.rag.ingest.int8_embedder import IN_USE_MESSAGE

    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown (no engine log)"
    return "int8" if IN_USE_MESSAGE in text else "float"


def _medians(name: str, idle: list[float], during: list[float]) -> dict[str, Any]:
    idle_s = statistics.median(idle)
    during_s = statistics.median(during) if during else None
    return {
        f"{name}_idle_median_s": round(idle_s, 3),
        f"{name}_during_median_s": round(during_s, 3) if during_s else None,
        f"{name}_during_max_s": round(max(during), 3) if during else None,
        f"{name}_during_ratio": round(during_s / idle_s, 2) if during_s else None,
    }
