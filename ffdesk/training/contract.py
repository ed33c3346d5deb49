"""What a trained swapper's export promises whoever runs it, as one typed value.

`ffdesk train` writes the contract beside the model (`model.json`) and into its ONNX metadata
(`ffdesk.contract`); the renderer reads it back with `TrainedContract.from_json`, which checks
every field it relies on, so a damaged or hand-edited contract is one line, not a crash or a
crop of the wrong size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

KIND = "ffdesk-trained-swapper"
"""The contract's `kind`: what marks a model as one `ffdesk train` made."""
MIN_RESOLUTION, MAX_RESOLUTION = 16, 2048
"""The model sizes a contract may give (the trainer makes 64 to 512 px)."""


class ContractError(ValueError):
    """A document that says it is a trained swapper's contract but cannot be one."""


@dataclass(frozen=True)
class TrainedContract:
    """The fields of a trained swapper's contract the renderer runs it by; `document` is the
    whole JSON (tensor descriptions, the model's configuration, quantization notes)."""

    resolution: int
    """The side of the square crops the model takes and gives."""
    template: str | None
    """The alignment template of its training crops (None: not recorded; the renderer's default)."""
    precision: Literal["fp32", "int8"]
    """What the file holds: a quantization-aware export is int8, any other fp32."""
    model_kind: str
    """swap, student or qat."""
    step: int
    teacher: str | None
    max_abs_diff_vs_torch: float | None
    """How far the exported file's output was from the network's when it was written."""
    document: Mapping[str, Any]

    @classmethod
    def from_json(cls, data: Any) -> TrainedContract:
        """The contract in `data`; `ContractError` (one line) naming the first field that is wrong."""
        if not isinstance(data, dict) or data.get("kind") != KIND:
            raise ContractError(f"not a {KIND} contract")
        resolution = data.get("resolution")
        if type(resolution) is not int or not MIN_RESOLUTION <= resolution <= MAX_RESOLUTION:
            raise ContractError(
                f"resolution {resolution!r} is not a size from {MIN_RESOLUTION} to {MAX_RESOLUTION}"
            )
        alignment = data.get("alignment") or {}
        if not isinstance(alignment, dict):
            raise ContractError("alignment is not an object")
        template = alignment.get("template")
        if template is not None and not isinstance(template, str):
            raise ContractError(f"alignment template {template!r} is not a name")
        precision = data.get("precision", "fp32")
        if precision not in ("fp32", "int8"):
            raise ContractError(f"precision {precision!r} is not fp32 or int8")
        step = data.get("step", 0)
        if type(step) is not int or step < 0:
            raise ContractError(f"step {step!r} is not a count")
        teacher = data.get("teacher")
        diff = data.get("max_abs_diff_vs_torch")
        return cls(
            resolution=resolution,
            template=template,
            precision="int8" if precision == "int8" else "fp32",
            model_kind=str(data.get("model_kind") or "swap"),
            step=step,
            teacher=str(teacher) if teacher else None,
            max_abs_diff_vs_torch=float(diff) if isinstance(diff, int | float) else None,
            document=MappingProxyType(dict(data)),
        )


def contract_document(
    resolution: int,
    alignment: Mapping[str, Any],
    step: int,
    model: Mapping[str, Any],
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    """The contract an export writes (JSON): its tensors, alignment, step, the model's
    configuration (`model`) and `extra` (provenance, precision and quantization notes)."""
    r = resolution
    return {
        "kind": KIND,
        "version": 1,
        "resolution": r,
        "inputs": {
            "target": {
                "shape": ["N", 3, r, r],
                "dtype": "float32",
                "layout": "NCHW",
                "color": "RGB",
                "range": [0.0, 1.0],
                "meaning": "aligned face crop of the person to replace (identity B)",
            }
        },
        "outputs": {
            "output": {
                "shape": ["N", 3, r, r],
                "dtype": "float32",
                "layout": "NCHW",
                "color": "RGB",
                "range": [0.0, 1.0],
                "meaning": "identity A's face in the target's pose, same alignment",
            },
            "mask": {
                "shape": ["N", 1, r, r],
                "dtype": "float32",
                "range": [0.0, 1.0],
                "meaning": "face area the model drew (blend weight)",
            },
        },
        "alignment": dict(alignment),
        "step": step,
        "model": dict(model),
        **extra,
    }
