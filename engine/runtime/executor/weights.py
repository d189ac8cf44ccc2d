"""The tiered weight store: where each unit's tensors live and how they reach the compute tier.

A *unit* is what the executor streams as one piece: the embedding, one decoder layer, or
the head (final norm + LM head). Each unit has a home tier from the Placement. Units whose
home is the compute tier are loaded once and held; the others ("streamed") are fetched into
the compute tier when needed and dropped after use, so between uses they hold no memory.

The store only knows *where* tensors are and *how* to read them; *when* they move is the
prefetcher's business (FlexGen's split of policy / device / loop).
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from engine.runtime.executor import int4, repacked
from engine.runtime.executor.buffer_pool import BufferPool
from engine.runtime.executor.checkpoint import (
    EMBED,
    HEAD,
    TensorSource,
    index_checkpoint,
    layer_unit,
)
from engine.runtime.executor.kernel_forms import Workspace, form_of
from engine.runtime.executor.packed import (
    KERNEL_MODES,
    PER_MATRIX,
    DecodeMode,
    MatrixBuffer,
    choose_decode,
    decode_unit,
    kernel_computes,
    packable,
    read_stored,
    repack_unit,
    stored_bytes,
)
from engine.runtime.executor.page_cache import evict_ranges
from engine.runtime.executor.tensor_reads import DIRECT_DTYPES, read_direct, read_gguf
from engine.runtime.planner.placement import Placement, Tier


@dataclass(frozen=True, kw_only=True)
class StoreStats:
    """What the store holds right now and has held at most (instrumentation for tests and
    benchmarks: memory bounds are asserted on these, not on RSS)."""

    resident_units: int
    streamed_live: int  # streamed units holding tensors now
    streamed_peak: int  # most streamed units holding tensors at once
    fetches: int
    bytes_fetched: int
    pooled_bytes: int  # released read buffers kept for reuse (at most depth + 1 units)
    moves: int  # units whose home changed under a new placement
    lazy_loads: int  # promoted units read on first use


class WeightStore:
    """Tensors per unit, by home tier.

    - compute-tier units: loaded at open, held until close;
    - "cpu" units on a GPU machine: held in (pinned) host memory, copied per use;
    - "disk" units: read from the checkpoint through mmap per use; with
      `evict_after_read` their pages are dropped after each read so that a model larger
      than RAM is simulated honestly (otherwise the page cache quietly keeps them in RAM).

    With `compressed`, a decoder layer stored in fewer bytes than its compute dtype
    takes (GGML blocks, bf16 computed in float32) is held as stored in every tier and
    decoded for each use by the copy thread (engine/runtime/executor/packed.py): with "layer"
    such a layer is "streamed" even when its home is the compute tier. "matrix" (memory
    tight): the compute thread decodes each weight matrix just before its matmul
    (`packed.matrix_decoding`), so one matrix, not two layers, is held decoded, and a
    resident layer skips the copy thread. "kernel" (CPU): quantized matrices are made
    into the forms of torch's CPU kernels (engine/runtime/executor/kernel_forms.py) once, into
    `repack_cache` (engine/runtime/executor/repacked.py), which resident units are mapped from
    and streamed ones read from by the copy thread; without that folder, at load for
    resident units and in the copy thread at every use for streamed ones.
    """

    def __init__(
        self,
        *,
        model_dir: Path,
        homes: dict[str, Tier],
        compute_tier: Tier,
        device: torch.device,
        dtype: torch.dtype,
        tied_head: bool = False,
        evict_after_read: bool = False,
        compressed: bool = False,
        decode: DecodeMode | None = None,
        repack_cache: Path | None = None,
        lean: bool = False,
    ) -> None:
        """`lean`: engine/runtime/executor/decoder.py computes the layers (kernel forms of q/k/v
        and gate/up fused; a quantized embedding held as stored, rows decoded per
        lookup)."""
        self._sources = index_checkpoint(model_dir)
        # decode="matrix": the compute thread decodes one matrix at a time into this.
        self.matrix_buffer = MatrixBuffer()
        self._packed: set[str] = (
            {
                u
                for u, sources in self._sources.items()
                if u.startswith("layer.") and packable(sources, dtype=dtype)
            }
            if compressed
            else set()
        )
        # None: chosen here from the device, the formats and the homes (packed.choose_decode).
        self.decode: DecodeMode = decode or choose_decode(
            device=device,
            packed=[self._sources[u] for u in sorted(self._packed)],
            streamed_from_disk=any(homes.get(u) == "disk" for u in self._packed),
        )
        self._homes = dict(homes)
        self._compute_tier = compute_tier
        self._device = device
        self._dtype = dtype
        self._tied_head = tied_head
        has_head = HEAD in self._sources or tied_head
        kernel = self.decode in KERNEL_MODES and compressed
        self.workspace = Workspace(reference=self.decode == "kernel_reference")
        self._fuse = kernel and lean
        if kernel and has_head and kernel_computes(self._sources_of(HEAD)):
            # The LM head (151,936 × 1536 for Qwen2-1.5B: 0.9 GB decoded to float32, read
            # every step) is held in its kernel form too.
            self._packed.add(HEAD)
        # A GGUF embedding stays as stored: a lookup decodes the rows it reads (decoded
        # whole it would be 0.9 GB of float32 for Qwen2-1.5B).
        self._stored_only: set[str] = (
            {EMBED}
            if kernel and any(s.gguf is not None for s in self._sources.get(EMBED, []))
            else set()
        )
        self._packed |= self._stored_only
        self._evict_after_read = evict_after_read
        self._pin = device.type == "cuda"
        self._lock = threading.Lock()
        self._held: dict[str, dict[str, torch.Tensor]] = {}  # compute-tier units
        self._host: dict[str, dict[str, torch.Tensor]] = {}  # host copies of "cpu" units
        self._live: set[str] = set()
        self._pending: set[str] = set()  # promoted to the compute tier, not read yet
        # Read buffers of released disk units, reused by the next reads (CPU compute):
        # a fresh buffer costs a page fault per 4 KiB inside the read, which on this
        # kind of machine halves the read speed. At most depth + 1 units' worth, since
        # only released units' buffers come back.
        self._pool = BufferPool()
        self._lent: dict[str, dict[str, torch.Tensor]] = {}
        # A streamed unit's stored bytes read into one pooled block (`_stream_block`) of
        # the largest packed disk unit's size, set with the homes.
        self._blocks: dict[str, torch.Tensor] = {}
        self._moves = 0
        self._lazy_loads = 0
        self._peak = 0
        self._fetches = 0
        self._bytes = 0
        missing = [u for u in homes if u not in self._sources and u != HEAD]
        if missing:
            raise ValueError(f"checkpoint in {model_dir} has no tensors for {missing[:3]}")
        self._block_bytes = self._largest_disk_unit()
        self.repacked: repacked.RepackedFile | None = None
        # Files mapped into memory whole, once: a unit held in the "ggml" form (the
        # file's own blocks) is a view of its file's mapping, never copied or repacked.
        self._maps: dict[Path, torch.Tensor] = {}
        if (
            repack_cache is not None
            and self.decode in KERNEL_MODES
            and self._device.type == "cpu"
            and self._packed - self._stored_only
            and not self._any_stored_form()
        ):
            # Every packed unit, resident or streamed: resident ones are mapped from the
            # file (a warm open takes no repacking and no copy), streamed ones read from
            # it, and a later placement may move any of them.
            self.repacked = repacked.open_or_build(
                cache=repack_cache,
                units={
                    u: self._sources_of(u)
                    for u in repacked.all_units(self._packed - self._stored_only)
                },
                read=lambda u: self._read(u, pin=False),
                repack=self._repack,
                fused=self._fuse,
            )
        self._load_resident()

    @property
    def files(self) -> list[Path]:
        return sorted({s.file for sources in self._sources.values() for s in sources})

    def home(self, unit: str) -> Tier:
        return self._homes[unit]

    def is_streamed(self, unit: str) -> bool:
        if self._looked_up_in_map(unit):
            return False
        per_use = unit in self._packed and self.decode not in PER_MATRIX
        return self._homes[unit] != self._compute_tier or per_use

    def _looked_up_in_map(self, unit: str) -> bool:
        """A stored-only unit on a CPU (a GGUF embedding) is read through the file's
        mapping wherever its home is: a lookup touches a few rows' pages, so a home on
        the disk costs no slot and no read of the whole matrix per step."""
        return unit in self._stored_only and self._device.type == "cpu"

    def is_packed(self, unit: str) -> bool:
        """Whether the unit is held in its stored (compressed) form and decoded per use."""
        return unit in self._packed

    def disk_files(self) -> list[Path]:
        """Files holding at least one tensor of a unit whose home is disk."""
        files = {
            s.file
            for unit, tier in self._homes.items()
            if tier == "disk"
            for s in self._sources_of(unit)
        }
        return sorted(files)

    def resident(self, unit: str) -> dict[str, torch.Tensor]:
        """The tensors of a compute-tier unit (held; never copied)."""
        if unit in self._pending:
            self._held[unit] = self._load_home(unit)
            self._host.pop(unit, None)
            self._pending.discard(unit)
            self._lazy_loads += 1
        return self._held[unit]

    def set_homes(self, homes: dict[str, Tier]) -> int:
        """New home tiers; only units whose home changed move. A demoted unit's copy goes
        now (freeing memory is why a placement shrinks); a unit promoted to the compute
        tier is read the first time it is used, not here. Returns the units moved."""
        if set(homes) != set(self._homes):
            raise ValueError("new homes name other units")
        moved = 0
        for unit, tier in homes.items():
            if self._homes[unit] == tier:
                continue
            moved += 1
            if self._looked_up_in_map(unit):
                self._homes[unit] = tier  # the mapping serves every home
                continue
            held = self._held.pop(unit, None)
            self._pending.discard(unit)
            self._homes[unit] = tier
            if tier == self._compute_tier:
                self._pending.add(unit)  # a host copy, if any, stays until then
                continue
            self._host.pop(unit, None)
            if tier == "cpu":
                # GPU → host keeps the bytes already here instead of reading the disk.
                self._host[unit] = (
                    {k: _to_host(v, pin=self._pin) for k, v in held.items()}
                    if held is not None
                    else self._read(unit, pin=self._pin)
                )
        with self._lock:
            self._moves += moved
        self._pool.clear()  # sized for the old set of streamed units
        self._block_bytes = self._largest_disk_unit()
        return moved

    def fetch(self, unit: str) -> dict[str, torch.Tensor]:
        """Bring a streamed unit into the compute tier. Called from the copy thread; the
        caller must `release` it after use. On CUDA the copies are queued on the current
        stream (the prefetcher's copy stream) without blocking the host."""
        if unit in self._packed:
            return self._fetch_packed(unit)
        if unit in self._held:
            return self._held[unit]
        with self._lock:
            self._live.add(unit)
            self._peak = max(self._peak, len(self._live))
        on_disk = self._homes[unit] == "disk"
        host = self._read(unit, pin=self._pin) if on_disk else self._host[unit]
        if self._device.type == "cpu":
            tensors = host
            # Decoded GGUF tensors are fresh memory that no read takes from the pool:
            # pooling them on release would keep every layer ever streamed.
            if on_disk and not any(src.gguf is not None for src in self._sources_of(unit)):
                with self._lock:
                    self._lent[unit] = tensors
        else:
            tensors = {k: v.to(self._device, non_blocking=True) for k, v in host.items()}
        with self._lock:
            self._fetches += 1
            self._bytes += sum(t.numel() * t.element_size() for t in tensors.values())
        return tensors

    def _fetch_packed(self, unit: str) -> dict[str, torch.Tensor]:
        """Decode a packed unit into the compute tier, wherever its stored bytes are."""
        with self._lock:
            self._live.add(unit)
            self._peak = max(self._peak, len(self._live))
        moved = 0
        if self._homes[unit] == self._compute_tier:
            if unit in self._pending:
                self._held[unit] = self._load_home(unit)
                self._host.pop(unit, None)
                self._pending.discard(unit)
                with self._lock:
                    self._lazy_loads += 1
            packed = self._held[unit]
        elif self._homes[unit] == "disk" and self.repacked is not None:
            # Kernel-ready bytes read into the pool's buffers: nothing repacked per use.
            tensors = self.repacked.read(unit, pool=self._pool)
            if self._drops_pages(unit):
                self.repacked.evict(unit)
            with self._lock:
                self._fetches += 1
                self._bytes += self.repacked.bytes_of(unit)
                self._lent[unit] = tensors
            return tensors
        else:
            host = (
                self._host[unit] if self._homes[unit] == "cpu" else self._read(unit, pin=self._pin)
            )
            packed = {k: v.to(self._device, non_blocking=True) for k, v in host.items()}
            moved = sum(t.numel() for t in packed.values())
        if self.decode in PER_MATRIX:
            streamed = self._homes[unit] != self._compute_tier
            if self.decode in KERNEL_MODES and streamed and unit not in self._stored_only:
                # Streamed: repacked here, in the copy thread, one layer ahead.
                packed = self._repack(unit, packed)
            with self._lock:
                self._fetches += 1
                self._bytes += moved
            return packed
        on_cpu = self._device.type == "cpu"
        tensors = decode_unit(
            packed,
            sources=self._sources_of(unit),
            dtype=self._dtype,
            pool=self._pool if on_cpu else None,
        )
        with self._lock:
            self._fetches += 1
            self._bytes += moved
            if on_cpu:
                # Back to the pool at release: the next layer decodes into them.
                self._lent[unit] = tensors
        return tensors

    def release(self, unit: str) -> None:
        """Forget a streamed unit's compute-tier copy (the caller drops its references)."""
        with self._lock:
            self._live.discard(unit)
            lent = self._lent.pop(unit, None)
            block = self._blocks.pop(unit, None)
        if lent is not None:
            self._pool.give(lent.values())
        if block is not None:
            self._pool.give([block])

    def stats(self) -> StoreStats:
        with self._lock:
            return StoreStats(
                resident_units=len(self._held),
                streamed_live=len(self._live),
                streamed_peak=self._peak,
                fetches=self._fetches,
                bytes_fetched=self._bytes,
                pooled_bytes=self._pool.held_bytes(),
                moves=self._moves,
                lazy_loads=self._lazy_loads,
            )

    def held_bytes(self) -> dict[str, int]:
        """Bytes held between uses per unit (resident + host copies); streamed-from-disk
        units hold nothing."""
        out: dict[str, int] = {}
        for unit in self._homes:
            tensors = self._held.get(unit) or self._host.get(unit) or {}
            out[unit] = sum(t.numel() * t.element_size() for t in tensors.values())
        return out

    def reset_peak(self) -> None:
        with self._lock:
            self._peak = len(self._live)

    def close(self) -> None:
        self._held.clear()
        self._host.clear()
        self._pending.clear()
        self._maps.clear()
        self._pool.clear()
        self.matrix_buffer.clear()
        self.workspace.clear()

    def is_stored_only(self, unit: str) -> bool:
        """Whether the unit is held as stored bytes for row lookups (the embedding)."""
        return unit in self._stored_only

    def _repack(self, unit: str, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return repack_unit(
            tensors,
            sources=self._sources_of(unit),
            dtype=self._dtype,
            fuse=self._fuse and unit.startswith("layer."),
        )

    def sources_of(self, unit: str) -> list[TensorSource]:
        return self._sources_of(unit)

    def _sources_of(self, unit: str) -> list[TensorSource]:
        if unit == HEAD and self._tied_head:
            # Tied models store no lm_head: the head reads the embedding matrix.
            head = list(self._sources.get(HEAD, []))
            head += [
                dataclasses.replace(s, param="lm_head.weight")
                for s in self._sources[EMBED]
                if s.param == "weight"
            ]
            return head
        return self._sources[unit]

    def _stream_block(self, unit: str, *, pin: bool) -> torch.Tensor | None:
        """A pooled block for a CPU read of a unit streamed from the disk, all of one
        size (the largest such unit's), so that the pool holds a few blocks that every
        layer fits: a fresh one faults in each 4 KiB page inside the read. None: the
        read allocates its own."""
        if pin or self._device.type != "cpu" or self._homes.get(unit) != "disk":
            return None
        block = self._pool.take((self._block_bytes,), torch.uint8)
        with self._lock:
            self._blocks[unit] = block
        return block

    def _largest_disk_unit(self) -> int:
        return max(
            (
                sum(stored_bytes(s) for s in self._sources_of(u))
                for u, tier in self._homes.items()
                if tier == "disk" and u in self._packed
            ),
            default=0,
        )

    def streams_from_disk(self) -> bool:
        """Whether any layer's home is the disk."""
        return any(t == "disk" for u, t in self._homes.items() if u.startswith("layer."))

    def _drops_pages(self, unit: str) -> bool:
        """Whether a read of `unit` drops its pages from the page cache after: a unit
        whose home is the disk is read from it again at its next use either way, and its
        pages left in the cache would push out the resident units' mapped pages (under a
        memory limit the cgroup charges the page cache: a 1.5B under half its file read
        961 MiB a token instead of its 700 MiB of streamed layers)."""
        return self._evict_after_read or self._homes.get(unit) == "disk"

    def _read(self, unit: str, *, pin: bool) -> dict[str, torch.Tensor]:
        sources = self._sources_of(unit)
        if unit in self._packed:
            out = read_stored(sources, pin=pin, into=self._stream_block(unit, pin=pin))
            if self._drops_pages(unit):
                evict_ranges(sources)
            return out
        if any(s.gguf is not None for s in sources):
            out = read_gguf(sources, dtype=self._dtype, pin=pin)
            if self._drops_pages(unit):
                evict_ranges(sources)
            return out
        if all(s.dtype in DIRECT_DTYPES for s in sources):
            out = read_direct(sources, dtype=self._dtype, pin=pin, pool=self._pool)
            if self._drops_pages(unit):
                evict_ranges(sources)
            return out
        out: dict[str, torch.Tensor] = {}
        by_file: dict[Path, list[TensorSource]] = {}
        for s in sources:
            by_file.setdefault(s.file, []).append(s)
        for file, items in by_file.items():
            # safe_open maps the file and get_tensor returns a view of the mapping
            # (safetensors 0.8: nothing is read yet). Copy here, in the copy thread, so the
            # disk reads happen now and not as page faults inside the layer's matmuls, and
            # so that what the store holds is its own memory, not evictable page cache.
            # One unit at a time is copied, never the whole shard.
            with safe_open(str(file), framework="pt", device="cpu") as f:
                for s in items:
                    t = f.get_tensor(s.name)
                    if pin:
                        out[s.param] = t.to(self._dtype).pin_memory()  # pin_memory copies
                    else:
                        out[s.param] = t.to(self._dtype, copy=True)
        if self._drops_pages(unit):
            evict_ranges(sources)
        return out

    def _any_stored_form(self) -> bool:
        """Whether a packed unit holds a matrix in the "ggml" form (then nothing is
        written to a repack file: those matrices are the file's own bytes)."""
        return any(form_of(s.gguf) == "ggml" for u in self._packed for s in self._sources_of(u))

    def _maps_stored(self, unit: str) -> bool:
        sources = self._sources_of(unit)
        return (
            self.decode in KERNEL_MODES
            and self._device.type == "cpu"
            and unit in self._packed
            and all(s.gguf is not None for s in sources)
            and all(form_of(s.gguf) in (None, "ggml") for s in sources)
            and any(form_of(s.gguf) == "ggml" for s in sources)
        )

    def _mapped(self, unit: str) -> dict[str, torch.Tensor]:
        """The unit's stored bytes as views of its files mapped privately into memory
        (read-only use: the pages are the page cache's, read on first touch)."""
        out: dict[str, torch.Tensor] = {}
        for s in self._sources_of(unit):
            whole = self._maps.get(s.file)
            if whole is None:
                size = s.file.stat().st_size
                whole = torch.from_file(str(s.file), shared=False, size=size, dtype=torch.uint8)
                self._maps[s.file] = whole
            out[s.param] = whole[s.start : s.end]
        return out

    def _load_home(self, unit: str) -> dict[str, torch.Tensor]:
        if self.repacked is not None and self.repacked.has(unit):
            return self.repacked.map(unit)  # repacked already
        host = self._host.get(unit)
        if host is None and (self._maps_stored(unit) or self._looked_up_in_map(unit)):
            tensors = self._mapped(unit)
        else:
            tensors = host if host is not None else self._read(unit, pin=False)
        if self.decode in KERNEL_MODES and unit in self._packed - self._stored_only:
            # Made ready for the kernels once: never decoded afterwards.
            tensors = self._repack(unit, tensors)
            int4.trim_heap()
        if self._device.type != "cpu":
            tensors = {k: v.to(self._device) for k, v in tensors.items()}
        return tensors

    def _load_resident(self) -> None:
        # Shard by shard (the order of _read's grouping), one unit at a time: peak memory
        # is the resident units plus one unit, not the checkpoint.
        for unit, tier in self._homes.items():
            if tier == self._compute_tier or self._looked_up_in_map(unit):
                self._held[unit] = self._load_home(unit)
            elif tier == "cpu":
                self._host[unit] = self._read(unit, pin=self._pin)


def _to_host(t: torch.Tensor, *, pin: bool) -> torch.Tensor:
    host = t.to("cpu")
    return host.pin_memory() if pin else host


def unit_homes(placement: Placement) -> dict[str, Tier]:
    """Home tier of each unit under a Placement."""
    homes: dict[str, Tier] = {EMBED: placement.embed_tier}
    for i, tier in enumerate(placement.layer_tiers):
        homes[layer_unit(i)] = tier
    homes[HEAD] = placement.head_tier
    return homes
