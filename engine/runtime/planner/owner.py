"""The one owner of a loaded model's Placement: it plans it, hands it to the parts that
obey it (the executor's weight store and KV, the index's resident budget), hears what
they changed (an out-of-memory recovery's demotion), and reports the placement in force
to the status, the governor and the hardware panel.

FlexGen's `Policy` is one value the model is built under; here the value changes while
the engine serves (the governor re-plans for a larger batch, a recovery demotes), so the
value has an owner, and nobody else keeps a copy to report from.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from engine.errors import ModelLoadError
from engine.runtime.hardware.profile import HardwareProfile
from engine.runtime.planner.demotion import no_higher_than, priced
from engine.runtime.planner.model_spec import ModelSpec
from engine.runtime.planner.placement import Placement, StoreSpec, Workload
from engine.runtime.planner.planner import plan

log = logging.getLogger(__name__)


class PlacedExecutor(Protocol):
    """The executor's side: run under a placement from the next forward on."""

    def apply_placement(self, placement: Placement) -> int: ...


class PlacedStore(Protocol):
    """The index's side: keep the placement's partitions resident."""

    def apply_placement(self, *, placement: Placement) -> None: ...

    def counts(self) -> tuple[int, int]: ...


@dataclass(frozen=True, kw_only=True)
class PlacementRequest:
    """What a plan of one model on this machine is made from; `batch` is the generation
    batch to size the KV and workspace for."""

    model: ModelSpec
    hardware: HardwareProfile
    store: StoreSpec
    context_tokens: int
    batch: int = 1


def plan_model(request: PlacementRequest) -> Placement:
    """The planner's placement for `request` (it may not fit: see `Placement.fits`)."""
    return plan(
        hardware=request.hardware,
        model=request.model,
        store=request.store,
        workload=Workload(batch=request.batch, context_tokens=request.context_tokens),
    )


class PlacementOwner:
    """Plans, applies and reports one model's placement. Thread-safe."""

    def __init__(
        self,
        *,
        model: ModelSpec,
        placement: Placement,
        hardware: Callable[[], HardwareProfile],
        store: Callable[[], StoreSpec],
    ) -> None:
        """`hardware()` and `store()` are read at each re-plan (free GPU memory and the
        collection change while the engine runs)."""
        self._model = model
        self._hardware = hardware
        self._store_spec = store
        self._lock = threading.Lock()
        self._placement = placement
        self._floor: Placement | None = None  # set by a demotion: re-plans stay below it
        self._executor: PlacedExecutor | None = None
        self._store: PlacedStore | None = None
        self._demotions = 0

    @classmethod
    def plan(
        cls,
        *,
        model: ModelSpec,
        hardware: Callable[[], HardwareProfile],
        store: Callable[[], StoreSpec],
        context_tokens: int,
        batch: int = 1,
    ) -> PlacementOwner:
        """The owner of the plan for a first batch; ModelLoadError when it does not fit."""
        placement = plan_model(
            PlacementRequest(
                model=model,
                hardware=hardware(),
                store=store(),
                context_tokens=context_tokens,
                batch=batch,
            )
        )
        if not placement.fits:
            raise ModelLoadError(
                f"The language model {placement.message}"  # "NAME does not fit: …"
            )
        return cls(model=model, placement=placement, hardware=hardware, store=store)

    @property
    def placement(self) -> Placement:
        """The placement in force: the last one applied to the executor, or the one an
        out-of-memory recovery demoted it to."""
        with self._lock:
            return self._placement

    @property
    def demotions(self) -> int:
        """Out-of-memory recoveries that moved something down a tier."""
        with self._lock:
            return self._demotions

    def attach(self, *, executor: PlacedExecutor | None, store: PlacedStore | None) -> None:
        """The parts that obey this placement; the store gets the placement in force
        now (the executor was built under it)."""
        with self._lock:
            self._executor, self._store = executor, store
            placement = self._placement
        self.apply_to_store(placement)

    def plan_for(self, *, batch: int) -> Placement | None:
        """A placement of this model sized for a generation batch of `batch`, on the
        machine as it is now; None when none fits, when it would need another compute
        tier (a loaded model cannot change device), or when it would send to the disk
        a unit that is not there now: a larger batch amortizes weights streamed from RAM
        over PCIe, never weights read from the disk at every step (with the 1.5B model
        on a CPU, four queued questions re-planned it to 28 layers on disk and 0.067
        tok/s; issue #39). After a demotion no weight unit goes back up and no KV comes
        back: the estimate was what ran out of memory."""
        current = self.placement
        placement = plan_model(
            PlacementRequest(
                model=self._model,
                hardware=self._hardware(),
                store=self._store_spec(),
                context_tokens=current.context_tokens,
                batch=batch,
            )
        )
        if not placement.fits or placement.compute_tier != current.compute_tier:
            return None
        if _more_on_disk(placement, than=current):
            return None
        with self._lock:
            floor = self._floor
        if floor is not None:
            placement = priced(no_higher_than(placement, floor=floor), model=self._model)
        return placement

    def apply_to_executor(self, placement: Placement) -> None:
        """The generation worker's hook, between two of its batches."""
        with self._lock:
            executor = self._executor
        if executor is not None:
            executor.apply_placement(placement)
        with self._lock:
            self._placement = placement

    def apply_to_store(self, placement: Placement) -> None:
        """The retrieval worker's hook, between two of its batches. An empty index has
        no table to reopen; it gets the budget when the model is next chosen."""
        with self._lock:
            store = self._store
        if store is not None and store.counts()[1] > 0:
            store.apply_placement(placement=placement)

    def demoted(self, placement: Placement) -> None:
        """The executor's report: an out-of-memory recovery moved KV or weights down and
        now runs under `placement`."""
        placement = priced(placement, model=self._model)
        with self._lock:
            self._placement = placement
            self._floor = placement
            self._demotions += 1
        log.warning(
            "out of memory: the model now runs with layers %s",
            ", ".join(
                f"{first}-{last - 1} {tier}" for tier, first, last in placement.layer_ranges()
            ),
        )


def _more_on_disk(placement: Placement, *, than: Placement) -> bool:
    """Whether `placement` keeps on the disk a weight unit that `than` does not."""
    units = [
        *zip(placement.layer_tiers, than.layer_tiers, strict=True),
        (placement.embed_tier, than.embed_tier),
        (placement.head_tier, than.head_tier),
    ]
    return any(new == "disk" and old != "disk" for new, old in units)
