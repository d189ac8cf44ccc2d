"""Prefix KV reuse across requests and turns (RAGCache's knowledge tree and PGDSF).

A RAG prompt is the system prompt, then sources, then the conversation so far, then the
new question: consecutive requests of one conversation, and requests citing the same
sources, start with the same tokens. The KV of such a shared start is computed once and
reused, so a request prefills only its new tail.

Structure: a prefix tree over fixed blocks of `block_tokens` token ids (vLLM's blocks,
SGLang's radix tree with block-sized edges). A node holds the KV of one block, and a path
from the root spells a prompt's start, so the KV of the system prompt is stored once
and shared by every conversation under it (RAGCache's knowledge tree, whose nodes are
documents; here they are blocks, because the executor sees token ids, not documents,
and a block tree needs no node splitting when two prompts part mid-document). A match
is whole blocks, then the shared start of one more stored block (read, never split: a
node keeps its whole block), so a prompt that parts from a cached one mid-block
prefills only from where they part; every node has the same number of tokens, so a
node's bytes, cost and priority compare evenly.

Tiers (RAGCache §5): nodes live on the compute device or in host RAM, each tier with a
byte budget. Device nodes are parents of host nodes, never the other way round: a node
depends on its parent's KV, so the parent is kept at least as close. Only a tier's
leaves leave it: a device node without device children is demoted to the host, a host
node without children is evicted (its parent still reproduces every other path). With
no device budget (a CPU-only machine, whose compute tier is RAM) there is one tier.

Eviction order is PGDSF: Priority = Clock + Frequency × Cost / Size, where Frequency is
how many requests used the node, Cost the prefill seconds the node saves (the measured
per-token prefill time of the forward that made it, times its tokens), Size its bytes;
each tier has its own Clock, raised to the priority of each node that leaves the tier,
so a node not used for a while loses to newer ones of equal worth. The lowest priority
leaves first.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch

from engine.runtime.planner.placement import Placement

TierName = Literal["device", "host"]
DEFAULT_BLOCK_TOKENS = 16
# A cache larger than this rarely pays: a conversation's prompt is a few thousand tokens.
DEFAULT_MAX_BYTES = 2**30


def prefix_cache_for(
    *, placement: Placement, device: torch.device, max_bytes: int = DEFAULT_MAX_BYTES
) -> PrefixCache:
    """A cache sized from what `placement` leaves free: half the compute device's
    headroom and a quarter of the host's, each at most `max_bytes`. The planner sized the
    batch's own KV already; the cache only takes memory nothing else was given. Without
    a discrete GPU the compute tier is RAM, so there is one (host) tier."""
    if max_bytes < 0:
        raise ValueError("max_bytes cannot be negative")
    budgets, used = placement.budgets, placement.used
    free_gpu = max(0, budgets.gpu - used.gpu)
    free_cpu = max(0, budgets.cpu - used.cpu)
    discrete = device.type == "cuda" and placement.memory_model == "discrete"
    return PrefixCache(
        device=device,
        device_bytes=min(max_bytes, free_gpu // 2) if discrete else 0,
        host_bytes=min(max_bytes, free_cpu // 4),
    )


@dataclass(frozen=True, kw_only=True)
class PrefixCacheStats:
    lookups: int
    hits: int  # lookups that reused at least one token
    misses: int
    tokens_reused: int  # prompt tokens not prefilled thanks to the cache
    tokens_stored: int  # tokens held now, both tiers
    device_bytes: int
    host_bytes: int
    device_budget: int
    host_budget: int
    device_entries: int
    host_entries: int
    demotions: int  # device → host
    promotions: int  # host → device
    evictions: int  # nodes dropped from the host tier (or from the device, with no host room)


@dataclass(frozen=True, kw_only=True)
class PrefixHit:
    """The KV of a prompt's first `tokens` tokens, per layer (kv_heads, tokens, head_dim),
    on the compute device."""

    tokens: int
    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]


@dataclass(eq=False, kw_only=True)
class _Node:
    block: tuple[int, ...]
    parent: _Node | None
    keys: tuple[torch.Tensor, ...] = ()
    values: tuple[torch.Tensor, ...] = ()
    tier: TierName = "host"
    size: int = 0  # bytes
    cost_s: float = 0.0
    frequency: int = 0
    priority: float = 0.0
    children: dict[tuple[int, ...], _Node] = field(default_factory=dict)


class PrefixCache:
    """KV of prompt prefixes, keyed on token ids, in a device tier and a host tier.

    Thread-safe: every public method holds one lock. One cache serves one model (the KV
    of another model, or another dtype, is not the same prefix)."""

    def __init__(
        self,
        *,
        device: torch.device,
        device_bytes: int,
        host_bytes: int,
        block_tokens: int = DEFAULT_BLOCK_TOKENS,
        host: torch.device | None = None,
    ) -> None:
        if block_tokens < 1:
            raise ValueError("block_tokens must be at least 1")
        if device_bytes < 0 or host_bytes < 0:
            raise ValueError("budgets cannot be negative")
        self.block_tokens = block_tokens
        self._devices: dict[TierName, torch.device] = {
            "device": device,
            "host": host or torch.device("cpu"),
        }
        self._budget: dict[TierName, int] = {"device": device_bytes, "host": host_bytes}
        self._used: dict[TierName, int] = {"device": 0, "host": 0}
        self._clock: dict[TierName, float] = {"device": 0.0, "host": 0.0}
        self._root = _Node(block=(), parent=None, tier="device")
        # Each tier's leaves (nodes without a child in their own tier): the only nodes
        # that may leave it, kept up to date so that eviction need not walk the tree.
        self._leaves: dict[TierName, set[_Node]] = {"device": set(), "host": set()}
        self._entries: dict[TierName, int] = {"device": 0, "host": 0}
        self._lock = threading.Lock()
        self._layers: int | None = None
        self._counts = {
            "lookups": 0,
            "hits": 0,
            "misses": 0,
            "tokens_reused": 0,
            "demotions": 0,
            "promotions": 0,
            "evictions": 0,
        }

    # ------------------------------------------------------------------ public

    def lookup(self, ids: Sequence[int], *, max_tokens: int | None = None) -> PrefixHit | None:
        """The KV of the longest cached start of `ids` (at most `max_tokens` tokens); None
        when not even one token is cached. The match is whole blocks, then the start of
        one more stored block where `ids` part from it (a radix tree's partial edge): a
        conversation's next turn usually leaves the cached turn mid-block (the answer
        is re-rendered, the template closes the turn), and those tokens would otherwise
        be prefilled again. A hit counts as one use of each node on the path."""
        limit = len(ids) if max_tokens is None else min(len(ids), max_tokens)
        with self._lock:
            self._counts["lookups"] += 1
            path = self._walk(ids, limit=limit)
            start = len(path) * self.block_tokens
            parent = path[-1] if path else self._root
            partial, shared = self._partial(parent, ids[start:limit])
            if not path and partial is None:
                self._counts["misses"] += 1
                return None
            self._counts["hits"] += 1
            tokens = start + shared
            self._counts["tokens_reused"] += tokens
            used = [*path, partial] if partial is not None else path
            for node in used:
                node.frequency += 1
                self._reprioritize(node)
            self._promote(used)
            keys = self._gather(path, partial, shared, values=False)
            values = self._gather(path, partial, shared, values=True)
        return PrefixHit(tokens=tokens, keys=keys, values=values)

    def insert(
        self,
        ids: Sequence[int],
        *,
        keys: Sequence[torch.Tensor],
        values: Sequence[torch.Tensor],
        prefill_s_per_token: float,
    ) -> int:
        """Store the KV of `ids` (per layer (kv_heads, ≥ len(ids) rounded down to blocks,
        head_dim)) block by block, skipping blocks already held. Returns how many tokens
        were newly stored; storing stops where no room can be made."""
        if len(keys) != len(values) or not keys:
            raise ValueError("keys and values need one tensor per layer")
        tokens = min(len(ids), int(keys[0].shape[1])) // self.block_tokens * self.block_tokens
        stored = 0
        with self._lock:
            if self._layers is None:
                self._layers = len(keys)
            elif self._layers != len(keys):
                raise ValueError(f"KV of {len(keys)} layers in a cache of {self._layers}")
            node = self._root
            pinned: set[int] = set()
            for start in range(0, tokens, self.block_tokens):
                block = tuple(int(t) for t in ids[start : start + self.block_tokens])
                child = node.children.get(block)
                if child is None:
                    child = self._new_node(
                        block=block,
                        parent=node,
                        keys=[k[:, start : start + self.block_tokens] for k in keys],
                        values=[v[:, start : start + self.block_tokens] for v in values],
                        cost_s=prefill_s_per_token * self.block_tokens,
                        pinned=pinned,
                    )
                    if child is None:
                        break
                    stored += self.block_tokens
                pinned.add(id(child))
                node = child
        return stored

    def stats(self) -> PrefixCacheStats:
        with self._lock:
            entries = self._entries
            return PrefixCacheStats(
                **self._counts,
                tokens_stored=(entries["device"] + entries["host"]) * self.block_tokens,
                device_bytes=self._used["device"],
                host_bytes=self._used["host"],
                device_budget=self._budget["device"],
                host_budget=self._budget["host"],
                device_entries=entries["device"],
                host_entries=entries["host"],
            )

    def priorities(self) -> dict[tuple[int, ...], tuple[TierName, float]]:
        """Each node's (tier, priority), keyed on its tokens from the root (tests)."""
        with self._lock:
            return {self._spelling(n): (n.tier, n.priority) for n in self._nodes()}

    def clear(self) -> None:
        with self._lock:
            self._root.children.clear()
            self._used = {"device": 0, "host": 0}
            self._entries = {"device": 0, "host": 0}
            self._leaves = {"device": set(), "host": set()}

    # ---------------------------------------------------------------- internal

    def _walk(self, ids: Sequence[int], *, limit: int) -> list[_Node]:
        path: list[_Node] = []
        node = self._root
        b = self.block_tokens
        for start in range(0, limit - b + 1, b):
            child = node.children.get(tuple(int(t) for t in ids[start : start + b]))
            if child is None:
                break
            path.append(child)
            node = child
        return path

    def _partial(self, node: _Node, rest: Sequence[int]) -> tuple[_Node | None, int]:
        """The child of `node` whose block shares the longest start with `rest` (fewer
        tokens than a block: a whole one would have been walked), and how many."""
        best: _Node | None = None
        shared = 0
        want = [int(t) for t in rest[: self.block_tokens - 1]]
        for child in node.children.values():
            n = 0
            for a, b in zip(child.block, want, strict=False):
                if a != b:
                    break
                n += 1
            if n > shared:
                best, shared = child, n
        return best, shared

    def _gather(
        self, path: list[_Node], partial: _Node | None, shared: int, *, values: bool
    ) -> tuple[torch.Tensor, ...]:
        """Per layer, the KV of `path` then the first `shared` tokens of `partial`, joined
        on the compute device."""
        compute = self._devices["device"]
        nodes = [*path, partial] if partial is not None else path
        layers = len(nodes[0].keys)
        out = []
        for layer in range(layers):
            parts = [(n.values if values else n.keys)[layer].to(compute) for n in path]
            if partial is not None:
                part = (partial.values if values else partial.keys)[layer]
                parts.append(part[:, :shared].to(compute))
            out.append(torch.cat(parts, dim=1))
        return tuple(out)

    def _new_node(
        self,
        *,
        block: tuple[int, ...],
        parent: _Node,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
        cost_s: float,
        pinned: set[int],
    ) -> _Node | None:
        size = sum(t.numel() * t.element_size() for t in (*keys, *values))
        tier: TierName | None = None
        if parent.tier == "device" and self._make_room("device", size, pinned=pinned):
            tier = "device"
        elif self._make_room("host", size, pinned=pinned):
            tier = "host"
        if tier is None:
            return None
        where = self._devices[tier]
        node = _Node(
            block=block,
            parent=parent,
            # Copies: a view would keep the whole batch's KV alive.
            keys=tuple(k.to(where, copy=True).contiguous() for k in keys),
            values=tuple(v.to(where, copy=True).contiguous() for v in values),
            tier=tier,
            size=size,
            cost_s=cost_s,
            frequency=1,
        )
        self._reprioritize(node)
        parent.children[block] = node
        self._used[tier] += size
        self._entries[tier] += 1
        self._refresh(node)
        self._refresh(parent)
        return node

    def _refresh(self, node: _Node) -> None:
        """Put `node` in its tier's leaf set or take it out, as its children say."""
        if node is self._root:
            return
        for leaves in self._leaves.values():
            leaves.discard(node)
        if not any(c.tier == node.tier for c in node.children.values()):
            self._leaves[node.tier].add(node)

    def _reprioritize(self, node: _Node) -> None:
        node.priority = self._clock[node.tier] + node.frequency * node.cost_s / max(node.size, 1)

    def _make_room(self, tier: TierName, size: int, *, pinned: set[int]) -> bool:
        """Demote (device) or evict (host) the lowest-priority leaves of `tier` until
        `size` more bytes fit; False when they cannot."""
        if size > self._budget[tier]:
            return False
        while self._used[tier] + size > self._budget[tier]:
            victim = self._lowest_leaf(tier, pinned=pinned)
            if victim is None:
                return False
            self._clock[tier] = max(self._clock[tier], victim.priority)
            if tier == "device" and self._make_room(
                "host", victim.size, pinned=pinned | {id(victim)}
            ):
                self._move(victim, "host")
                self._counts["demotions"] += 1
            else:
                self._drop(victim)
        return True

    def _lowest_leaf(self, tier: TierName, *, pinned: set[int]) -> _Node | None:
        # Host nodes' children are host nodes too, so a host leaf has no children at all.
        candidates = (n for n in self._leaves[tier] if id(n) not in pinned)
        return min(candidates, key=lambda n: n.priority, default=None)

    def _move(self, node: _Node, tier: TierName) -> None:
        where = self._devices[tier]
        node.keys = tuple(k.to(where) for k in node.keys)
        node.values = tuple(v.to(where) for v in node.values)
        self._used[node.tier] -= node.size
        self._used[tier] += node.size
        self._entries[node.tier] -= 1
        self._entries[tier] += 1
        node.tier = tier
        self._reprioritize(node)
        self._refresh(node)
        if node.parent is not None:
            self._refresh(node.parent)

    def _drop(self, node: _Node) -> None:
        """Remove `node` and everything under it (its KV reproduces nothing without it)."""
        stack = [node]
        while stack:
            n = stack.pop()
            stack.extend(n.children.values())
            self._used[n.tier] -= n.size
            self._entries[n.tier] -= 1
            self._leaves[n.tier].discard(n)
            self._counts["evictions"] += 1
        assert node.parent is not None
        del node.parent.children[node.block]
        self._refresh(node.parent)

    def _promote(self, path: list[_Node]) -> None:
        """Bring a used path's host nodes to the device while there is free room there
        (nothing is demoted for it: the next insertion's PGDSF decides that)."""
        for node in path:
            parent = node.parent
            if node.tier == "device" or parent is None or parent.tier != "device":
                continue
            if self._used["device"] + node.size > self._budget["device"]:
                return
            self._move(node, "device")
            self._counts["promotions"] += 1

    def _nodes(self) -> list[_Node]:
        out: list[_Node] = []
        stack = list(self._root.children.values())
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(n.children.values())
        return out

    def _spelling(self, node: _Node) -> tuple[int, ...]:
        blocks: list[tuple[int, ...]] = []
        n: _Node | None = node
        while n is not None and n.parent is not None:
            blocks.append(n.block)
            n = n.parent
        return tuple(t for b in reversed(blocks) for t in b)
