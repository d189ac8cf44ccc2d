"""Batched generation on a StreamingModel: prefill, then one token per decode step.

Requests of different lengths share a batch with left padding: every row's last prompt
token sits in the last column, so one decode step appends one column for all rows.
Positions count real tokens only (cumsum of the mask), which makes a padded row compute
exactly what it would alone. A row stops on one of its stop tokens (after its
`min_new_tokens`), at its `max_new_tokens`, or when the caller cancels it; a stopped row
leaves the batch at once (`DynamicCache.batch_select_indices`), so its KV is freed and
it costs nothing in later steps. Token ids are yielded as soon as each step is sampled.

Out of memory (RAGDoll §5): the checkpoint of a batch is each row's prompt plus the
tokens it has generated. When a forward raises `torch.OutOfMemoryError` or
`MemoryError`, the model is asked to `degrade()` (KV, then weights, down a tier) and
the batch is prefilled again from its checkpoint; the person gets a slower answer, and
the greedy tokens are those of an undisturbed run. The placement the model degraded to
goes to `on_degrade` (the PlacementOwner, engine/runtime/planner/owner.py), so that what the
engine reports is what runs.

Rows that start together are prefilled in one forward where a forward's cost is
reading the weights (a GPU, layers streamed from disk). Where every weight is resident
in host memory and the CPU computes, a prompt of a few hundred tokens already keeps
the cores busy on its own: a batched prefill saves no reading, computes the left
padding too and ran slower per token (1.4x the CPU time of its four rows prefilled
one by one, the 1.5B on 2 cores, docs/benchmarks-history.md, "Ask each document"), and its
quantized sums differ in the last bits from a row's alone. There each row is
prefilled alone and joins the batch's KV (`_Batch.start`, as a row joining a batch in
flight does), its prompt's KV stored before the next row's, which then reuses their
shared start (a system prompt).

Prefix reuse (RAGCache): with a `PrefixCache`, each row entering the batch looks up the
longest cached start of its prompt (at least its last token is left to prefill, so the
row has logits) and prefills only the rest on top of the cached KV. Rows with and
without a hit still share one forward when they are prefilled together: the cached KV
fills a left-padded "past" block of columns and the tokens to prefill follow it,
left-padded too; the attention mask and positions say which columns
are whose. After prefill (at the next step boundary, so that the copy does not delay
the first token), and again when a row finishes (its prompt plus its answer: the next
turn of a conversation starts with both; also when the caller closes the iterator right
after a row's last token, as the pipeline does), the row's KV goes into the cache. A
cache with sliding-window layers keeps only the window, so such models prefill whole.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch

from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.kv import is_host_layer
from engine.runtime.executor.prefix_cache import PrefixCache, PrefixHit
from engine.runtime.planner.placement import Placement

# After this many recoveries in one generation the fault is not memory pressure any
# more but something degrading cannot fix: let it surface.
MAX_RECOVERIES = 4
OOM_ERRORS: tuple[type[BaseException], ...] = (torch.OutOfMemoryError, MemoryError)


@dataclass(frozen=True, kw_only=True)
class Sampling:
    """temperature 0 is greedy; otherwise top-k / top-p sampling with a seeded generator.
    `repetition_penalty` > 1 divides (multiplies, when negative) the logits of every token
    already in the row's prompt or answer, as transformers does; with
    `repetition_window` > 0, only of its last that many tokens, as llama.cpp does
    (`repeat_last_n`)."""

    temperature: float = 0.0
    top_k: int = 0  # 0: no limit
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    repetition_window: int = 0  # 0: the whole row
    seed: int = 0


@dataclass(frozen=True, kw_only=True)
class GenerationRequest:
    prompt_ids: tuple[int, ...]
    max_new_tokens: int
    min_new_tokens: int = 0  # stop tokens are ignored before this many
    stop_token_ids: tuple[int, ...] | None = None  # None: the model's eos tokens
    sampling: Sampling | None = None  # None: the batch's sampling


@dataclass(frozen=True, kw_only=True)
class TokenEvent:
    request: int  # index into the requests given
    token_id: int
    finished: bool  # this is the request's last token


@dataclass(kw_only=True)
class _Row:
    """One request's state while it is in the batch."""

    index: int
    request: GenerationRequest
    sampling: Sampling
    stops: frozenset[int]
    generator: torch.Generator
    generated: list[int] = field(default_factory=list)

    @property
    def checkpoint(self) -> list[int]:
        return list(self.request.prompt_ids) + self.generated


def generate(
    *,
    model: StreamingModel,
    requests: Sequence[GenerationRequest],
    sampling: Sampling = Sampling(),
    pad_token_id: int | None = None,
    cancelled: Callable[[int], bool] | None = None,
    incoming: Callable[[], Sequence[GenerationRequest]] | None = None,
    prefix_cache: PrefixCache | None = None,
    on_degrade: Callable[[Placement], None] | None = None,
) -> Iterator[TokenEvent]:
    """Yield each request's new tokens, step by step, until every request has stopped.

    `cancelled(i)` is asked at every step boundary; a request it answers True for leaves
    the batch (no further events). `incoming()` is asked at every step boundary too: the
    requests it returns join the batch (numbered after those seen so far, in order) and
    produce their first token in the next step. Closing the iterator frees the batch.
    `prefix_cache` (one per model) reuses and stores the KV of prompt starts.
    `on_degrade(placement)` hears each placement an out-of-memory recovery moved to."""
    pad = pad_token_id if pad_token_id is not None else _pad_of(model)
    eos = frozenset(model.eos_token_ids)
    arrived = 0

    def admit(new: Sequence[GenerationRequest]) -> list[_Row]:
        nonlocal arrived
        for r in new:
            if not r.prompt_ids:
                raise ValueError("a prompt must have at least one token")
        out: list[_Row] = []
        for r in new:
            row_sampling = r.sampling or sampling
            if r.max_new_tokens > 0:  # a request for no tokens yields nothing
                out.append(
                    _Row(
                        index=arrived,
                        request=r,
                        sampling=row_sampling,
                        stops=frozenset(r.stop_token_ids) if r.stop_token_ids is not None else eos,
                        generator=torch.Generator().manual_seed(row_sampling.seed),
                    )
                )
            arrived += 1
        return out

    def stopped(row: _Row) -> bool:
        return cancelled is not None and cancelled(row.index)

    rows = admit(requests)
    state = _Batch(
        model=model,
        pad=pad,
        prefix_cache=prefix_cache,
        on_degrade=on_degrade,
        rows_apart=prefills_rows_apart(model),
    )
    logits = state.start(rows) if rows else torch.zeros(0, 0)  # (B, V)
    while True:
        finished_now: list[int] = []
        try:
            for b, row in enumerate(rows):
                token = _next_token(logits[b], row=row)
                row.generated.append(token)
                count = len(row.generated)
                finished = count >= row.request.max_new_tokens or (
                    token in row.stops and count > row.request.min_new_tokens
                )
                if finished:
                    finished_now.append(b)
                yield TokenEvent(request=row.index, token_id=token, finished=finished)
        except GeneratorExit:
            # A caller stops reading once every answer it waits for is complete (the
            # pipeline frees the batch at once), before the step that would store them:
            # the next turn of those conversations starts with their prompt and answer.
            with contextlib.suppress(*OOM_ERRORS):  # storing is a saving, not a duty
                for b in finished_now:
                    if not stopped(rows[b]):
                        state.remember(b, rows[b])
            raise
        keep = [b for b, row in enumerate(rows) if b not in finished_now and not stopped(row)]
        for b in finished_now:
            # A row stopped as it finished is an answer nobody takes (the pipeline's
            # refusal of a question begun before its verdict): its KV is no turn's.
            if not stopped(rows[b]):
                state.remember(b, rows[b])
        if len(keep) < len(rows):
            rows = [rows[b] for b in keep]
            state.select(keep)
        joining = admit(incoming()) if incoming is not None else []
        if not rows and not joining:
            return
        if not rows:
            rows, logits = joining, state.start(joining)
        elif not joining:
            logits = state.step(rows)
        else:
            logits = state.step(rows)
            logits = torch.cat([logits, state.join(joining, rows_before=rows)], dim=0)
            rows = rows + joining


class _Batch:
    """The tensors of the rows in flight: mask, positions, KV cache; the reuse of cached
    prompt starts; and the recovery from out-of-memory by re-prefilling from the rows'
    checkpoints."""

    def __init__(
        self,
        *,
        model: StreamingModel,
        pad: int,
        prefix_cache: PrefixCache | None = None,
        on_degrade: Callable[[Placement], None] | None = None,
        rows_apart: bool = False,
    ) -> None:
        self._model = model
        self._on_degrade = on_degrade
        self._pad = pad
        self._recoveries = 0
        self._cache = model.new_cache()
        self._mask = torch.zeros(0, 0, dtype=torch.long)
        self._positions = torch.zeros(0, 0, dtype=torch.long)
        # Only plain layers hold every position's KV (a sliding window drops the start).
        self._prefix = prefix_cache if prefix_cache is not None and _plain(self._cache) else None
        # Each row's prefill its own forward (`prefills_rows_apart`); plain layers only,
        # whose KV `_append` merges.
        self._rows_apart = rows_apart and _plain(self._cache)
        self._s_per_token = 0.0  # the last prefill's time per token (the cost it saves)
        # Rows whose prompt KV is still to be stored: done at the next step boundary, so
        # the copy does not delay the first token.
        self._unstored: list[tuple[int, list[int]]] = []

    def start(self, rows: list[_Row]) -> torch.Tensor:
        """Prefill the rows' checkpoints (prompt + tokens so far); logits (B, V)."""
        self._unstored = []
        if self._rows_apart and len(rows) > 1:
            return self._start_apart(rows)
        while True:
            try:
                logits = self._prefill(rows)
            except OOM_ERRORS as e:
                self._recover(e)
                continue
            if self._prefix is not None:
                self._unstored = [(b, row.checkpoint) for b, row in enumerate(rows)]
            return logits

    def _start_apart(self, rows: list[_Row]) -> torch.Tensor:
        """Each row prefilled in a forward of its own, then appended to the batch (as a
        row joining it would be); each prompt's KV is stored before the next row looks
        up its start, so rows that share one (a system prompt) prefill it once."""
        logits = [self.start(rows[:1])]
        for row in rows[1:]:
            self.store_pending()
            other = self._fresh()
            logits.append(other.start([row]))
            self._append(other)
        return torch.cat(logits, dim=0)

    def _fresh(self) -> _Batch:
        """An empty batch on the same model and cache, whose rows this one takes."""
        return _Batch(
            model=self._model,
            pad=self._pad,
            prefix_cache=self._prefix,
            on_degrade=self._on_degrade,
            rows_apart=self._rows_apart,
        )

    def _prefill(self, rows: list[_Row]) -> torch.Tensor:
        """One forward for all rows, hits and misses: each row's cached KV sits, left
        padded, in a "past" block of columns, and its tokens still to prefill, left
        padded, after it. A miss has no past; positions count the row's own tokens."""
        prompts = [row.checkpoint for row in rows]
        hits: list[PrefixHit | None] = [None] * len(rows)
        if self._prefix is not None:
            hits = [self._prefix.lookup(p, max_tokens=len(p) - 1) for p in prompts]
        if all(h is None for h in hits):
            return self._prefill_plain(prompts)
        reused = [h.tokens if h is not None else 0 for h in hits]
        past = max(reused)
        suffixes = [p[m:] for p, m in zip(prompts, reused, strict=True)]
        width = max(len(s) for s in suffixes)
        ids = torch.full((len(rows), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(rows), past + width), dtype=torch.long)
        positions = torch.zeros((len(rows), width), dtype=torch.long)
        for b, (suffix, m) in enumerate(zip(suffixes, reused, strict=True)):
            n = len(suffix)
            ids[b, width - n :] = torch.tensor(suffix, dtype=torch.long)
            mask[b, past - m : past] = 1
            mask[b, past + width - n :] = 1
            positions[b, width - n :] = torch.arange(m, m + n)
        self._cache = self._model.new_cache()
        for i, layer in enumerate(self._cache.layers):
            # Where the layer keeps its KV: the host for a host-resident layer.
            where = torch.device("cpu") if is_host_layer(layer) else self._model.device
            keys = _past_block([h.keys[i] if h else None for h in hits], past=past, device=where)
            values = _past_block(
                [h.values[i] if h else None for h in hits], past=past, device=where
            )
            layer.lazy_initialization(keys, values)
            layer.keys, layer.values = keys, values
        return self._forward_prefill(
            ids=ids, mask=mask, positions=positions, tokens=sum(len(s) for s in suffixes)
        )

    def _prefill_plain(self, prompts: list[list[int]]) -> torch.Tensor:
        ids, mask = left_pad(prompts, pad=self._pad)  # (B, T)
        self._cache = self._model.new_cache()
        return self._forward_prefill(
            ids=ids, mask=mask, positions=positions_of(mask), tokens=max(1, int(mask.sum()))
        )

    def _forward_prefill(
        self, *, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, tokens: int
    ) -> torch.Tensor:
        """The prefill forward on self._cache; its time per prefilled token is the cost
        the prefix cache credits to the blocks it keeps."""
        began = time.perf_counter()
        logits = self._model.forward(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            cache=self._cache,
            phase="prefill",
        )  # (B, 1, V)
        out = logits[:, -1, :].float().cpu()
        self._s_per_token = (time.perf_counter() - began) / tokens
        self._mask, self._positions = mask, positions[:, -1:]
        return out

    def remember(self, b: int, row: _Row) -> None:
        """Store row `b`'s KV so far (its prompt and answer, less the last token, which
        was never fed) for the conversation's next turn."""
        self.store_pending()
        self._store(b, row.checkpoint[:-1])

    def store_pending(self) -> None:
        """Store the KV of the prompts prefilled last (before rows move or leave)."""
        pending, self._unstored = self._unstored, []
        for b, ids in pending:
            self._store(b, ids)

    def _store(self, b: int, ids: list[int]) -> None:
        if self._prefix is None or not ids:
            return
        real = self._mask[b].bool()  # the row's own columns (left padding is not KV)
        if int(real.sum()) < len(ids):
            return
        keys, values = [], []
        for layer in self._cache.layers:
            cols = real.to(layer.keys.device)
            keys.append(layer.keys[b][:, cols][:, : len(ids)])
            values.append(layer.values[b][:, cols][:, : len(ids)])
        self._prefix.insert(ids, keys=keys, values=values, prefill_s_per_token=self._s_per_token)

    def step(self, rows: list[_Row]) -> torch.Tensor:
        """Feed each row's last token; logits (B, V)."""
        self.store_pending()
        step_ids = torch.tensor([[row.generated[-1]] for row in rows], dtype=torch.long)  # (B, 1)
        mask = torch.cat([self._mask, torch.ones(len(rows), 1, dtype=torch.long)], dim=1)
        positions = self._positions + 1  # (B, 1)
        try:
            logits = self._model.forward(
                input_ids=step_ids,
                attention_mask=mask,
                position_ids=positions,
                cache=self._cache,
                phase="decode",
            )
        except OOM_ERRORS as e:
            self._recover(e)
            return self.start(rows)
        self._mask, self._positions = mask, positions
        return logits[:, -1, :].float().cpu()

    def join(self, rows: list[_Row], *, rows_before: list[_Row]) -> torch.Tensor:
        """Prefill `rows` on their own and append them to the batch; their logits (B', V).
        Plain KV layers are merged (left-padded to one length); a cache with sliding
        window or other layers is rebuilt from every row's checkpoint instead."""
        self.store_pending()
        if not _mergeable(self._cache):
            return self.start(rows_before + rows)[len(rows_before) :]
        other = self._fresh()
        logits = other.start(rows)
        self._append(other)
        return logits

    def _append(self, other: _Batch) -> None:
        """`other`'s rows join this batch after its own (KV and masks left-padded)."""
        width = max(self._mask.shape[1], other._mask.shape[1])
        for mine, theirs in zip(self._cache.layers, other._cache.layers, strict=True):
            mine.keys = torch.cat([_pad_left(mine.keys, width), _pad_left(theirs.keys, width)])
            mine.values = torch.cat(
                [_pad_left(mine.values, width), _pad_left(theirs.values, width)]
            )
        self._mask = torch.cat(
            [_pad_left(self._mask, width, dim=1), _pad_left(other._mask, width, dim=1)]
        )
        self._positions = torch.cat([self._positions, other._positions])
        # The newcomers' prompts are stored from their rows in this batch.
        offset = self._mask.shape[0] - other._mask.shape[0]
        self._unstored += [(offset + b, ids) for b, ids in other._unstored]
        other._unstored = []

    def select(self, keep: list[int]) -> None:
        """Only the rows `keep` stay; the others' KV is dropped now."""
        self.store_pending()
        # A CPU index works for KV on any device (host-resident layers included).
        index = torch.tensor(keep, dtype=torch.long)
        self._cache.batch_select_indices(index)
        self._mask = self._mask[index]
        self._positions = self._positions[index]

    def _recover(self, error: BaseException) -> None:
        self._cache = self._model.new_cache()  # drop the partial KV before anything else
        self._recoveries += 1
        if self._recoveries > MAX_RECOVERIES:
            raise error
        placement = self._model.degrade()
        if placement is None:
            raise error
        if self._on_degrade is not None:
            self._on_degrade(placement)


def _past_block(
    parts: list[torch.Tensor | None], *, past: int, device: torch.device
) -> torch.Tensor:
    """(B, kv_heads, past, head_dim): each row's cached (kv_heads, m, head_dim) tensor
    right-aligned, zeros before it (masked out); one row that fills it is not copied."""
    if len(parts) == 1 and parts[0] is not None and parts[0].shape[1] == past:
        return parts[0].unsqueeze(0).to(device)
    sample = next(t for t in parts if t is not None)
    heads, _, dim = sample.shape
    out = torch.zeros((len(parts), heads, past, dim), dtype=sample.dtype, device=device)
    for b, t in enumerate(parts):
        if t is not None:
            out[b, :, past - t.shape[1] :] = t
    return out


def prefills_rows_apart(model: StreamingModel) -> bool:
    """Whether rows starting together are prefilled one forward each: the CPU computes
    and every weight is resident in host memory, so one forward per row reads nothing
    again (see the module's docstring)."""
    placement = getattr(model, "placement", None)
    if placement is None:
        return False
    tiers = {*placement.layer_tiers, placement.embed_tier, placement.head_tier}
    return placement.compute_tier == "cpu" and tiers == {"cpu"}


def _plain(cache: object) -> bool:
    """Every layer keeps all positions' KV (no sliding window, no other kind)."""
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer for layer in getattr(cache, "layers", []))


def _mergeable(cache: object) -> bool:
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", [])
    return all(
        type(layer) is DynamicLayer and layer.is_initialized and layer.keys.numel() > 0
        for layer in layers
    )


def _pad_left(t: torch.Tensor, width: int, *, dim: int = -2) -> torch.Tensor:
    """Zeros before `t` along `dim` up to `width` (masked out by the attention mask)."""
    missing = width - t.shape[dim]
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([torch.zeros(shape, dtype=t.dtype, device=t.device), t], dim=dim)


def generate_ids(
    *,
    model: StreamingModel,
    requests: Sequence[GenerationRequest],
    sampling: Sampling = Sampling(),
) -> list[list[int]]:
    """All new tokens per request (tests, benchmarks)."""
    out: list[list[int]] = [[] for _ in requests]
    for event in generate(model=model, requests=requests, sampling=sampling):
        out[event.request].append(event.token_id)
    return out


def left_pad(prompts: list[list[int]], *, pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask), both (B, T_max), prompts right-aligned."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        mask[i, width - len(p) :] = 1
    return ids, mask


def positions_of(mask: torch.Tensor) -> torch.Tensor:
    """Position of each token among its row's real tokens; padding gets 0 (as HF does)."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def _next_token(logits: torch.Tensor, *, row: _Row) -> int:
    """(V,) float logits of one row → its next token id."""
    if row.sampling.repetition_penalty != 1.0:
        window = row.sampling.repetition_window
        seen = row.checkpoint[-window:] if window > 0 else row.checkpoint
        logits = penalize_repetition(
            logits.unsqueeze(0), seen=[seen], penalty=row.sampling.repetition_penalty
        )[0]
    return int(sample(logits.unsqueeze(0), sampling=row.sampling, generator=row.generator)[0])


def penalize_repetition(
    logits: torch.Tensor, *, seen: list[list[int]], penalty: float
) -> torch.Tensor:
    """(B, V) logits with every seen token's logit made less likely (CTRL's penalty)."""
    out = logits.clone()
    for b, tokens in enumerate(seen):
        if not tokens:
            continue
        index = torch.tensor(sorted(set(tokens)), dtype=torch.long)
        values = out[b, index]
        out[b, index] = torch.where(values > 0, values / penalty, values * penalty)
    return out


def sample(logits: torch.Tensor, *, sampling: Sampling, generator: torch.Generator) -> torch.Tensor:
    """(B, V) float logits → (B,) token ids."""
    if sampling.temperature <= 0:
        return logits.argmax(dim=-1)
    logits = logits / sampling.temperature
    if sampling.top_k > 0:
        k = min(sampling.top_k, logits.shape[-1])
        kth = torch.topk(logits, k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if sampling.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        # Keep the smallest prefix whose mass reaches top_p (always at least one token).
        drop = sorted_probs.cumsum(-1) - sorted_probs > sampling.top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def _pad_of(model: StreamingModel) -> int:
    pad = model.config.pad_token_id
    if pad is not None:
        return int(pad)
    return model.eos_token_ids[0] if model.eos_token_ids else 0
