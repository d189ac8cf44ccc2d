"""The values the planner takes and gives: StoreSpec, Workload, TierBytes, Placement.

Placement is the only thing the planner hands the executor, the store and the
pipeline (FlexGen's `Policy`): *where* each tensor lives, never *how* it moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from engine.errors import PlacementError

Tier = Literal["gpu", "cpu", "disk"]
TIERS: tuple[Tier, ...] = ("gpu", "cpu", "disk")

MIB = 2**20

# No store yet: plan as if for a modest one (≈350k chunks of 384-dim float32
# vectors in 8 partitions) so that retrieval keeps a real share of RAM.
DEFAULT_PARTITION_COUNT = 8
DEFAULT_PARTITION_BYTES = 64 * MIB
DEFAULT_VECTOR_DIM = 384


@dataclass(frozen=True, kw_only=True)
class TierBytes:
    gpu: int = 0
    cpu: int = 0
    disk: int = 0

    @property
    def total(self) -> int:
        return self.gpu + self.cpu + self.disk

    def get(self, tier: Tier) -> int:
        return {"gpu": self.gpu, "cpu": self.cpu, "disk": self.disk}[tier]

    def as_dict(self) -> dict[str, int]:
        return {"gpu": self.gpu, "cpu": self.cpu, "disk": self.disk}


@dataclass(frozen=True, kw_only=True)
class StoreSpec:
    """The vector index as the planner sees it: partitions of roughly equal size
    that are either resident in memory or paged in from disk per retrieval batch."""

    index_bytes: int
    partition_count: int
    partition_bytes: int
    vector_dim: int = DEFAULT_VECTOR_DIM
    row_bytes: int = 0  # resident bytes of one vector as searched; 0: float32

    def __post_init__(self) -> None:
        if min(self.index_bytes, self.partition_count, self.partition_bytes) < 0:
            raise ValueError("store sizes must not be negative")
        if self.vector_dim <= 0:
            raise ValueError("vector_dim must be positive")

    @classmethod
    def default(cls) -> StoreSpec:
        return cls(
            index_bytes=DEFAULT_PARTITION_COUNT * DEFAULT_PARTITION_BYTES,
            partition_count=DEFAULT_PARTITION_COUNT,
            partition_bytes=DEFAULT_PARTITION_BYTES,
        )

    @classmethod
    def from_index(
        cls,
        *,
        index_bytes: int,
        partition_count: int,
        vector_dim: int = DEFAULT_VECTOR_DIM,
        row_bytes: int = 0,
    ) -> StoreSpec:
        """An index of `index_bytes` split into `partition_count` equal partitions."""
        count = max(partition_count, 1) if index_bytes else 0
        per = -(-index_bytes // count) if count else 0
        return cls(
            index_bytes=index_bytes,
            partition_count=count,
            partition_bytes=per,
            vector_dim=vector_dim,
            row_bytes=row_bytes,
        )

    @property
    def vectors_per_partition(self) -> int:
        return max(1, self.partition_bytes // (self.row_bytes or 4 * self.vector_dim))


@dataclass(frozen=True, kw_only=True)
class Workload:
    """What the plan must carry: `batch` sequences of `context_tokens` each (prompt +
    output) in generation, `retrieval_batch` questions per search."""

    batch: int = 4
    context_tokens: int = 2048
    retrieval_batch: int = 8

    def __post_init__(self) -> None:
        if self.batch < 1 or self.context_tokens < 1 or self.retrieval_batch < 1:
            raise ValueError("batch, context_tokens and retrieval_batch must be at least 1")


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where everything lives for one generation batch size.

    Memory models: "discrete" (a GPU with its own memory, RAM as host tier),
    "unified" (Apple: one pool; the "gpu" tier is that pool and the index shares
    it), "cpu_only" (RAM is the compute tier, so the "gpu" tier stays empty).
    `budgets` are capacities less the safety margins; with `fits`, every
    `*_used_bytes` is within its budget in both prefill and decode.
    """

    fits: bool
    message: str  # empty when it fits; otherwise how much memory is missing, in words
    missing_bytes: int  # 0 when it fits
    memory_model: Literal["discrete", "unified", "cpu_only"]
    compute_tier: Tier
    # Tier of each decoder layer, of the embedding, and of the final norm + LM head.
    layer_tiers: tuple[Tier, ...]
    embed_tier: Tier
    head_tier: Tier
    weights: TierBytes
    kv: TierBytes
    batch: int  # the generation batch this placement is sized for
    context_tokens: int
    workspace_prefill_bytes: int  # H(B) of a prefill step
    workspace_decode_bytes: int  # H(B) of a decode step
    stream_slot_bytes: int  # one streamed layer's weights + off-tier KV (0: nothing streams)
    prefetch_depth_prefill: int  # layers fetched ahead of the one computing
    prefetch_depth_decode: int
    resident_partitions: int
    resident_partition_bytes: int
    retrieval_workspace_bytes: int
    max_batch: int  # largest generation batch these weights and partitions allow
    max_retrieval_batch: int
    capacities: TierBytes  # raw memory per tier (GPU free, RAM available, disk free)
    budgets: TierBytes  # capacities less the safety margins
    used: TierBytes  # peak use per tier over prefill and decode

    @property
    def workspace_bytes(self) -> int:
        return max(self.workspace_prefill_bytes, self.workspace_decode_bytes)

    def layer_ranges(self) -> tuple[tuple[Tier, int, int], ...]:
        """Runs of consecutive layers on one tier: ((tier, first, last_exclusive), ...)."""
        runs: list[tuple[Tier, int, int]] = []
        for i, tier in enumerate(self.layer_tiers):
            if runs and runs[-1][0] == tier:
                runs[-1] = (tier, runs[-1][1], i + 1)
            else:
                runs.append((tier, i, i + 1))
        return tuple(runs)

    def raise_if_unfit(self) -> Placement:
        """Self when it fits; otherwise PlacementError with the plain message."""
        if not self.fits:
            raise PlacementError(self.message)
        return self

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form (used by `ragdoll plan --json`)."""
        return {
            "fits": self.fits,
            "message": self.message,
            "missing_bytes": self.missing_bytes,
            "memory_model": self.memory_model,
            "compute_tier": self.compute_tier,
            "weights": self.weights.as_dict(),
            "kv": self.kv.as_dict(),
            "layers": [
                {"tier": tier, "first": first, "last": last - 1}
                for tier, first, last in self.layer_ranges()
            ],
            "embed_tier": self.embed_tier,
            "head_tier": self.head_tier,
            "batch": self.batch,
            "context_tokens": self.context_tokens,
            "workspace_bytes": self.workspace_bytes,
            "workspace_prefill_bytes": self.workspace_prefill_bytes,
            "workspace_decode_bytes": self.workspace_decode_bytes,
            "stream_slot_bytes": self.stream_slot_bytes,
            "prefetch_depth": {
                "prefill": self.prefetch_depth_prefill,
                "decode": self.prefetch_depth_decode,
            },
            "resident_partitions": self.resident_partitions,
            "resident_partition_bytes": self.resident_partition_bytes,
            "retrieval_workspace_bytes": self.retrieval_workspace_bytes,
            "max_batch": self.max_batch,
            "max_retrieval_batch": self.max_retrieval_batch,
            "capacities": self.capacities.as_dict(),
            "budgets": self.budgets.as_dict(),
            "used": self.used.as_dict(),
        }
