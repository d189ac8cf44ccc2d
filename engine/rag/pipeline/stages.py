"""What a question meets in the pipeline, in order, as the functions that do it.

1. **rewrite** (a follow-up, with a model in use): a short generation row in the
   generation worker's batches, beside the answers; what it writes becomes the search
   query (follow_up.py `after_rewrite`), and the question goes on to retrieval.
2. **search** (`Stages.retrieve`): one call for the retrieval batch (one embedding
   call, one batched search).
3. **verdict** (`Stages.judge`, optional): the relevance gate on one question's search.
   `Stages.speculate` picks questions whose generation may start before it (held until
   it comes); `Stages.settled` names those it answers already (nothing relevant).
4. **generate** (`Stages.generate`): one batched run for the generation batch, each
   row's text streamed back as (request id, piece), then DONE or RowFailed for it.

The pipeline (workers.py) runs them; answering.py gives the engine's, tests give fakes.
`S` is what the search gives one question, `H` what the verdict gives (requests.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Generic

from engine.rag.pipeline.requests import CancelFlag, H, Piece, Question, S


class _Done:
    def __repr__(self) -> str:
        return "DONE"


DONE: Final = _Done()  # the generate marker: this request's text is complete


@dataclass(frozen=True, kw_only=True)
class RowFailed:
    """The generate marker of a request that failed alone (a model server's error for
    one row): it ends with `message`, the others go on."""

    message: str


@dataclass(frozen=True, kw_only=True)
class GenerationJob(Generic[S, H]):
    """One row of a generation batch: an answer from the verdict's hits, an answer
    begun before its verdict from the search's (`Stages.speculate`), or a follow-up's
    rewrite (`question.rewrite`), which reads no passages (None)."""

    request_id: str
    question: Question
    hits: H | S | None
    cancel: CancelFlag  # set when the caller cancelled; stop this row


# A piece is plain text, or a Piece when the function counts the tokens behind it.
Stream = Iterator[tuple[str, "str | Piece | _Done | RowFailed"]]
# Asked at each decode step of a batch in flight: the jobs that join it there.
Incoming = Callable[[], Sequence[GenerationJob[S, H]]]
RetrieveBatch = Callable[[Sequence[Question]], Sequence[S]]
# Called as `generate(jobs)`, or `generate(jobs, incoming=...)` when rows may join a
# batch in flight (Scheduling.join_running_batch).
GenerateBatch = Callable[[Sequence[GenerationJob[S, H]]], Stream]


@dataclass(frozen=True, kw_only=True)
class Stages(Generic[S, H]):
    """The stage functions. Without `judge`, the search is the verdict (`S` is `H`)."""

    retrieve: RetrieveBatch[S]
    generate: GenerateBatch[S, H]
    judge: Callable[[Question, S], H] | None = None
    # True for a verdict that settles the question at retrieval (nothing relevant
    # found): it finishes there, without a place in a generation batch.
    settled: Callable[[H], bool] | None = None
    # True for a search whose generation may begin before the verdict (only with
    # `judge`): what it writes is held until the verdict, which may stop it.
    speculate: Callable[[S], bool] | None = None
