"""Export a trained run as `model.onnx` plus `model.json`, the swapper contract a renderer needs.

Contract (also written to `model.json` and to the ONNX metadata under `ffdesk.*` keys):

- input `target`: float32 [N, 3, R, R], RGB in [0, 1]: person B's face aligned to `alignment`
  (the faceset's template and crop size, scaled to R).
- output `output`: float32 [N, 3, R, R], RGB in [0, 1]: person A's face in the same pose.
- output `mask`: float32 [N, 1, R, R] in [0, 1]: where the drawn face is (for blending).
- N is dynamic: a renderer may batch crops.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ffdesk.errors import UserError
from ffdesk.media import atomic
from ffdesk.training import control, qat
from ffdesk.training.contract import KIND, contract_document
from ffdesk.training.model import ONNX_OPSET, RESOLUTIONS, ExportedSwapper, ModelConfig, SwapAutoencoder
from ffdesk.training.store import write_json_atomic

_CODE_SIGNS = ("GLOBAL", "call reduce", "create new object", "Can only build")
"""How torch's weights-only unpickler words a refusal of a function or class (not mere damage)."""

CHECKPOINT_KEYS = ("step", "model", "model_config")
"""What every checkpoint holds; a resumable one also has `optimizer` and `rng`."""


def load_checkpoint(run_dir: Path, require: tuple[str, ...] = ()) -> dict[str, Any]:
    """`RUN_DIR/checkpoint.pt` as plain data: tensors, numbers, strings, lists and dicts.

    It is read with `torch.load(weights_only=True)`, so no pickled code runs: a checkpoint whose
    pickle names a function or class (a crafted `__reduce__`) is refused before anything in it is
    called. Raises `UserError` for a missing, damaged, refused or incomplete checkpoint; `require`
    names keys needed beyond `CHECKPOINT_KEYS`.
    """
    import pickle

    path = Path(run_dir) / control.CHECKPOINT
    if not path.exists():
        raise UserError(f"{run_dir}: no checkpoint yet ({control.CHECKPOINT}); train first")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if any(sign in str(exc) for sign in _CODE_SIGNS):
            raise UserError(f"{path}: not a plain checkpoint (it holds code): refused") from None
        raise UserError(f"{path}: unreadable checkpoint (not a torch checkpoint)") from None
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds for a damaged file
        raise UserError(f"{path}: unreadable checkpoint ({type(exc).__name__})") from None
    if not isinstance(ckpt, dict):
        raise UserError(f"{path}: not an ffdesk checkpoint (holds a {type(ckpt).__name__})")
    missing = [key for key in (*CHECKPOINT_KEYS, *require) if key not in ckpt]
    if missing:
        raise UserError(f"{path}: not an ffdesk checkpoint (no {', '.join(missing)})")
    return ckpt


MODEL_SIZES: dict[str, tuple[int, ...] | range] = {
    "resolution": RESOLUTIONS,
    "encoder_dims": range(4, 64 + 1),
    "ae_dims": range(16, 384 + 1),
    "decoder_dims": range(4, 64 + 1),
    "decoders": range(1, 2 + 1),
}
"""What each size of a checkpoint's `model_config` may be: what `ffdesk train` makes. Its
`--resolution` takes 64, 128 or 256; its networks are `ModelConfig.for_resolution` (encoder and
decoder 64, bottleneck 128 to 384) or `ModelConfig.tiny` (8, 32, 8), and a distilled student
(`ModelConfig.student`) divides those by 2 or 4, down to its floors of 4, 16 and 4 (a student of
a student too); one decoder or two. A size outside these is a crafted or damaged checkpoint:
`encoder_dims: 200000` asked for 8 TB at the first layer."""
_MODEL_SWITCHES = ("separable", "plain_encoder")


def _size_problem(name: str, value: Any) -> str | None:
    """What is wrong with `model_config`'s `name` (a `MODEL_SIZES` field) being `value`; None
    when it is a size `ffdesk train` makes."""
    allowed = MODEL_SIZES[name]
    if isinstance(value, int) and not isinstance(value, bool) and value in allowed:
        return None
    if isinstance(allowed, range):
        within = f"{allowed.start} to {allowed.stop - 1}"
    else:
        within = " or ".join(map(str, allowed))
    if isinstance(value, bool) or not isinstance(value, int):
        shown = f"is a {type(value).__name__}"
    else:  # (a number of thousands of digits is not even written out)
        shown = f"is {value}" if abs(value) < 10**12 else "is far out of range"
    return f"{name} {shown}; ffdesk train makes {within}"


def checkpoint_config(ckpt: dict[str, Any], run_dir: Path, grad_checkpoint: bool = False) -> ModelConfig:
    """The checkpoint's `ModelConfig`, or `UserError` (one line naming the checkpoint, in its run
    folder, and the field) when its `model_config` is not one: not a mapping of `ModelConfig`'s
    fields, or a size that `ffdesk train` never makes (`MODEL_SIZES`), which would have the
    network built at that size (terabytes) before anything else looked at it."""
    saved = ckpt.get("model_config")
    path = Path(run_dir) / control.CHECKPOINT
    try:
        if not isinstance(saved, dict):
            raise TypeError
        cfg = ModelConfig(**{**saved, "grad_checkpoint": grad_checkpoint})
    except TypeError:
        raise UserError(f"{path}: not an ffdesk checkpoint (bad model_config)") from None
    for name in MODEL_SIZES:
        problem = _size_problem(name, getattr(cfg, name))
        if problem is not None:
            raise UserError(f"{path}: not an ffdesk checkpoint (bad model_config: {problem})")
    for name in _MODEL_SWITCHES:
        if not isinstance(getattr(cfg, name), bool):
            raise UserError(
                f"{path}: not an ffdesk checkpoint (bad model_config: {name} is not true or false)"
            )
    return cfg


def contract(cfg: ModelConfig, alignment: dict[str, Any], step: int, extra: dict[str, Any]) -> dict[str, Any]:
    """The contract of an export of a model of `cfg` (`ffdesk.training.contract`)."""
    return contract_document(cfg.resolution, alignment, step, cfg.to_json(), extra)


INT8_MODEL = control.INT8_MODEL


def export_run(run_dir: Path, out: Path | None = None) -> Path:
    """Write `RUN_DIR/model.onnx` (atomically) and `RUN_DIR/model.json` from the latest checkpoint.

    A quantization-aware run (`RUN_DIR/qat` of a run) writes `model_int8.onnx` + `model_int8.json`
    into the run it tuned instead.
    """
    run_dir = Path(run_dir)
    ckpt = load_checkpoint(run_dir)
    cfg = checkpoint_config(ckpt, run_dir)
    kind = str(ckpt.get("model_kind") or "swap")
    model = SwapAutoencoder(cfg)
    if kind == "qat":
        qat.prepare(model)
    model.load_state_dict(ckpt["model"])
    extra: dict[str, Any] = {
        "source_faceset": ckpt.get("src"),
        "target_faceset": ckpt.get("dst"),
        "model_kind": kind,
    }
    if ckpt.get("teacher"):
        extra["teacher"] = ckpt["teacher"]
    if kind == "qat":
        extra["precision"] = "int8"
        extra["quantization"] = {
            "method": "qat",
            "format": "QDQ",
            "weights": "int8 per channel",
            "activations": "uint8 per tensor",
            "float_layers": "output heads",
        }
        info = contract(cfg, alignment=ckpt.get("alignment") or {}, step=int(ckpt["step"]), extra=extra)
        teacher = Path(str(ckpt.get("teacher") or run_dir.parent))
        return export_int8_model(model, info, out or teacher / INT8_MODEL)
    info = contract(cfg, alignment=ckpt.get("alignment") or {}, step=int(ckpt["step"]), extra=extra)
    return export_model(model, info, out or run_dir / control.MODEL)


def export_int8_model(model: SwapAutoencoder, info: dict[str, Any], out: Path) -> Path:
    """The fake-quantized network as an INT8 QDQ ONNX, checked against torch in onnxruntime."""
    r = model.cfg.resolution
    swapper = ExportedSwapper(model).eval().float().cpu()
    probe = torch.rand(2, 3, r, r, generator=torch.Generator().manual_seed(0))
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic.replacing(out) as tmp:
        qat.export_int8(swapper, r, tmp)
        _add_metadata(tmp, info)
        with torch.no_grad():
            want = swapper(probe)[0].numpy()
        got = _run_onnx(tmp, probe.numpy())
        info = {**info, "max_abs_diff_vs_torch": float(np.abs(got - want).max())}
    write_json_atomic(out.with_suffix(".json"), info)
    return out


def _add_metadata(path: Path, info: dict[str, Any]) -> None:
    import onnx

    proto = onnx.load(str(path))
    meta = {"ffdesk.kind": KIND, "ffdesk.contract": json.dumps(info)}
    for key, value in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(proto, str(path))


def export_model(model: SwapAutoencoder, info: dict[str, Any], out: Path) -> Path:
    """Export decoder A over the shared encoder and check it against torch in onnxruntime."""
    r = model.cfg.resolution
    swapper = ExportedSwapper(model).eval().float().cpu()
    probe = torch.rand(2, 3, r, r, generator=torch.Generator().manual_seed(0))
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic.replacing(out) as tmp:
        _torch_export(swapper, probe[:1], tmp)
        _add_metadata(tmp, info)
        with torch.no_grad():
            want = swapper(probe)[0].numpy()
        got = _run_onnx(tmp, probe.numpy())
        info = {**info, "max_abs_diff_vs_torch": float(np.abs(got - want).max())}
    write_json_atomic(out.with_suffix(".json"), info)
    return out


def _torch_export(module: torch.nn.Module, example: torch.Tensor, path: Path) -> None:
    axes = {"target": {0: "N"}, "output": {0: "N"}, "mask": {0: "N"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            # The TorchScript exporter is ~7x quicker here and gives the same graph for this model.
            torch.onnx.export(module, (example,), str(path), input_names=["target"],
                              output_names=["output", "mask"], dynamic_axes=axes, dynamo=False,
                              external_data=False, opset_version=ONNX_OPSET)  # fmt: skip
        except Exception:  # noqa: BLE001 - fall back to the dynamo exporter
            torch.onnx.export(module, (example,), str(path), input_names=["target"],
                              output_names=["output", "mask"],
                              dynamic_shapes={"target": {0: torch.export.Dim("N", min=1, max=256)}},
                              dynamo=True, external_data=False)  # fmt: skip


def _run_onnx(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    from ffdesk.runtime.sessions import refuse_undecodable

    refuse_undecodable(Path(path))  # (ONNX Runtime takes UTF-8 paths only)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    result = sess.run(["output"], {"target": x.astype(np.float32)})
    return np.asarray(result[0])
