"""`plan()`: where weights, KV cache, workspace and index partitions live.

The memory constraints of RAGDoll §4.4 hold in every plan that fits, with margins:

    (2)  w_gpu·W + c_gpu·C(B) + H(B) + stream buffers  ≤ M_gpu
    (3)  w_cpu·W + c_cpu·C(B) + P·M_p + retrieval workspace (+ disk staging) ≤ M_cpu
         w_disk·W + c_disk·C(B) ≤ free disk

where M_* are the capacities less a safety margin (CUDA context and fragmentation on
the GPU; the OS, the app and the page cache in RAM). On a machine without a GPU the
compute tier is RAM ("gpu" stays empty) and disk is the offload tier; on Apple the
GPU and RAM are one pool, which the "gpu" tier stands for and the index shares.

Policy (greedy; active profiling will refine it later):
1. Everything on the compute tier when weights + KV + workspace fit there.
2. Otherwise weights first, in the order embedding, final norm + LM head, layer 0,
   1, ...: a prefix stays on the compute tier, the next prefix in RAM, the rest on
   disk. Every weight is read every step, so any prefix is as good as another; this
   one keeps the large, once-per-step embedding and head resident and streams
   uniform layers, whose size sets the stream buffer. Room for the workspace and two
   stream slots (compute one layer, load the next) is set aside first.
3. KV next: on the compute tier if room is left, else RAM, else disk. Per decode
   step a byte of offloaded KV costs the same transfer as a byte of offloaded
   weight, so the tie goes to the weights, which also serve prefill.
4. Index partitions: one partition (the retrieval worker's working set) plus the
   retrieval workspace is reserved in RAM before anything is offloaded there; after
   weights and KV, the RAM left holds more partitions. Weights and KV come first
   because an offloaded weight is read every decode step, a paged partition once
   per retrieval batch; the extra partitions are the first to go when the batch grows.
5. Prefetch depth: the spare compute-tier memory in each phase, in stream slots,
   less the one computing; shallow in prefill (its workspace is large), deep in decode.

A batch larger than the machine holds is lowered to the largest that fits (the
placement's `batch`, with a `message` saying so); only a model that cannot run at batch
1 is refused. When something does not fit, `plan()` returns `fits=False` with `missing_bytes` and a
plain message (rather than raising) so that a caller can show the plan and what is
short; `Placement.raise_if_unfit()` turns it into a PlacementError.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from engine.runtime.hardware.profile import HardwareProfile
from engine.runtime.planner.machine import Machine, machine_of
from engine.runtime.planner.model_spec import ModelSpec
from engine.runtime.planner.placement import Placement, StoreSpec, Tier, TierBytes, Workload
from engine.runtime.planner.sizes import format_gib

PREFETCH_MAX_PREFILL = 2
PREFETCH_MAX_DECODE = 8
MAX_BATCH_CAP = 1024
MAX_RETRIEVAL_BATCH_CAP = 256
_MIN_STREAM_SLOTS = 2  # the layer computing and the one loading


@dataclass(frozen=True, kw_only=True)
class _Item:
    """A unit of weights that moves as a whole: embedding, head, one layer."""

    kind: str  # "embed", "head" or "layer"
    size: int


@dataclass(frozen=True, kw_only=True)
class _Fit:
    """KV, workspace and buffers for one batch size given where the weights are."""

    fits: bool
    deficit: int
    deficit_tier: str
    kv: TierBytes
    workspace_prefill: int
    workspace_decode: int
    slot: int
    depth_prefill: int
    depth_decode: int
    used: TierBytes  # with only the minimum partitions
    spare_partition_tier: int


def plan(
    *, hardware: HardwareProfile, model: ModelSpec, store: StoreSpec, workload: Workload
) -> Placement:
    machine = machine_of(hardware)
    items = _items_of(model, machine)
    tiers = _place_weights(
        machine=machine,
        model=model,
        store=store,
        workload=workload,
        items=items,
        batch=workload.batch,
    )
    fit = _fit(
        machine=machine,
        model=model,
        store=store,
        workload=workload,
        items=items,
        tiers=tiers,
        batch=workload.batch,
    )
    weights = _weight_bytes(items, tiers)

    extra_parts = 0
    if fit.fits and store.partition_bytes:
        spare_parts = max(0, store.partition_count - _min_partitions(store))
        extra_parts = min(spare_parts, fit.spare_partition_tier // store.partition_bytes)
    resident = _min_partitions(store) + extra_parts
    part_bytes = extra_parts * store.partition_bytes
    used = _add(fit.used, machine.partition_tier, part_bytes)

    rw = _retrieval_workspace(store=store, queries=workload.retrieval_batch)
    left_for_retrieval = fit.spare_partition_tier - part_bytes + rw
    max_retrieval = min(MAX_RETRIEVAL_BATCH_CAP, left_for_retrieval // _per_query_bytes(store))

    if fit.fits:
        max_batch = _largest(
            lambda b: (
                _fit(
                    machine=machine,
                    model=model,
                    store=store,
                    workload=workload,
                    items=items,
                    tiers=tiers,
                    batch=b,
                ).fits
            )
        )
        message = ""
    else:
        max_batch = _largest(lambda b: _plan_fits(machine, model, store, workload, items, b))
        if 0 < max_batch < workload.batch:
            # Refusing would leave the user nothing; a smaller batch only waits longer.
            lowered = plan(
                hardware=hardware,
                model=model,
                store=store,
                workload=dataclasses.replace(workload, batch=max_batch),
            )
            return dataclasses.replace(
                lowered,
                message=f"A batch of {workload.batch} does not fit here; planned for "
                f"{max_batch}, the largest that does.",
            )
        message = _shortfall_message(
            machine=machine,
            model=model,
            workload=workload,
            weights=weights,
            fit=fit,
            max_batch=max_batch,
        )

    layer_tiers = tuple(t for item, t in zip(items, tiers, strict=True) if item.kind == "layer")
    return Placement(
        fits=fit.fits,
        message=message,
        missing_bytes=0 if fit.fits else fit.deficit,
        memory_model=machine.memory_model,  # type: ignore[arg-type]
        compute_tier=machine.compute,
        layer_tiers=layer_tiers,
        embed_tier=_tier_of("embed", items, tiers),
        head_tier=_tier_of("head", items, tiers),
        weights=weights,
        kv=fit.kv,
        batch=workload.batch,
        context_tokens=workload.context_tokens,
        workspace_prefill_bytes=fit.workspace_prefill,
        workspace_decode_bytes=fit.workspace_decode,
        stream_slot_bytes=fit.slot,
        prefetch_depth_prefill=fit.depth_prefill,
        prefetch_depth_decode=fit.depth_decode,
        resident_partitions=resident,
        resident_partition_bytes=resident * store.partition_bytes,
        retrieval_workspace_bytes=rw,
        max_batch=max_batch,
        max_retrieval_batch=max(0, max_retrieval) if fit.fits else 0,
        capacities=machine.capacities,
        budgets=machine.budgets,
        used=used,
    )


def _items_of(model: ModelSpec, machine: Machine) -> list[_Item]:
    """The weights in the order they claim the compute tier: what streams is a suffix."""
    embed = _Item(kind="embed", size=model.embed_bytes)
    head = _Item(kind="head", size=model.head_bytes + model.final_norm_bytes)
    layers = [_Item(kind="layer", size=size) for size in model.layer_bytes]
    if _embedding_mapped(machine, model):
        return [head, *layers, embed]
    return [embed, head, *layers]


def _embedding_mapped(machine: Machine, model: ModelSpec) -> bool:
    """A CPU computing a model's kernel forms looks its embedding's rows up in the
    file's mapping wherever its home is (engine/runtime/executor/weights.py
    `_looked_up_in_map`): on the disk it costs a few pages a step, so it is the first
    weight to leave RAM, before any layer has to stream."""
    return machine.compute == "cpu" and model.computed_compressed


def _tier_of(kind: str, items: list[_Item], tiers: list[Tier]) -> Tier:
    return next(t for item, t in zip(items, tiers, strict=True) if item.kind == kind)


def _min_partitions(store: StoreSpec) -> int:
    return min(1, store.partition_count)


def _per_query_bytes(store: StoreSpec) -> int:
    # One float32 distance per vector of the partition being searched, plus the query.
    return 4 * store.vectors_per_partition + 4 * store.vector_dim


def _retrieval_workspace(*, store: StoreSpec, queries: int) -> int:
    return queries * _per_query_bytes(store) if store.partition_count else 0


def _partition_reserve(store: StoreSpec, workload: Workload) -> int:
    return _min_partitions(store) * store.partition_bytes + _retrieval_workspace(
        store=store, queries=workload.retrieval_batch
    )


def _kv_layer(model: ModelSpec, batch: int, tokens: int) -> int:
    return batch * tokens * model.kv_bytes_per_token_per_layer


def _workspaces(
    model: ModelSpec, batch: int, tokens: int, *, per_matrix: bool = False
) -> tuple[int, int]:
    return (
        model.prefill_workspace_bytes(batch=batch, prompt_tokens=tokens, per_matrix=per_matrix),
        model.decode_workspace_bytes(batch=batch, context_tokens=tokens, per_matrix=per_matrix),
    )


def _decodes_per_matrix(machine: Machine, model: ModelSpec, *, streams: bool) -> bool:
    """Whether the executor will decode compressed layers one matrix at a time: on a
    CPU when any layer streams from the disk (engine/runtime/executor/packed.py `choose_decode`;
    a CPU compute tier has no host tier, so a layer not in RAM is on the disk), and a
    kernel-form prefill then keeps no layer decoded across its chunks
    (engine/runtime/executor/forward.py). On a GPU it decodes whole layers one ahead."""
    decodes = model.decoded_matrix_bytes > 0 or model.kept_layer_bytes > 0
    return streams and machine.compute == "cpu" and decodes


def _place_weights(
    *,
    machine: Machine,
    model: ModelSpec,
    store: StoreSpec,
    workload: Workload,
    items: list[_Item],
    batch: int,
) -> list[Tier]:
    tokens = workload.context_tokens
    total = sum(i.size for i in items)
    kv = model.kv_bytes(batch=batch, tokens=tokens)
    kv_layer = _kv_layer(model, batch, tokens)
    work = max(_workspaces(model, batch, tokens))
    part = _partition_reserve(store, workload)
    compute_room = machine.budgets.get(machine.compute) - (
        part if machine.partition_tier == machine.compute else 0
    )
    if total + kv + work <= compute_room:
        room = total
    elif total + work + _MIN_STREAM_SLOTS * kv_layer <= compute_room:
        room = total  # all weights stay; only KV streams
    else:
        # The streamed items are a suffix: layers, unless even the embedding and
        # head stay off the compute tier, in which case they are the largest slot.
        # Layers streaming from the disk to a CPU are decoded one matrix at a time.
        per_matrix = _decodes_per_matrix(machine, model, streams=True)
        work = max(_workspaces(model, batch, tokens, per_matrix=per_matrix))
        # A slot holds what `_fit` will count for it: a compressed layer decoded whole
        # beside its stored bytes (a GPU), or only those bytes (per-matrix decoding).
        largest = max(
            _streamed_size(i, items, model, per_matrix=per_matrix)
            for i in items
            if i.kind == "layer"
        )
        room = compute_room - work - _MIN_STREAM_SLOTS * (largest + kv_layer)
        leading = next(n for n, i in enumerate(items) if i.kind == "layer")
        if _prefix(items, room) < leading:
            largest = max(_streamed_size(i, items, model, per_matrix=per_matrix) for i in items)
            room = compute_room - work - _MIN_STREAM_SLOTS * (largest + kv_layer)
        if per_matrix:
            # With every layer in RAM the executor decodes whole layers, for which the
            # first branch found no room: at least the last layer streams.
            last = max(n for n, i in enumerate(items) if i.kind == "layer")
            room = min(room, sum(i.size for i in items[: last + 1]) - 1)
    tiers: list[Tier] = []
    placed = _prefix(items, room)
    tiers.extend([machine.compute] * placed)
    rest = items[placed:]
    if machine.host is not None and rest:
        host_room = machine.budgets.get(machine.host) - (
            part if machine.partition_tier == machine.host else 0
        )
        if sum(i.size for i in rest) > host_room:
            # Whatever goes to disk is staged through RAM on its way to the GPU.
            host_room -= _MIN_STREAM_SLOTS * max(i.size for i in rest)
        on_host = _prefix(rest, host_room)
        tiers.extend([machine.host] * on_host)
        rest = rest[on_host:]
    tiers.extend(["disk"] * len(rest))
    return tiers


def _prefix(items: list[_Item], room: int) -> int:
    """How many leading items fit in `room` bytes."""
    used = 0
    for n, item in enumerate(items):
        if used + item.size > room:
            return n
        used += item.size
    return len(items)


def _weight_bytes(items: list[_Item], tiers: list[Tier]) -> TierBytes:
    sums = {"gpu": 0, "cpu": 0, "disk": 0}
    for item, tier in zip(items, tiers, strict=True):
        sums[tier] += item.size
    return TierBytes(**sums)


def _add(t: TierBytes, tier: Tier, n: int) -> TierBytes:
    d = t.as_dict()
    d[tier] += n
    return TierBytes(**d)


def _fit(
    *,
    machine: Machine,
    model: ModelSpec,
    store: StoreSpec,
    workload: Workload,
    items: list[_Item],
    tiers: list[Tier],
    batch: int,
) -> _Fit:
    tokens = workload.context_tokens
    x, y = machine.compute, machine.host
    weights = _weight_bytes(items, tiers)
    kv_total = model.kv_bytes(batch=batch, tokens=tokens)
    kv_layer = _kv_layer(model, batch, tokens)
    on_disk = any(t == "disk" for i, t in zip(items, tiers, strict=True) if i.kind == "layer")
    per_matrix = _decodes_per_matrix(machine, model, streams=on_disk)
    hp, hd = _workspaces(model, batch, tokens, per_matrix=per_matrix)
    work = max(hp, hd)
    part = _partition_reserve(store, workload)
    streamed = [
        _streamed_size(item, items, model, per_matrix=per_matrix)
        for item, t in zip(items, tiers, strict=True)
        if t != x
    ]
    slot_w = max(streamed, default=0)
    n_stream = sum(1 for t in tiers if t != x)

    free_x = machine.budgets.get(x) - weights.get(x) - (part if machine.partition_tier == x else 0)
    if slot_w == 0 and kv_total + work <= free_x:
        kv_x, slot = kv_total, 0
    else:
        kv_x = min(kv_total, max(0, free_x - work - _MIN_STREAM_SLOTS * (slot_w + kv_layer)))
        slot = slot_w + (kv_layer if kv_x < kv_total else 0)
        if kv_x < kv_total and n_stream == 0:
            n_stream = model.num_layers  # only KV streams: one layer's KV per slot
    rest = kv_total - kv_x

    kv_y = 0
    deficits: dict[str, int] = {}
    if y is not None:
        free_y = (
            machine.budgets.get(y) - weights.get(y) - (part if machine.partition_tier == y else 0)
        )
        disk_w_slot = max(
            (i.size for i, t in zip(items, tiers, strict=True) if t == "disk"), default=0
        )
        staging = _MIN_STREAM_SLOTS * disk_w_slot
        kv_y = max(0, min(rest, free_y - staging))
        if kv_y < rest:
            staging = _MIN_STREAM_SLOTS * (disk_w_slot + kv_layer)
            kv_y = max(0, min(rest, free_y - staging))
        used_y = weights.get(y) + kv_y + staging + (part if machine.partition_tier == y else 0)
        if used_y > machine.budgets.get(y):
            deficits["RAM"] = used_y - machine.budgets.get(y)
    kv_disk = rest - kv_y

    spare_p = free_x - kv_x - hp
    spare_d = free_x - kv_x - hd
    if slot:
        depth_p = _depth(spare_p, slot, PREFETCH_MAX_PREFILL, n_stream)
        depth_d = _depth(spare_d, slot, PREFETCH_MAX_DECODE, n_stream)
        need_x = max(hp + (depth_p + 1) * slot, hd + (depth_d + 1) * slot)
    else:
        depth_p = depth_d = 0
        need_x = work
    used_x = machine.budgets.get(x) - free_x + kv_x + need_x
    if used_x > machine.budgets.get(x):
        deficits[
            "GPU"
            if machine.memory_model == "discrete"
            else ("RAM" if x == "cpu" else "unified memory")
        ] = used_x - machine.budgets.get(x)
    used_disk = weights.disk + kv_disk
    if used_disk > machine.budgets.disk:
        deficits["disk"] = used_disk - machine.budgets.disk

    used = {"gpu": 0, "cpu": 0, "disk": used_disk}
    used[x] = used_x
    if y is not None:
        used[y] = used_y
    spare_part = machine.budgets.get(machine.partition_tier) - used[machine.partition_tier]
    kv = {"gpu": 0, "cpu": 0, "disk": kv_disk}
    kv[x] += kv_x
    if y is not None:
        kv[y] += kv_y
    worst = max(deficits, key=deficits.__getitem__, default="")
    return _Fit(
        fits=not deficits,
        deficit=sum(deficits.values()),
        deficit_tier=worst,
        kv=TierBytes(**kv),
        workspace_prefill=hp,
        workspace_decode=hd,
        slot=slot,
        depth_prefill=depth_p,
        depth_decode=depth_d,
        used=TierBytes(**used),
        spare_partition_tier=max(0, spare_part),
    )


def _streamed_size(
    item: _Item, items: list[_Item], model: ModelSpec, *, per_matrix: bool = False
) -> int:
    """Bytes the compute tier must hold to use `item` when it lives elsewhere."""
    if item.kind == "embed":
        return 0  # the lookup runs where the embedding lives; only hidden states move
    if item.kind == "head" and model.tie_word_embeddings:
        embed = next(i for i in items if i.kind == "embed")
        return item.size + embed.size  # a tied head is the embedding matrix
    if item.kind == "layer":
        # A compressed layer arrives as stored and is decoded next to it, unless it is
        # decoded one matrix at a time into the workspace's one buffer.
        return item.size + (0 if per_matrix else model.decoded_layer_bytes)
    return item.size


def _depth(spare: int, slot: int, cap: int, n_stream: int) -> int:
    """Layers to fetch ahead: spare slots less the one computing, at least one."""
    return max(1, min(spare // slot - 1, cap, n_stream))


def _plan_fits(
    machine: Machine,
    model: ModelSpec,
    store: StoreSpec,
    workload: Workload,
    items: list[_Item],
    batch: int,
) -> bool:
    tiers = _place_weights(
        machine=machine, model=model, store=store, workload=workload, items=items, batch=batch
    )
    return _fit(
        machine=machine,
        model=model,
        store=store,
        workload=workload,
        items=items,
        tiers=tiers,
        batch=batch,
    ).fits


def _largest(fits: Callable[[int], bool]) -> int:
    """The largest batch in [1, MAX_BATCH_CAP] for which `fits(batch)`; 0 if none.
    Memory needs grow with the batch, so the answer is a threshold: bisect it."""
    if not fits(1):
        return 0
    lo, hi = 1, MAX_BATCH_CAP
    if fits(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _shortfall_message(
    *,
    machine: Machine,
    model: ModelSpec,
    workload: Workload,
    weights: TierBytes,
    fit: _Fit,
    max_batch: int,
) -> str:
    need = (
        f"weights {format_gib(weights.total)}, KV cache {format_gib(fit.kv.total)} "
        f"(batch {workload.batch} × {workload.context_tokens} tokens), workspace "
        f"{format_gib(max(fit.workspace_prefill, fit.workspace_decode))}"
    )
    usable = ", ".join(
        f"{label} {format_gib(machine.budgets.get(tier))}"
        for label, tier in (("GPU", "gpu"), ("RAM", "cpu"), ("disk", "disk"))
        if machine.capacities.get(tier) or tier != "gpu"
    )
    hint = (
        f" A batch of {max_batch} would fit."
        if max_batch
        else " Free some disk space or memory, or pick a smaller model."
    )
    return (
        f"{model.name} does not fit: {format_gib(fit.deficit)} more memory is needed "
        f"(short on {fit.deficit_tier}). It needs {need}; usable here: {usable}.{hint}"
    )
