"""Where a job's models run: its `provider` as a device and as ONNX Runtime session options.

Every model stage (model packs, trained swappers) builds its sessions through these two, so a
`--provider` means the same whichever swapper a render uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from ffdesk.pipeline.job import Provider

if TYPE_CHECKING:
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.sessions import SessionOptions


def job_device(provider: Provider, env: RuntimeEnv) -> Literal["cuda", "cpu"]:
    """The device a job's models run on: the CPU for "cpu", else CUDA where it is usable (under
    the environment's driver switches)."""
    from ffdesk.runtime.sessions import resolve_device

    return resolve_device("cpu" if provider == "cpu" else "auto", env.driver)


def session_options(
    provider: Provider, device: Literal["cuda", "cpu"], env: RuntimeEnv, precision: str = "fp32"
) -> SessionOptions:
    """Session options for a model of `precision` on `device` (TensorRT first for "tensorrt",
    its engines cached in the environment's TensorRT folder). On the CPU, large models load from
    external-data copies in the environment's `weights_dir` (`ffdesk.runtime.weights`)."""
    from ffdesk.runtime.sessions import SessionOptions

    return SessionOptions(
        device=device,
        tensorrt=provider == "tensorrt",
        trt_fp16=precision == "fp16",
        cache_dir=env.trt_cache_dir,
        driver=env.driver,
        weights_dir=env.weights_dir if device == "cpu" else None,
    )
