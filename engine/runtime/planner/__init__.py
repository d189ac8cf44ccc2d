"""Memory placement: what a model costs (`load_model_spec`) and where it goes (`plan`)."""

from engine.runtime.planner.model_spec import ModelSpec, load_model_spec, model_spec_from_config
from engine.runtime.planner.placement import Placement, StoreSpec, TierBytes, Workload
from engine.runtime.planner.planner import plan
from engine.runtime.planner.sizes import format_gib, parse_size

__all__ = [
    "ModelSpec",
    "Placement",
    "StoreSpec",
    "TierBytes",
    "Workload",
    "format_gib",
    "load_model_spec",
    "model_spec_from_config",
    "parse_size",
    "plan",
]
