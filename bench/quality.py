"""`ragdoll bench quality`: does the right page come back, and does the answer state it?

Over the real documents `bench/real_docs.py` fetches (Debian manuals as PDF,
HTML and text; nobody on the project wrote them), with the questions of
`quality_set.json`: each written as a user asks, with its file, page(s) and a short
string the answer must contain, plus near-topic questions the collection does not
answer. The set has five splits: `tune` and `tune2` (what settings were chosen on;
tune2 was written later, on pages no other question uses, to widen what tuning sees),
`held`, `held2` and `held3` (never tuned on; held2 and held3 were written later, blind,
on pages no other question uses); every figure is reported per split.

The corpus goes in through the product's path (the ingest queue, the parsers, the
chunker, the bundled embedder, LanceDB on disk); each question through the serving
pipeline's retrieval and relevance gate (`gated_retrieve_batch`), as `ragdoll ask`
without a model. Reported:
- hit@1, hit@3 and MRR of the right file and page among the citations (top 5);
- the share of extractive answers (the quoted sentences) containing the answer string;
- refusals: the share of unanswerable questions refused (recall), of refusals that
  were unanswerable (precision), and of answerable questions refused.

`--set blind` asks the blind multilingual set instead (`blind_set.json` over the corpus of
`bench/blind_docs.py`: Debian documents in German, French, Spanish and English the
project was never tuned on; its second part, split `blind2`, in Italian and Portuguese),
each language reported on its own row; `--split blind2` asks one part alone. Its third
part, split `cross`, asks in another language than the document that answers
(`doc_language`): reported as its own row, then per question language (`cross asks en`)
and per document language (`cross on de`); the per-language rows of the other parts
leave it out. Its fourth part, split `blind3` (`--split blind3`), over documents in Dutch,
Polish and Italian new to the corpus, asks most questions in the document's language and
some in another (those with a `doc_language`, reported with the cross-language rows). Its
fifth part, split `blind4` (`--split blind4`), is built the same way over documents in
Czech, Russian and Swedish new to the corpus, its sixth, split `blind5`
(`--split blind5`), over documents in German, Spanish and French new to the corpus, and
its seventh, split `blind6` (`--split blind6`), over documents in Slovak, Ukrainian and
Bulgarian, each the close sister of a language the corpus has (Czech, Russian), its
eighth, split `blind7` (`--split blind7`), over documents in German, French, Spanish and
Simplified Chinese new to the corpus, and its ninth, split `blind8` (`--split blind8`),
over documents in Japanese, Korean, Vietnamese and Indonesian, none of them a language an
earlier part asked in.
With `--model PATH` (a folder or a .gguf), the model also writes an answer to every
question the gate lets through, judged as bench/quality_model.py says, per split.
`--limit N` asks each split's first N answerable questions and a quarter as many
unanswerable ones (a model's answers take a while on a CPU); questions about files
the corpus folder lacks are not asked.

`--index DIR` keeps the ingested index there and reuses it on the next run (the
corpus takes several minutes to ingest on 2 cores); `--quick` asks a small slice: of
`tune` and `held` (what CI runs), or of the one split `--split` names.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.rag.answer.generative import GenerativeAnswerer
    from engine.rag.answer.reranker import CandidateRanker
    from engine.rag.answer.word_languages import Ordinary

from bench.answer_match import contains
from engine.environ import EngineEnviron

SET_FILE = Path(__file__).with_name("quality_set.json")
BLIND_SET_FILE = Path(__file__).with_name("blind_set.json")
# --quick ingests only these (small) files and asks only their questions, with a few
# unanswerable ones: minutes, not the half hour the whole corpus takes on 2 cores.
QUICK_FILES = (
    "git-bisect.txt",
    "apt-guide.txt",
    "sqlite-createtable.html",
    "git-rebase.html",
    "latex-clsguide.pdf",
)
QUICK_UNANSWERABLE = 3  # per split
TOP_K = 5  # citations per answer, as the chat asks for
SPLITS = (
    "tune",
    "tune2",
    "held",
    "held2",
    "held3",
    "blind",
    "blind2",
    "cross",
    "blind3",
    "blind4",
    "blind5",
    "blind6",
    "blind7",
    "blind8",
)
TUNED_ON = ("tune", "tune2")
# Never tuned on: no fit or tuning list may read them.
HELD_OUT = tuple(split for split in SPLITS if split not in TUNED_ON)


@dataclass(frozen=True, kw_only=True)
class QualityQuestion:
    id: str
    question: str
    split: str  # one of SPLITS
    file: str | None  # None: the collection does not answer it
    pages: tuple[int, ...]  # 1-based; empty for formats without pages
    also: tuple[tuple[str, tuple[int, ...]], ...]  # other (file, pages) that answer it
    answer: str  # a short string a right answer contains ("" when unanswerable)
    language: str = "en"  # the question's
    doc_language: str | None = None  # the answering document's, where not the question's

    @property
    def answerable(self) -> bool:
        return self.file is not None

    @property
    def held_out(self) -> bool:
        return self.split in HELD_OUT


@dataclass(frozen=True, kw_only=True)
class Outcome:
    question: QualityQuestion
    rank: int | None  # 1-based rank of the first right citation; None: none in the top k
    refused: bool
    contains_answer: bool  # anywhere in the answer (its sentence and the quotation)
    key_contains: bool  # in the answer sentence alone (the first paragraph)
    answer_text: str
    seconds: float
    score: float | None  # the answer sentence's relevance; None: no chunk was close enough
    unknown: tuple[str, ...] = ()  # the question's words no chunk holds (the refusal's cue)
    translated: str = ""  # searched too: the model's translation of the question


def load_set(*, file: Path = SET_FILE) -> list[QualityQuestion]:
    raw = json.loads(file.read_text(encoding="utf-8"))
    return [
        QualityQuestion(
            id=q["id"],
            question=q["question"],
            split=q["split"],
            file=q.get("file"),
            pages=tuple(q.get("pages") or ()),
            also=tuple((a["file"], tuple(a.get("pages") or ())) for a in q.get("also") or ()),
            answer=q.get("answer") or "",
            language=q.get("language") or "en",
            doc_language=q.get("doc_language"),
        )
        for q in raw["questions"]
    ]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--corpus", type=Path, help="the real documents (default: real_docs' corpus folder)"
    )
    parser.add_argument(
        "--index", type=Path, help="keep the ingested index here and reuse it when present"
    )
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all")
    parser.add_argument(
        "--set",
        choices=("quality", "blind"),
        default="quality",
        help="blind: the multilingual blind set over blind_docs' corpus, per language",
    )
    parser.add_argument(
        "--min-score",
        type=float,
        help="the gate's answer threshold (default the product's); a low one records every "
        "question's score, for sweeping the threshold offline",
    )
    parser.add_argument(
        "--reranker",
        help="a cross-encoder (local folder or cached id) to re-order the top 20, or "
        '"model": the language model of --model re-orders the top 10 (query likelihood)',
    )
    parser.add_argument(
        "--model",
        help="a language model (folder or .gguf) that writes each answer, judged; with "
        "--reranker model it also re-orders the candidates",
    )
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="with --model: rank only, write no answers (the ranker sweep)",
    )
    parser.add_argument(
        "--no-translate",
        action="store_true",
        help="with --model: search a question in a language no document is in as asked "
        "only, not also as the model translates it (engine/rag/answer/translation.py)",
    )
    parser.add_argument(
        "--limit", type=int, help="each split's first N answerable questions (N/4 unanswerable)"
    )
    parser.add_argument(
        "--language",
        help="ask only the questions in these languages (comma-separated; the blind set's "
        "bg, cs, de, en, es, fr, it, nl, pl, pt, ru, sk, sv, uk): a model's answers take a "
        "while, so a part at a time",
    )
    parser.add_argument(
        "--ids",
        help="ask only these questions (comma-separated ids, as --show prints them): a "
        "subset chosen by a rule, asked before and after a change",
    )
    parser.add_argument(
        "--model-ranking",
        help="with --reranker model: CANDIDATES,RANK_WEIGHT to sweep (default: the product's)",
    )
    parser.add_argument(
        "--embedder",
        help="the embedder to index and ask with: a sentence-transformers folder or cached "
        "id (default: the product's); give each embedder its own --index folder",
    )
    parser.add_argument(
        "--rerank-latency",
        action="store_true",
        help="also time a MiniLM-L6-shaped cross-encoder (random weights) at k=20 on 2 threads",
    )
    parser.add_argument(
        "--rerank-catalogue",
        action="store_true",
        help="with --rerank-latency: also time each recommended reranker's architecture "
        "(random weights) beside the estimate the Models dialog shows",
    )
    parser.add_argument("--show", action="store_true", help="print each question's outcome")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from bench.blind_docs import find_blind_docs
    from bench.real_docs import find_real_docs

    say = (lambda *_: None) if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    blind = getattr(args, "set", "quality") == "blind"
    corpus = args.corpus or (find_blind_docs() if blind else find_real_docs())
    if corpus is None:
        fetch = "bench.blind_docs" if blind else "bench.real_docs"
        raise SystemExit(f"the real documents are not there: fetch them with `python -m {fetch}`")
    everything = load_set(file=BLIND_SET_FILE if blind else SET_FILE)
    questions = select(everything, quick=bool(args.quick) and not blind, split=args.split)
    if not blind:
        on_disk = {p.name for p in Path(corpus).iterdir()}
        questions = [q for q in questions if q.file is None or q.file in on_disk]
    if getattr(args, "language", None):
        wanted = set(args.language.split(","))
        questions = [q for q in questions if q.language in wanted]
    if getattr(args, "ids", None):
        asked = set(args.ids.split(","))
        questions = [q for q in questions if q.id in asked]
    if args.limit:
        questions = limit(questions, per_split=args.limit)
    temp = Path(tempfile.mkdtemp(prefix="ragdoll-bench-quality-"))
    folder = args.index or temp / "index"
    if args.quick and not blind:
        corpus = quick_corpus(corpus=Path(corpus), folder=temp / "corpus")
    try:
        figures = measure(
            corpus=Path(corpus),
            index=folder,
            questions=questions,
            say=say,
            reranker=args.reranker,
            language_model=args.model,
            model_ranking=args.model_ranking,
            min_score=args.min_score,
            embedder=args.embedder,
            write=bool(args.model) and not args.no_write,
            translate=not getattr(args, "no_translate", False),
        )
        if args.rerank_latency:
            from bench.quality_rerank import rerank_latency

            figures["rerank_latency"] = rerank_latency(
                index=folder, say=say, catalogue=args.rerank_catalogue
            )
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    shown = figures.pop("outcomes") + figures.pop("written_outcomes", [])
    if args.show and not args.json:
        for line in shown:
            print(line, file=sys.stderr)
    if not args.json:
        print(report(figures))
        if "written" in figures:
            from bench.quality_model import report_written

            languages = sorted(k for k in figures["written"] if k.startswith("lang:"))
            print(report_written(figures["written"], splits=(*SPLITS, *languages)))
    return figures


def select(questions: list[QualityQuestion], *, quick: bool, split: str) -> list[QualityQuestion]:
    chosen = [q for q in questions if split in ("all", q.split)]
    if not quick:
        return chosen
    out: list[QualityQuestion] = []
    # The whole set's quick form stays what CI has always timed (tune and held); a named
    # split gets its own slice.
    names = ("tune", "held") if split == "all" else (split,)
    for name in names:
        part = [q for q in chosen if q.split == name]
        out += [q for q in part if q.file in QUICK_FILES]
        out += [q for q in part if not q.answerable][:QUICK_UNANSWERABLE]
    return out


def limit(questions: list[QualityQuestion], *, per_split: int) -> list[QualityQuestion]:
    out: list[QualityQuestion] = []
    for name in SPLITS:
        part = [q for q in questions if q.split == name]
        out += [q for q in part if q.answerable][:per_split]
        out += [q for q in part if not q.answerable][: max(1, per_split // 4)]
    return out


def quick_corpus(*, corpus: Path, folder: Path) -> Path:
    """A folder with links to the quick slice's files only."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in QUICK_FILES:
        link = folder / name
        if not link.exists():
            link.symlink_to((corpus / name).resolve())
    return folder


def ordinary_words(model: Any, *, small: bool = False) -> Ordinary:
    """The gate's test of a word of some language, as the engine gives it (`small`: the
    one for a collection under MIN_CHUNKS chunks), with the table of languages' own words
    made first (the engine's first questions may come before it: a benchmark's figures
    may not)."""
    from engine.paths import resolve_paths
    from engine.rag.answer.word_languages import (
        WordLanguages,
        either_ordinary,
        small_collection_ordinary,
    )

    words = WordLanguages(
        cache=EngineEnviron.from_environ().words_cache or resolve_paths().ensure().cache
    )
    if not words.wait():
        print("  the table of languages' own words could not be made", file=sys.stderr)
    test = small_collection_ordinary if small else either_ordinary
    return test(words=words, embedder=model.ordinary_word)


def measure(
    *,
    corpus: Path,
    index: Path,
    questions: Sequence[QualityQuestion],
    say: Callable[[str], None],
    reranker: str | None = None,
    language_model: str | None = None,
    model_ranking: str | None = None,
    min_score: float | None = None,
    embedder: str | None = None,
    write: bool = False,
    translate: bool = True,
) -> dict[str, Any]:
    from engine.rag.answer.extractive import DEFAULT_MIN_SCORE
    from engine.rag.pipeline.answering import gated_retrieve_batch
    from engine.rag.pipeline.requests import Question
    from engine.rag.store.lance_store import LanceStore

    model, sentences, ingest = indexed_with(corpus=corpus, index=index, embedder=embedder, say=say)
    store = LanceStore(scorer=EngineEnviron.from_environ().ivf_scorer, folder=index)
    answerer = _answerer(model=language_model) if language_model else None
    written: list[Any] = []
    try:
        rerank = _ranker(reranker=reranker, answerer=answerer, sweep=model_ranking)
        retrieve = gated_retrieve_batch(
            store=store,
            embed=model.embed,
            reranker=rerank,
            min_score=DEFAULT_MIN_SCORE if min_score is None else min_score,
            sentence_embed=sentences.embed,
            sentence_scale=sentences.semantic_scale,
            ordinary_word=ordinary_words(model),
            small_ordinary=ordinary_words(model, small=True),
        )
        retrieve([Question(request_id="warm", text="warm up", k=TOP_K)])
        outcomes = []
        for q in questions:
            started = time.perf_counter()
            # With a model, as the engine asks: translated first where the collection
            # is not written in the question's language.
            translated = (
                translation(question=q.question, answerer=answerer, store=store)
                if translate
                else ""
            )
            asked = Question(request_id=q.id, text=q.question, k=TOP_K, translated=translated)
            (gated,) = retrieve([asked])
            seconds = time.perf_counter() - started
            outcomes.append(
                _outcome(question=q, gated=gated, seconds=seconds, translated=translated)
            )
            if write and answerer is not None:
                from bench.quality_model import describe_written, written_outcome

                written.append(
                    written_outcome(
                        question=q,
                        gated=gated,
                        answerer=answerer,
                        embed=sentences.embed,
                        scale=sentences.semantic_scale(),
                    )
                )
                say(describe_written(written[-1]))
    finally:
        store.close()
        if answerer is not None:
            answerer.close()
    figures: dict[str, Any] = {
        "ingest": ingest,
        "top_k": TOP_K,
        "reranker": reranker,
        "model": language_model,
        "embedder": model.info.id,
    }
    for split in (*SPLITS, "all"):
        part = [o for o in outcomes if split in ("all", o.question.split)]
        if part:
            figures[split] = summarise(part)
    for key, part in language_rows(outcomes).items():
        figures[key] = summarise(part)
    if written:
        from bench.quality_model import describe_written, record, summarise_written

        figures["written"] = {"model": Path(language_model or "").name}
        for split in (*SPLITS, "all"):
            part = [o for o in written if split in ("all", o.question.split)]
            if part:
                figures["written"][split] = summarise_written(part)
        for key, part in language_rows(written).items():
            figures["written"][key] = summarise_written(part)
        figures["written_records"] = [record(o) for o in written]
        figures["written_outcomes"] = [describe_written(o) for o in written]
    figures["load_average_1m"] = round(os.getloadavg()[0], 2)
    figures["cpus"] = os.cpu_count()
    figures["outcomes"] = [_describe(o) for o in outcomes]
    figures["records"] = [
        {
            "id": o.question.id,
            "split": o.question.split,
            "language": o.question.language,
            "doc_language": o.question.doc_language or o.question.language,
            "answerable": o.question.answerable,
            "rank": o.rank,
            "refused": o.refused,
            "score": o.score,
            "unknown": list(o.unknown),
            "translated": o.translated,
            "contains": o.contains_answer,
            "sentence_contains": o.key_contains,
        }
        for o in outcomes
    ]
    return figures


def _crosses(question: Any) -> bool:
    """Asked in another language than the document's (the cross part, or a question that
    names a doc_language other than its own)."""
    if question.split == "cross":
        return True
    document = getattr(question, "doc_language", None)
    return bool(document) and document != question.language


def language_rows(outcomes: Sequence[Any], *, even_one: bool = False) -> dict[str, list[Any]]:
    """The outcomes (anything with a `.question`) per language: `lang:X` for the questions
    asked in the language of their documents (when more than one language is asked, or
    `even_one`), and for the cross-language part `lang:cross asks X` per question language
    and `lang:cross on Y` per document language. A question of another part with a
    `doc_language` other than its own (the cross-language ones of blind3 to blind6)
    is a cross one too."""
    rows: dict[str, list[Any]] = {}
    same = [o for o in outcomes if not _crosses(o.question)]
    languages = sorted({o.question.language for o in same})
    for language in languages if even_one or len(languages) > 1 else ():
        rows[f"lang:{language}"] = [o for o in same if o.question.language == language]
    cross = [o for o in outcomes if _crosses(o.question)]
    for language in sorted({o.question.language for o in cross}):
        rows[f"lang:cross asks {language}"] = [o for o in cross if o.question.language == language]

    def document(o: Any) -> str:  # a recorded question may predate doc_language
        return getattr(o.question, "doc_language", None) or ""

    for language in sorted({document(o) for o in cross}):
        rows[f"lang:cross on {language}"] = [o for o in cross if document(o) == language]
    return rows


def indexed_with(
    *, corpus: Path, index: Path, embedder: str | None, say: Callable[[str], None]
) -> tuple[Any, Any, dict[str, Any]]:
    """The embedder that indexes and asks (`embedder`: a folder or cached id; None: the
    product's), the one that scores an answer's sentences, and the ingest's figures,
    once `index` holds the corpus (`build_index`)."""
    from engine.paths import resolve_paths
    from engine.rag.ingest.embedder import DEFAULT_EMBEDDER, Embedder, scores_sentences

    # The engine's own choice of back-end (bf16 weights or ONNX on a CPU), as it
    # answers; an ONNX export goes where the engine keeps its own.
    model = Embedder(
        environ=EngineEnviron.from_environ(),
        model=embedder or DEFAULT_EMBEDDER,
        cache_dir=resolve_paths().cache / "embedders",
    )
    ingest = build_index(corpus=corpus, index=index, embedder=model, say=say)
    # As the engine does (EmbedderInForce.embed_sentences): another index embedder
    # leaves an answer's sentences to the bundled one.
    sentences = (
        model
        if scores_sentences(model)
        else Embedder(
            environ=EngineEnviron.from_environ(), cache_dir=resolve_paths().cache / "embedders"
        )
    )
    return model, sentences, ingest


def build_index(
    *, corpus: Path, index: Path, embedder: Any, say: Callable[[str], None]
) -> dict[str, Any]:
    """Ingest the corpus through the product's queue, unless `index` already holds it."""
    from bench.ingest_many import wait_for_job
    from engine.rag.ingest.jobs import IngestQueue
    from engine.rag.ingest.pipeline import CommitPolicy
    from engine.rag.store.lance_store import LanceStore

    store = LanceStore(scorer=EngineEnviron.from_environ().ivf_scorer, folder=index)
    store.ensure_embedder(embedder_id=embedder.info.id, dimension=embedder.info.dimension)
    names = {p.name for p in corpus.iterdir() if p.is_file()}
    try:
        have = {Path(d.path).name for d in store.list_documents() if d.status == "indexed"}
        if names <= have:
            docs, chunks = store.counts()
            say(f"reusing the index in {index}: {docs} documents, {chunks} chunks")
            return {"reused": True, "documents": docs, "chunks": chunks}
        say(f"ingesting {len(names)} documents from {corpus} into {index} ...")
        queue = IngestQueue(
            store=store,
            embedder=lambda: embedder,
            commits=CommitPolicy.with_files(EngineEnviron.from_environ().ingest_commit_files),
        )
        try:
            started = time.perf_counter()
            progress = wait_for_job(queue.submit(paths=[str(corpus)]))
            seconds = time.perf_counter() - started
        finally:
            queue.stop()
        if progress.errors:
            raise RuntimeError(f"documents failed to ingest: {progress.errors[:3]}")
        docs = store.list_documents()
        figures = {
            "reused": False,
            "documents": len(docs),
            "pages": sum(d.pages or 0 for d in docs),
            "chunks": progress.chunks_added,
            "seconds": round(seconds, 1),
        }
        say(f"  {figures}")
        return figures
    finally:
        store.close()


def translation(*, question: str, answerer: GenerativeAnswerer | None, store: Any) -> str:
    """What the engine searches besides `question` (engine/rag/answer/translation.py):
    the model's translation into the collection's language, or "" (no model, or the
    question is in one of the collection's languages)."""
    from engine.rag.answer.translation import searched_translation, translation_target

    if answerer is None:
        return ""
    target = translation_target(question=question, shares=store.language_shares())
    if target is None:
        return ""
    request = answerer.translate_request(question=question, language=target)
    ids = [event.token_id for event in answerer.stream_batch(requests=[request])]
    text = str(answerer.tokenizer.decode(ids, skip_special_tokens=True))
    return searched_translation(question=question, text=text)


def _outcome(
    *, question: QualityQuestion, gated: Any, seconds: float, translated: str = ""
) -> Outcome:
    refused = not gated.found
    answer_text = "" if refused or gated.extract is None else gated.extract.text
    rank = None
    if question.answerable:
        for i, hit in enumerate(gated.hits[:TOP_K]):
            if right_source(question, path=hit.chunk.path, page=hit.chunk.page):
                rank = i + 1
                break
    return Outcome(
        question=question,
        rank=rank,
        refused=refused,
        contains_answer=question.answerable and contains(answer_text, question.answer),
        key_contains=question.answerable
        and contains(answer_text.split("\n\n")[0], question.answer),
        answer_text=answer_text,
        seconds=seconds,
        score=gated.extract.score if gated.extract is not None and gated.extract.score else None,
        unknown=tuple(gated.unknown),
        translated=translated,
    )


def _answerer(*, model: str) -> GenerativeAnswerer:
    """The language model as the engine loads it (its weights left as stored)."""
    from engine.rag.answer.in_use import open_model
    from engine.runtime.models.resolve import resolve_model_path

    return open_model(model_path=resolve_model_path(model=model), decode_at_load=True).answerer


def _ranker(
    *, reranker: str | None, answerer: GenerativeAnswerer | None, sweep: str | None = None
) -> CandidateRanker | None:
    """The cross-encoder named, or the language model as the engine loads it."""
    from engine.rag.answer.model_ranker import MODEL_RANKER, ModelRanker
    from engine.rag.answer.reranker import Reranker

    if not reranker:
        return None
    if reranker != MODEL_RANKER:
        return Reranker(model=reranker)
    if answerer is None:
        raise SystemExit("--reranker model needs --model (a folder or a .gguf file)")
    if not sweep:
        return ModelRanker(answerer=answerer)
    candidates, weight = sweep.split(",")
    return ModelRanker(answerer=answerer, candidates=int(candidates), rank_weight=float(weight))


def right_source(question: QualityQuestion, *, path: str, page: int | None) -> bool:
    name = Path(path).name
    return any(
        name == file and (not pages or page in pages)
        for file, pages in ((question.file, question.pages), *question.also)
    )


def summarise(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    answerable = [o for o in outcomes if o.question.answerable]
    unanswerable = [o for o in outcomes if not o.question.answerable]
    refused = [o for o in outcomes if o.refused]
    n = len(answerable) or 1
    right_refusals = sum(1 for o in refused if not o.question.answerable)
    return {
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "hit_at_1": round(sum(1 for o in answerable if o.rank == 1) / n, 3),
        "hit_at_3": round(sum(1 for o in answerable if o.rank and o.rank <= 3) / n, 3),
        "mrr": round(sum(1 / o.rank for o in answerable if o.rank) / n, 3),
        "answer_contains": round(sum(1 for o in answerable if o.contains_answer) / n, 3),
        "sentence_contains": round(sum(1 for o in answerable if o.key_contains) / n, 3),
        "answerable_refused": round(sum(1 for o in answerable if o.refused) / n, 3),
        "refusal_recall": round(right_refusals / (len(unanswerable) or 1), 3),
        "refusal_precision": round(right_refusals / len(refused), 3) if refused else None,
        "median_ms": round(statistics.median(o.seconds for o in outcomes) * 1000, 1),
    }


def _describe(o: Outcome) -> str:
    q = o.question
    if not q.answerable:
        verdict = "refused" if o.refused else "ANSWERED"
        return (
            f"{q.id} [{q.split}] unanswerable: {verdict} (score {o.score}, never mentioned "
            f"{list(o.unknown)}): {q.question}"
        )
    verdict = f"rank {o.rank}" if o.rank else "MISSED"
    contains_ = "contains" if o.contains_answer else ("REFUSED" if o.refused else "LACKS")
    return (
        f"{q.id} [{q.split}] {verdict}, answer {contains_} {q.answer!r} (score {o.score}): "
        f"{q.question}\n"
        f"    -> {o.answer_text[:300]}"
    )


def report(figures: dict[str, Any]) -> str:
    lines = ["quality on real documents (right file and page among the top 5 citations)"]
    header = "split  n   hit@1  hit@3  MRR    answer  sentence  refused:unans  ans  precision  ms"
    rows = [*SPLITS, *sorted(k for k in figures if k.startswith("lang:")), "all"]
    width = max([5, *(len(k.removeprefix("lang:")) for k in rows if figures.get(k))])
    lines.append(f"{'split':{width}}{header.removeprefix('split')}")
    for split in rows:
        f = figures.get(split)
        if not f:
            continue
        precision = "-" if f["refusal_precision"] is None else f"{f['refusal_precision']:.2f}"
        name = split.removeprefix("lang:")
        lines.append(
            f"{name:{width}}  {f['answerable']:<3} {f['hit_at_1']:.2f}   {f['hit_at_3']:.2f}   "
            f"{f['mrr']:.2f}   {f['answer_contains']:.2f}    {f['sentence_contains']:.2f}      "
            f"{f['refusal_recall']:.2f} of {f['unanswerable']:<3}    "
            f"{f['answerable_refused']:.2f} {precision:>9}  {f['median_ms']}"
        )
    lines.append(f"load average {figures['load_average_1m']} on {figures['cpus']} CPUs")
    return "\n".join(lines)
