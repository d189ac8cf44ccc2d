"""The prompt a question is answered with: system prompt, the conversation's earlier
turns, then this turn's numbered sources and question, within a token budget.

The layout keeps system prompt + earlier turns a stable start across a conversation's
turns, so that engine/executor/prefix_cache.py serves their KV on the next turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from engine.answer.passages import Passage
from engine.wire_events import Turn

# Below this many tokens a truncated source is more confusing than useful.
_MIN_SOURCE_TOKENS = 24


def load_system_prompt() -> str:
    return (
        resources.files("resources")
        .joinpath("prompts/answer_system.txt")
        .read_text(encoding="utf-8")
        .strip()
    )


def build_prompt(
    *,
    tokenizer: Any,
    question: str,
    passages: list[Passage],
    max_prompt_tokens: int,
    history: Sequence[Turn] = (),
) -> str:
    """The full prompt text: system prompt, the conversation's earlier turns, then this
    turn's numbered sources and question.

    Earlier turns are rendered as the model saw them (each question with its sources,
    then the answer), so that system prompt + earlier turns are the start of the next
    turn's prompt too and the prefix cache serves their KV. They get what the current
    sources leave of the budget (at least half of it stays for the sources); when they
    do not fit, the oldest are dropped, down to half of what they may take (so that
    the next few turns share a prefix again instead of each shifting it), and a line
    names the questions dropped. Sources are kept in the order given (best first); the
    last one that does not fit is cut and the rest dropped, so that the prompt stays
    within `max_prompt_tokens` as counted by `count_prompt_tokens`.
    """
    system = load_system_prompt()
    question = " ".join(question.split())

    def render(blocks: list[str], q: str, turns: list[tuple[str, str]]) -> str:
        return _render(tokenizer=tokenizer, system=system, sources=blocks, question=q, turns=turns)

    frame = count_prompt_tokens(tokenizer=tokenizer, prompt=render([], question, []))
    if frame > max_prompt_tokens:
        # Only an absurdly long question gets here; its start says what is asked.
        ids = _ids(tokenizer, question)
        question = _truncate(tokenizer, question, max(1, len(ids) - (frame - max_prompt_tokens)))
        frame = count_prompt_tokens(tokenizer=tokenizer, prompt=render([], question, []))
        if frame > max_prompt_tokens:
            raise ValueError(
                f"max_prompt_tokens={max_prompt_tokens} cannot hold even the instructions "
                f"({frame} tokens)"
            )

    source_blocks = [_source_block(p) for p in passages]
    if history:
        wanted = sum(len(_ids(tokenizer, b)) + 2 for b in source_blocks)
        room = max_prompt_tokens - frame
        turns = _fit_turns(
            tokenizer=tokenizer, history=history, budget=room - min(wanted, room // 2)
        )
    else:
        turns = []
    budget = max_prompt_tokens - count_prompt_tokens(
        tokenizer=tokenizer, prompt=render([], question, turns)
    )
    blocks: list[str] = []
    for block in source_blocks:
        # +2 for the blank line between sources; the final check below corrects drift.
        cost = len(_ids(tokenizer, block)) + 2
        if cost <= budget:
            blocks.append(block)
            budget -= cost
            continue
        if budget >= _MIN_SOURCE_TOKENS:
            blocks.append(_truncate(tokenizer, block, budget - 2) + " …")
        break

    # Token counts of pieces do not add up exactly (merges across joins): shrink the last
    # source until the whole prompt fits.
    prompt = render(blocks, question, turns)
    while blocks:
        excess = count_prompt_tokens(tokenizer=tokenizer, prompt=prompt) - max_prompt_tokens
        if excess <= 0:
            break
        keep = len(_ids(tokenizer, blocks[-1])) - excess - 2
        if keep < _MIN_SOURCE_TOKENS:
            blocks.pop()
        else:
            blocks[-1] = _truncate(tokenizer, blocks[-1], keep) + " …"
        prompt = render(blocks, question, turns)
    while turns and count_prompt_tokens(tokenizer=tokenizer, prompt=prompt) > max_prompt_tokens:
        turns = turns[1:]  # rare: template overhead the estimate missed
        prompt = render(blocks, question, turns)
    return prompt


def _turn_user_text(turn: Turn, *, with_sources: bool) -> str:
    q = " ".join(turn.question.split())
    if not with_sources:
        return f"Question: {q}"
    blocks = [
        _source_block(Passage(index=c.index, text=c.text, path=c.path, page=c.page))
        for c in turn.citations
    ]
    return _user_text(sources=blocks, question=q)


def _fit_turns(*, tokenizer: Any, history: Sequence[Turn], budget: int) -> list[tuple[str, str]]:
    """Earlier turns as (user text, answer) within `budget` tokens. When they do not
    all fit, the oldest go, a whole step of turns at a time (half of what fits): the
    kept turns then start at the same turn for the next few turns of the conversation,
    so their prompts share a start the prefix cache serves (dropping one turn per new
    turn would shift it every time). The first kept turn says which questions were
    dropped. A newest turn too long even alone is kept without its sources, if that
    fits."""
    overhead = 12  # a turn's role markers in a chat template, roughly

    def cost(user: str, answer: str) -> int:
        return len(_ids(tokenizer, user)) + len(_ids(tokenizer, answer)) + overhead

    full = [(_turn_user_text(t, with_sources=True), t.answer.strip()) for t in history]
    costs = [cost(u, a) for u, a in full]
    if sum(costs) <= budget:
        return full
    step = max(1, int(budget // (sum(costs) / len(costs))) // 2)
    kept: list[tuple[str, str]] = []
    for start in range(step, len(full), step):
        if sum(costs[start:]) <= budget:
            kept = full[start:]
            break
    if not kept:  # not even the last step fits: the newest turns that do, one by one
        used = 0
        for turn, (user, answer) in zip(reversed(history), reversed(full), strict=True):
            c = cost(user, answer)
            if used + c > budget:
                user = _turn_user_text(turn, with_sources=False)
                c = cost(user, answer)
                if used + c > budget:
                    break
            kept.insert(0, (user, answer))
            used += c
    dropped = history[: len(history) - len(kept)]
    if dropped and kept:
        asked = "; ".join(" ".join(t.question.split())[:120] for t in dropped[-5:])
        user, answer = kept[0]
        note = f"(Earlier in this conversation the person asked: {asked}.)\n\n"
        used = sum(cost(u, a) for u, a in kept)
        if len(_ids(tokenizer, note)) + used <= budget:
            kept[0] = (note + user, answer)
    return kept


def count_prompt_tokens(*, tokenizer: Any, prompt: str) -> int:
    """Tokens of a prompt as `GenerativeAnswerer` feeds it to the model."""
    return len(encode_prompt(tokenizer=tokenizer, prompt=prompt, return_tensors=None)["input_ids"])


def encode_prompt(*, tokenizer: Any, prompt: str, return_tensors: str | None) -> Any:
    # Chat templates write their own bos; adding special tokens again would double it.
    add_special = not getattr(tokenizer, "chat_template", None)
    return tokenizer(prompt, add_special_tokens=add_special, return_tensors=return_tensors)


def _user_text(*, sources: list[str], question: str) -> str:
    sources_text = "\n\n".join(sources) if sources else "(no sources were found)"
    return f"Sources:\n{sources_text}\n\nQuestion: {question}"


def _render(
    *,
    tokenizer: Any,
    system: str,
    sources: list[str],
    question: str,
    turns: Sequence[tuple[str, str]] = (),
) -> str:
    user = _user_text(sources=sources, question=question)
    if not getattr(tokenizer, "chat_template", None):
        earlier = "".join(f"{u}\n\nAnswer: {a}\n\n" for u, a in turns)
        return f"{system}\n\n{earlier}{user}\n\nAnswer:"
    dialogue: list[dict[str, str]] = []
    for u, a in turns:
        dialogue += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
    messages = [
        {"role": "system", "content": system},
        *dialogue,
        {"role": "user", "content": user},
    ]
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception:
        # Some templates (Gemma, older Mistral) refuse a system role: fold it into the
        # first user turn instead.
        first = dialogue[0]["content"] if dialogue else user
        merged = [{"role": "user", "content": f"{system}\n\n{first}"}]
        if dialogue:
            merged += [*dialogue[1:], {"role": "user", "content": user}]
        return tokenizer.apply_chat_template(merged, tokenize=False, add_generation_prompt=True)


def _source_block(passage: Passage) -> str:
    where = Path(passage.path).name or passage.path
    if passage.page is not None:
        where = f"{where}, p. {passage.page}"
    return f"[{passage.index}] ({where}) {' '.join(passage.text.split())}"


def _ids(tokenizer: Any, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _truncate(tokenizer: Any, text: str, max_tokens: int) -> str:
    ids = _ids(tokenizer, text)[: max(0, max_tokens)]
    # A cut inside a multi-byte character decodes to U+FFFD; drop it.
    return tokenizer.decode(ids).rstrip("\ufffd").rstrip()
