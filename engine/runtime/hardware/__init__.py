"""This machine's hardware: what it has and how fast bytes move (`load_profile`)."""

from engine.runtime.hardware.gpus import GpuInfo
from engine.runtime.hardware.profile import (
    DiskInfo,
    HardwareProfile,
    hypothetical_profile,
    load_profile,
    profile_from_dict,
    snapshot,
    synthetic_profile,
)

__all__ = [
    "DiskInfo",
    "GpuInfo",
    "HardwareProfile",
    "hypothetical_profile",
    "load_profile",
    "profile_from_dict",
    "snapshot",
    "synthetic_profile",
]
