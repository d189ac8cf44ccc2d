"""`ragdoll bench quality --model PATH`: the answers a language model writes, judged.

Each question goes through the relevance gate as without a model; a question the gate
lets through is answered by the model from the same top 5 passages, greedy, as the
engine answers (engine/rag/answer/generative.py), and made final as the engine makes it
(engine/rag/answer/written_answer.py: markers added, checked, a bare-marker answer
replaced). Judged per question, against the set's answer string:
- `stated`: the final answer contains the fact (markers aside);
- `cited`: stated, and one of its markers points at a passage that contains the fact;
- `claim_cited`: stated, and the very sentence stating it cites such a passage;
- the model's own markers checked by the model-free attribution (kept, moved,
  dropped), and bare-marker answers, before they were made final;
- `same_language`: of the written answers whose language the identifier is sure of
  (engine/rag/ingest/language.py), the share in the question's language;
- refusals: the gate's, or the model's "I don't know" (in English, German, French or
  Spanish: the blind set asks in all four), on answerable and unanswerable questions.
`python -m bench.quality_model F.json …` judges the answers a run recorded (`--out`) again,
with the post-processing as the code has it now: a change there is measured on the same
answers without running the model again.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from engine.rag.answer.semantic_scale import IDENTITY, SemanticScale

if TYPE_CHECKING:
    from engine.rag.answer.generative import GenerativeAnswerer


class QualityQuestion(Protocol):
    """bench/quality.py's question, as far as a written answer is judged."""

    id: str
    question: str
    split: str
    answer: str

    @property
    def answerable(self) -> bool: ...


MAX_NEW_TOKENS = 160  # room for a few sentences: the set's facts are stated in one
# "I don't know from these documents", as the model says it in the question's language
# (the prompt asks for it): the blind set asks in German, French, Spanish, Italian,
# Portuguese, Dutch, Polish and Chinese too (a judge, not the engine's rule).
_DOES_NOT_KNOW = re.compile(
    r"\b(?:don't|do not|does not|doesn't|cannot|can't) (?:know|contain|mention|provide|"
    r"include|say|specify|answer|find)|\bno (?:information|mention)\b|\bnot (?:found|"
    r"mentioned|available|provided|specified) in\b|\bunable to\b"
    # German
    r"|\bwei(?:ß|ss) (?:ich )?(?:es )?nicht\b|\bkeine (?:Informationen|Angaben|Antwort)\b"
    r"|\bnicht (?:erwähnt|angegeben|enthalten|beschrieben)\b"
    r"|\b(?:enthalten|erwähnen|nennen) (?:die (?:Quellen|Dokumente) )?(?:keine|nicht)\b"
    # French
    r"|\bje ne sais pas\b|\bne (?:contiennent|mentionnent|précisent|fournissent|indiquent|"
    r"disent|donnent) pas\b|\baucune (?:information|mention|indication)\b"
    r"|\bpas (?:mentionnée?s?|indiquée?s?|précisée?s?) dans\b"
    # Spanish
    r"|\bno (?:lo )?sé\b|\bno (?:contienen|mencionan|especifican|proporcionan|indican|"
    r"incluyen|dicen)\b|\bno (?:se )?(?:menciona|especifica|indica)\b"
    r"|\b(?:ninguna|no hay) información\b"
    # Italian
    r"|\bnon (?:lo )?so\b|\bnon (?:contengono|menzionano|specificano|forniscono|indicano)\b"
    r"|\bnessuna informazione\b|\bnon (?:è|sono) (?:menzionat|specificat|indicat)"
    # Portuguese
    r"|\bnão (?:sei|sou capaz|contêm|mencionam|especificam|fornecem|indicam)\b"
    r"|\bnenhuma informação\b|\bnão (?:é|são) (?:mencionad|especificad|indicad)"
    # Dutch
    r"|\bweet (?:ik )?(?:het )?niet\b|\bgeen informatie\b|\bniet (?:vermeld|genoemd)\b"
    r"|\bbevatten (?:geen|niet)\b"
    # Polish
    r"|\bnie wiem\b|\bbrak informacji\b|\bnie (?:zawierają|wspominają|podają|określają)\b"
    # Chinese
    r"|没有(?:提到|提及|相关信息|说明|涉及)|未(?:提到|提及|说明)|无法(?:回答|确定|找到)|不知道",
    re.IGNORECASE,
)


@dataclass(frozen=True, kw_only=True)
class WrittenOutcome:
    question: QualityQuestion
    gate_refused: bool
    raw: str  # as the model wrote it
    final: str  # as the person sees it
    note: str | None
    stated: bool
    cited: bool
    claim_cited: bool
    model_refused: bool  # the gate let it through; the model said it does not know
    bare: bool
    kept: int
    moved: int
    dropped: int
    seconds: float
    tokens: int
    quoted: str = "no"  # FinalAnswer.quoted: "instead" of the model's answer, "after" it
    passages: tuple[str, ...] = ()  # what the model was given, for judging again offline
    fallback: str | None = None  # the extractive answer the engine would fall back to
    answered_in: str | None = None  # the final answer's language, when the guess is sure
    # From the request to the model's first piece, and to the first checked text shown
    # (a sentence at a time; the answer's end when nothing showed before it).
    first_token_s: float | None = None
    first_shown_s: float | None = None


def written_outcome(
    *,
    question: QualityQuestion,
    gated: Any,
    answerer: GenerativeAnswerer,
    embed: Callable[[list[str]], Any],
    scale: SemanticScale = IDENTITY,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> WrittenOutcome:
    """The model's answer to `question` from `gated`'s passages, made final as the
    engine makes it (`scale`: `embed`'s, engine/rag/answer/semantic_scale.py), judged."""
    from engine.rag.pipeline.adapters import passages_of
    from engine.rag.pipeline.answer_stream import checking_for

    if not gated.found:
        return WrittenOutcome(
            question=question,
            gate_refused=True,
            raw="",
            final="",
            note=None,
            stated=False,
            cited=False,
            claim_cited=False,
            model_refused=False,
            bare=False,
            kept=0,
            moved=0,
            dropped=0,
            seconds=0.0,
            tokens=0,
        )
    passages = passages_of(gated.hits)
    texts = [p.text for p in passages]
    # Checked as the engine checks it, a sentence at a time as it is written.
    checking = checking_for(gated=gated, embed=embed, scale=scale, question=question.question)
    assert checking is not None  # passages were found
    pieces: list[str] = []
    first_token = first_shown = None
    started = time.perf_counter()
    stream = answerer.stream(
        question=question.question, passages=passages, max_new_tokens=max_new_tokens
    )
    for piece in stream:
        pieces.append(piece)
        if first_token is None and piece:
            first_token = time.perf_counter() - started
        if checking.feed(piece) and first_shown is None:
            first_shown = time.perf_counter() - started
    raw = "".join(pieces)
    _, final = checking.finish()
    seconds = time.perf_counter() - started
    tokens = answerer.last_generation.generated_tokens if answerer.last_generation else 0
    stated, cited, claim_cited = judge(text=final.text, passages=texts, answer=question.answer)
    return WrittenOutcome(
        question=question,
        gate_refused=False,
        raw=raw,
        final=final.text,
        note=final.note,
        stated=stated,
        cited=cited,
        claim_cited=claim_cited,
        model_refused=refuses(raw) and final.quoted != "instead",
        quoted=final.quoted,
        bare=final.markers.bare,
        kept=final.markers.kept,
        moved=final.markers.moved,
        dropped=final.markers.dropped,
        seconds=seconds,
        first_token_s=first_token,
        first_shown_s=first_shown if first_shown is not None else seconds,
        tokens=tokens,
        passages=tuple(texts),
        fallback=gated.extract.text if gated.extract is not None else None,
        answered_in=language_of(final.text),
    )


def language_of(text: str) -> str | None:
    """The language of an answer (markers aside), when the identifier is sure of it."""
    from engine.rag.answer.marker_check import strip_markers
    from engine.rag.ingest.language import text_language

    return text_language(strip_markers(text))  # None for an empty answer too


def refuses(raw: str) -> bool:
    """Whether the model's own words say it does not know (in a language the sets ask in)."""
    return bool(_DOES_NOT_KNOW.search(raw))


def judge(*, text: str, passages: Sequence[str], answer: str) -> tuple[bool, bool, bool]:
    """(stated, cited, claim_cited) of a final answer against the fact `answer`."""
    from bench.answer_match import contains
    from engine.rag.answer.marker_check import find_claims, strip_markers

    if not answer:
        return False, False, False
    stated = contains(strip_markers(text), answer)
    holding = {n for n, p in enumerate(passages, start=1) if contains(p, answer)}
    claims = find_claims(text)
    cited = stated and any(n in holding for c in claims for n in c.cited)
    claim_cited = stated and any(
        contains(c.text, answer) and any(n in holding for n in c.cited) for c in claims
    )
    return stated, cited, claim_cited


def summarise_written(outcomes: Sequence[WrittenOutcome]) -> dict[str, Any]:
    answerable = [o for o in outcomes if o.question.answerable]
    unanswerable = [o for o in outcomes if not o.question.answerable]
    n = len(answerable) or 1
    markers = sum(o.kept + o.moved + o.dropped for o in outcomes)
    written = [o for o in outcomes if not o.gate_refused]

    def refused(o: WrittenOutcome) -> bool:
        return o.gate_refused or o.model_refused

    told = [o for o in written if o.answered_in is not None]
    asked_in = [o.answered_in == getattr(o.question, "language", "en") for o in told]
    return {
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "stated": round(sum(o.stated for o in answerable) / n, 3),
        "cited": round(sum(o.cited for o in answerable) / n, 3),
        "claim_cited": round(sum(o.claim_cited for o in answerable) / n, 3),
        "answerable_refused": round(sum(refused(o) for o in answerable) / n, 3),
        "refusal_recall": round(
            sum(refused(o) for o in unanswerable) / (len(unanswerable) or 1), 3
        ),
        "model_markers": markers,
        "markers_kept": round(sum(o.kept for o in outcomes) / markers, 3) if markers else None,
        "markers_moved": sum(o.moved for o in outcomes),
        "markers_dropped": sum(o.dropped for o in outcomes),
        "bare": sum(o.bare for o in outcomes),
        # the model's own words state the fact (before anything was quoted beside them)
        "model_stated": round(sum(_model_stated(o) for o in answerable) / n, 3),
        "quoted_instead": sum(o.quoted == "instead" for o in outcomes),
        "quoted_after": sum(o.quoted == "after" for o in outcomes),
        "same_language": round(sum(asked_in) / len(told), 3) if told else None,
        "median_s": round(statistics.median(o.seconds for o in written), 1) if written else None,
        "tokens_per_s": round(
            sum(o.tokens for o in written) / (sum(o.seconds for o in written) or 1), 2
        ),
        "first_token_s": _median([o.first_token_s for o in written]),
        "first_shown_s": _median([o.first_shown_s for o in written]),
    }


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 2) if known else None


def _model_stated(o: WrittenOutcome) -> bool:
    from bench.answer_match import contains
    from engine.rag.answer.marker_check import strip_markers

    return bool(o.question.answer) and contains(strip_markers(o.raw), o.question.answer)


def describe_written(o: WrittenOutcome) -> str:
    q = o.question
    if o.gate_refused:
        verdict = "gate refused"
    elif not q.answerable:
        verdict = "model refused" if o.model_refused else "ANSWERED"
    else:
        verdict = (
            ("stated+cited" if o.cited else "stated, NOT CITED")
            if o.stated
            else ("model refused" if o.model_refused else "LACKS")
        )
    return (
        f"{q.id} [{q.split}] {verdict} {q.answer!r} ({o.seconds:.0f}s, markers kept {o.kept} "
        f"moved {o.moved} dropped {o.dropped}{', BARE' if o.bare else ''}): {q.question}\n"
        f"    raw -> {o.raw[:400]!r}\n    final -> {o.final[:400]!r}"
    )


def record(o: WrittenOutcome) -> dict[str, Any]:
    return {
        "id": o.question.id,
        "split": o.question.split,
        "language": getattr(o.question, "language", "en"),
        "doc_language": getattr(o.question, "doc_language", None),
        "question": o.question.question,
        "answer": o.question.answer,
        "answerable": o.question.answerable,
        "gate_refused": o.gate_refused,
        "model_refused": o.model_refused,
        "stated": o.stated,
        "cited": o.cited,
        "claim_cited": o.claim_cited,
        "bare": o.bare,
        "kept": o.kept,
        "moved": o.moved,
        "dropped": o.dropped,
        "seconds": round(o.seconds, 1),
        "first_token_s": o.first_token_s,
        "first_shown_s": o.first_shown_s,
        "tokens": o.tokens,
        "raw": o.raw,
        "final": o.final,
        "passages": list(o.passages),
        "fallback": o.fallback,
        "answered_in": o.answered_in,
    }


def report_written(figures: dict[str, Any], *, splits: Sequence[str]) -> str:
    lines = [
        f"answers written by {figures['model']} (fact stated; stated with a marker on a "
        "passage holding it; the stating sentence's own marker)",
        "split  n   stated  cited  claim  refused:ans  unans     markers kept  moved  "
        "dropped  bare  s/answer  first-token  first-shown  model-stated  quoted-instead  "
        "quoted-after  same-language",
    ]
    for split in (*splits, "all"):
        f = figures.get(split)
        if not f:
            continue
        split = split.removeprefix("lang:")
        kept = "-" if f["markers_kept"] is None else f"{f['markers_kept']:.2f}"
        lines.append(
            f"{split:5}  {f['answerable']:<3} {f['stated']:.2f}    {f['cited']:.2f}   "
            f"{f['claim_cited']:.2f}   {f['answerable_refused']:.2f}         "
            f"{f['refusal_recall']:.2f} of {f['unanswerable']:<3} {f['model_markers']:<7} "
            f"{kept:>4}  {f['markers_moved']:<5}  {f['markers_dropped']:<7}  {f['bare']:<4}  "
            f"{f['median_s']}  {f.get('first_token_s')}  {f.get('first_shown_s')}  "
            f"{f.get('model_stated', 0):.2f}  "
            f"{f.get('quoted_instead', 0):<14}  {f.get('quoted_after', 0):<12}  "
            f"{_share(f.get('same_language'))}"
        )
    return "\n".join(lines)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


@dataclass(frozen=True, kw_only=True)
class _RecordedQuestion:
    id: str
    question: str
    split: str
    answer: str
    language: str
    answerable: bool
    doc_language: str | None = None


def rejudge(
    records: Sequence[dict[str, Any]],
    *,
    embed: Callable[[list[str]], Any],
    scale: SemanticScale = IDENTITY,
) -> list[WrittenOutcome]:
    """The recorded raw answers (`record`'s rows, with their passages) made final by the
    code as it is now and judged again: post-processing compared on the same answers,
    with no model run. `scale`: `embed`'s."""
    from engine.rag.answer.written_answer import finish_written

    out = []
    for r in records:
        q = _RecordedQuestion(
            id=r["id"],
            question=r.get("question", ""),
            split=r["split"],
            answer=r.get("answer", ""),
            language=r.get("language", "en"),
            answerable=r["answerable"],
            doc_language=r.get("doc_language"),
        )
        if r["gate_refused"]:
            final_text, note, markers, quoted = "", None, None, "no"
        else:
            final = finish_written(
                answer=r["raw"],
                passages=r["passages"],
                embed=embed,
                fallback=r.get("fallback"),
                scale=scale,
                question=r.get("question", ""),
            )
            final_text, note, markers = final.text, final.note, final.markers
            quoted = final.quoted
        stated, cited, claim_cited = judge(
            text=final_text, passages=r.get("passages") or [], answer=q.answer
        )
        out.append(
            WrittenOutcome(
                question=q,
                gate_refused=r["gate_refused"],
                raw=r["raw"],
                final=final_text,
                note=note,
                stated=stated,
                cited=cited,
                claim_cited=claim_cited,
                model_refused=refuses(r["raw"]) and quoted != "instead",
                quoted=quoted,
                bare=bool(markers and markers.bare),
                kept=markers.kept if markers else 0,
                moved=markers.moved if markers else 0,
                dropped=markers.dropped if markers else 0,
                seconds=r.get("seconds", 0.0),
                first_token_s=r.get("first_token_s"),
                first_shown_s=r.get("first_shown_s"),
                tokens=r.get("tokens", 0),
                passages=tuple(r.get("passages") or ()),
                fallback=r.get("fallback"),
                answered_in=language_of(final_text),
            )
        )
    return out


def summarise_by_part(outcomes: Sequence[WrittenOutcome]) -> dict[str, Any]:
    """`summarise_written` of each split, each language (the cross-language part left
    out) and all together; the cross-language part per question and document language,
    as `bench.quality.language_rows` gives them."""
    from bench.quality import language_rows

    figures: dict[str, Any] = {
        split: summarise_written([o for o in outcomes if o.question.split == split])
        for split in sorted({o.question.split for o in outcomes})
    }
    for key, part in language_rows(outcomes, even_one=True).items():
        figures[key] = summarise_written(part)
    figures["all"] = summarise_written(outcomes)
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.quality_model FILE.json … [--embedder E]`: the written answers
    recorded by `ragdoll bench quality --model … --out FILE.json` judged again by the
    code as it is now (no model run)."""
    import argparse
    import json
    from pathlib import Path

    from engine.environ import EngineEnviron
    from engine.paths import resolve_paths
    from engine.rag.ingest.embedder import DEFAULT_EMBEDDER, Embedder, scores_sentences

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--embedder", help="the index's embedder (default the product's)")
    parser.add_argument("--show", action="store_true", help="each answer, before and after")
    parser.add_argument(
        "--raw-cosines",
        action="store_true",
        help="check markers on the embedder's raw cosines (as before the scale was applied)",
    )
    args = parser.parse_args(argv)
    records = [r for f in args.files for r in json.loads(f.read_text())["written_records"]]
    environ = EngineEnviron.from_environ()
    cache = resolve_paths().cache / "embedders"
    model = Embedder(environ=environ, model=args.embedder or DEFAULT_EMBEDDER, cache_dir=cache)
    sentences = model if scores_sentences(model) else Embedder(environ=environ, cache_dir=cache)
    scale = IDENTITY if args.raw_cosines else sentences.semantic_scale()
    outcomes = rejudge(records, embed=sentences.embed, scale=scale)
    if args.show:
        for o in outcomes:
            print(describe_written(o))
    figures = summarise_by_part(outcomes)
    figures["model"] = "recorded answers"
    print(report_written(figures, splits=[k for k in figures if k not in ("all", "model")]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
