"""The prompt a question is answered with: system prompt, the conversation's earlier
turns, then this turn's numbered sources and question, within a token budget.

The layout keeps system prompt + earlier turns a stable start across a conversation's
turns, so that engine/runtime/executor/prefix_cache.py serves their KV on the next turn
(engine/rag/answer/prompt_turns.py renders the earlier turns).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

from engine.rag.answer.passages import Passage
from engine.rag.answer.prompt_turns import Shown, answer_in, fit_turns, source_block, user_text
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
    turn's prompt too and the prefix cache serves their KV. A source shown before is
    referenced, not repeated (engine/rag/answer/prompt_turns.py), so only this turn's new
    sources and question are new tokens. Earlier turns get what the current sources
    leave of the budget (at least half of it stays for the sources); when they do not
    fit, the oldest are dropped, down to half of what they may take (so that the next
    few turns share a prefix again instead of each shifting it), and a short summary
    of the dropped turns takes their place. Sources are kept in the order given (best
    first); the last one that does not fit is cut and the rest dropped, so that the
    prompt stays within `max_prompt_tokens` as counted by `count_prompt_tokens`.
    """
    fitted = _fit(
        tokenizer=tokenizer,
        question=question,
        passages=passages,
        max_prompt_tokens=max_prompt_tokens,
        history=history,
    )
    return _render(tokenizer=tokenizer, **fitted)


def build_messages(
    *,
    tokenizer: Any,
    question: str,
    passages: list[Passage],
    max_prompt_tokens: int,
    history: Sequence[Turn] = (),
) -> list[dict[str, str]]:
    """The prompt of `build_prompt` as chat messages (system, earlier turns, then this
    turn's sources and question), for a model server that applies its own template:
    the same fitting and the same stable start, so the server's prefix cache serves a
    follow-up as the executor's does. `tokenizer` only counts (an estimate will do)."""
    fitted = _fit(
        tokenizer=tokenizer,
        question=question,
        passages=passages,
        max_prompt_tokens=max_prompt_tokens,
        history=history,
    )
    return prompt_messages(**fitted)


def _fit(
    *,
    tokenizer: Any,
    question: str,
    passages: list[Passage],
    max_prompt_tokens: int,
    history: Sequence[Turn],
) -> dict[str, Any]:
    """The parts `_render` takes (system, sources, question, turns), fitted to the budget."""
    system = load_system_prompt()
    question = " ".join(question.split())
    line = answer_in(question=question, passages=[p.text for p in passages])

    def render(blocks: list[str], q: str, turns: list[tuple[str, str]]) -> str:
        return _render(
            tokenizer=tokenizer,
            system=system,
            sources=blocks,
            question=q,
            turns=turns,
            answer_in=line,
        )

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

    full_blocks = [source_block(p) for p in passages]
    if history:
        wanted = sum(len(_ids(tokenizer, b)) + 2 for b in full_blocks)
        room = max_prompt_tokens - frame
        fitted = fit_turns(
            history=history,
            budget=room - min(wanted, room // 2),
            max_prompt_tokens=max_prompt_tokens,
            count=_counter(tokenizer),
        )
        turns, shown = fitted.turns, fitted.shown
    else:
        turns, shown = [], Shown()
    # This turn's sources already shown by an earlier turn are referenced, not repeated.
    source_blocks = [shown.block(p) for p in passages]
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
    return {
        "system": system,
        "sources": blocks,
        "question": question,
        "turns": turns,
        "answer_in": line,
    }


def count_prompt_tokens(*, tokenizer: Any, prompt: str) -> int:
    """Tokens of a prompt as `GenerativeAnswerer` feeds it to the model."""
    return len(encode_prompt(tokenizer=tokenizer, prompt=prompt, return_tensors=None)["input_ids"])


def encode_prompt(*, tokenizer: Any, prompt: str, return_tensors: str | None) -> Any:
    # Chat templates write their own bos; adding special tokens again would double it.
    add_special = not getattr(tokenizer, "chat_template", None)
    return tokenizer(prompt, add_special_tokens=add_special, return_tensors=return_tensors)


def _render(
    *,
    tokenizer: Any,
    system: str,
    sources: list[str],
    question: str,
    turns: Sequence[tuple[str, str]] = (),
    answer_in: str = "",
) -> str:
    if not getattr(tokenizer, "chat_template", None):
        user = user_text(sources=sources, question=question, answer_in=answer_in)
        earlier = "".join(f"{u}\n\nAnswer: {a}\n\n" for u, a in turns)
        return f"{system}\n\n{earlier}{user}\n\nAnswer:"
    messages = prompt_messages(
        system=system, sources=sources, question=question, turns=turns, answer_in=answer_in
    )
    dialogue, user = messages[1:-1], messages[-1]["content"]
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


def prompt_messages(
    *,
    system: str,
    sources: Sequence[str],
    question: str,
    turns: Sequence[tuple[str, str]] = (),
    answer_in: str = "",
) -> list[dict[str, str]]:
    """System, the earlier turns (each question with its sources, then the answer),
    then this turn's sources and question (`answer_in`: prompt_turns.answer_in's line):
    the stable layout a prefix cache serves."""
    dialogue: list[dict[str, str]] = []
    for u, a in turns:
        dialogue += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
    user = user_text(sources=list(sources), question=question, answer_in=answer_in)
    return [{"role": "system", "content": system}, *dialogue, {"role": "user", "content": user}]


def _ids(tokenizer: Any, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _counter(tokenizer: Any) -> Callable[[str], int]:
    """Token counts of texts, each text tokenized once (earlier turns are counted for
    every candidate cut)."""
    memo: dict[str, int] = {}

    def count(text: str) -> int:
        if text not in memo:
            memo[text] = len(_ids(tokenizer, text))
        return memo[text]

    return count


def _truncate(tokenizer: Any, text: str, max_tokens: int) -> str:
    ids = _ids(tokenizer, text)[: max(0, max_tokens)]
    # A cut inside a multi-byte character decodes to U+FFFD; drop it.
    return tokenizer.decode(ids).rstrip("\ufffd").rstrip()
