"""The one place that talks to the GPU driver: NVML sessions, device counts, driver presence.

Telemetry, ONNX Runtime sessions, the memory probe of residency and the encoder's NVENC and the
decoder's NVDEC checks all ask here, with the `DriverFlags` a front end decided once
(`FFDESK_NO_NVML=1`, `FFDESK_NO_NVENC=1`, `FFDESK_NO_NVDEC=1`), so the switches mean the same
everywhere. A caller handed no flags gets the environment's.
"""

from ffdesk.hw.memory import give_back_large_blocks, trim_heap
from ffdesk.hw.nvidia import (
    DriverFlags,
    driver_present,
    env_flag,
    gpu_count,
    nvdec_possible,
    nvenc_possible,
    nvml_disabled,
    nvml_session,
    process_gpu_memory,
    start_nvml,
)

__all__ = [
    "DriverFlags",
    "driver_present",
    "env_flag",
    "give_back_large_blocks",
    "gpu_count",
    "nvdec_possible",
    "nvenc_possible",
    "nvml_disabled",
    "nvml_session",
    "start_nvml",
    "process_gpu_memory",
    "trim_heap",
]
