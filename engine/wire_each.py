"""The wire shapes of "ask every document": one question, one answer per document.

`POST /v1/ask/each` streams server-sent events with the codec of engine/wire_events.py:
  event: documents  data: EachPlan            the documents the run covers, in order
  event: row        data: DocumentAnswer      (repeated) a document's answer, as it ends
  event: finished   data: EachSummary         counts; nothing follows
  event: error      data: {"message": "..."}  FailedEvent, instead of finished
Rows come in the order the documents finish, not the plan's; `number` places them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from engine.wire_events import (
    AnswerMode,
    Citation,
    FailedEvent,
    StreamEvent,
    from_json_dict,
    to_json_dict,
)

# answered: the document states it (as far as retrieval and the relevance gate tell);
# not_stated: the gate found nothing in this document that relates to the question.
RowStatus = Literal["answered", "not_stated", "failed", "cancelled"]
NOT_STATED = "Not stated in this document."


@dataclass(frozen=True, kw_only=True)
class EachRequest:
    """One question of every document in `scope`: a collection's name, or a folder
    or file path inside a watched folder."""

    question: str
    scope: str
    k: int = 3
    # Give the model the document's whole text instead of its top passages; refused,
    # document by document, where the text does not fit the model's context.
    whole_document: bool = False
    reuse: bool = True  # rows of an earlier run for unchanged documents are sent again
    max_new_tokens: int = 256  # the longest answer the model writes for one document


@dataclass(frozen=True, kw_only=True)
class DocumentAnswer:
    """One row: what the question got from one document."""

    number: int  # 1-based position in the plan
    path: str
    status: RowStatus
    answer: str = ""
    mode: AnswerMode = "none"
    citations: list[Citation] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0
    content_hash: str = ""  # of the document as it was answered
    reused: bool = False  # from an earlier run, the document unchanged since

    @property
    def first_page(self) -> int | None:
        """The page of the best passage cited; None without one or for a pageless file."""
        return self.citations[0].page if self.citations else None


@dataclass(frozen=True, kw_only=True)
class EachPlan:
    question: str
    paths: list[str]
    mode: AnswerMode  # "extractive" or "generative": how the documents are answered


@dataclass(frozen=True, kw_only=True)
class EachSummary:
    answered: int = 0
    not_stated: int = 0
    failed: int = 0
    cancelled: int = 0
    reused: int = 0
    seconds: float = 0.0


@dataclass(frozen=True, kw_only=True)
class PlanEvent(StreamEvent):
    name: ClassVar[str] = "documents"
    plan: EachPlan

    def payload(self) -> dict[str, Any]:
        return to_json_dict(self.plan)

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> PlanEvent:
        return cls(plan=from_json_dict(EachPlan, data))


@dataclass(frozen=True, kw_only=True)
class RowEvent(StreamEvent):
    name: ClassVar[str] = "row"
    row: DocumentAnswer

    def payload(self) -> dict[str, Any]:
        return to_json_dict(self.row)

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> RowEvent:
        return cls(row=from_json_dict(DocumentAnswer, data))


@dataclass(frozen=True, kw_only=True)
class FinishedEvent(StreamEvent):
    name: ClassVar[str] = "finished"
    summary: EachSummary

    def payload(self) -> dict[str, Any]:
        return to_json_dict(self.summary)

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> FinishedEvent:
        return cls(summary=from_json_dict(EachSummary, data))


EachEvent = PlanEvent | RowEvent | FinishedEvent | FailedEvent
EACH_EVENTS: tuple[type[StreamEvent], ...] = (PlanEvent, RowEvent, FinishedEvent, FailedEvent)


def summary_of(*, rows: list[DocumentAnswer], seconds: float) -> EachSummary:
    def count(status: RowStatus) -> int:
        return sum(r.status == status for r in rows)

    return EachSummary(
        answered=count("answered"),
        not_stated=count("not_stated"),
        failed=count("failed"),
        cancelled=count("cancelled"),
        reused=sum(r.reused for r in rows),
        seconds=round(seconds, 3),
    )
