"""The one place that talks to the GPU driver: NVML sessions, device counts, driver presence.

Telemetry, ONNX Runtime sessions, the memory probe of residency and the encoder's NVENC check all
ask here, so `FFDESK_NO_NVML=1` (and `FFDESK_NO_NVENC=1`) mean the same everywhere.
"""

from ffdesk.hw.memory import trim_heap
from ffdesk.hw.nvidia import (
    driver_present,
    env_flag,
    gpu_count,
    nvenc_possible,
    nvml_disabled,
    nvml_session,
    process_gpu_memory,
)

__all__ = [
    "driver_present",
    "env_flag",
    "gpu_count",
    "nvenc_possible",
    "nvml_disabled",
    "nvml_session",
    "process_gpu_memory",
    "trim_heap",
]
