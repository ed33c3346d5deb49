"""Rendering a clip with a model pack through `ffdesk render`, and comparing frames."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ffdesk.cli import main
from ffdesk.media.decode import VideoReader
from ffdesk.media.images import read_image
from ffdesk.runtime.resources import resource_path

from .conftest import FRAMES

PHOTO = str(resource_path("sample", "grace_hopper.jpg"))
FULL_PACK = ("inswapper_128", "arcface_w600k_r50", "gfpgan_1.4", "xseg_1", "bisenet_resnet_34")
"""The full pack's models: swapper, recognizer, enhancer, occluder and face parser."""
FULL_SETTINGS: dict[str, Any] = {
    "swapper": "inswapper_128",
    "recognizer": "arcface_w600k_r50",
    "enhancer": "gfpgan_1.4",
    "masks": ("box", "occlusion", "region"),
}
"""A render's model settings for the full pack, every mask on."""


def render_args(pack: Path, clip: Path, out: Path, *extra: str, frames: int = FRAMES) -> list[str]:
    args = [
        "render",
        "--target",
        str(clip),
        "--output",
        str(out),
        "--no-resume",
        "-q",
        "--end",
        str(frames / 25),
    ]
    args += ["--source", PHOTO, "--models-dir", str(pack), "--precision", "fp32", *extra]
    return args


def render(pack: Path, clip: Path, out: Path, *extra: str, frames: int = FRAMES) -> dict[str, Any]:
    """Render the clip's first `frames` frames to PNG frames in `out`; the JSON report."""
    report = out.with_suffix(".json")
    args = render_args(pack, clip, out, *extra, frames=frames)
    assert main([*args, "--encoder", "png", "--report", str(report)]) == 0
    result: dict[str, Any] = json.loads(report.read_text())
    assert result["frames_out"] == frames
    return result


def render_in_child(pack: Path, clip: Path, out: Path, *extra: str, env: dict[str, str]) -> dict[str, Any]:
    """`render` in a fresh Python process with `env`: what it measures of the models' memory
    (their footprints, recorded in the user folders `env` names) is theirs alone, not shaped by
    what earlier tests in this process left in its heap (memory freed there is reused, and a
    model's growth measured over it comes out small)."""
    report = out.with_suffix(".json")
    args = [*render_args(pack, clip, out, *extra), "--encoder", "png", "--report", str(report)]
    done = subprocess.run(
        [sys.executable, "-m", "ffdesk", *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(report.read_text())
    assert result["frames_out"] == FRAMES
    return result


def changed_fractions(clip: Path, out: Path, frames: int = FRAMES) -> list[float]:
    """Per frame of the clip's first `frames`, the fraction of pixels the render changed."""
    rendered = [read_image(p) for p in sorted(out.glob("*.png"))]
    with VideoReader(clip, end_s=frames / 25) as reader:
        originals = [f.image for f in reader][: len(rendered)]
    assert len(rendered) == len(originals) == frames
    return [
        float((a.astype(int) - b.astype(int)).any(-1).mean())
        for a, b in zip(originals, rendered, strict=True)
    ]


def model_names(report: dict[str, Any]) -> set[str]:
    return {str(m["name"]) for m in report["models"]}


def frames(out: Path) -> list[np.ndarray]:
    return [read_image(p) for p in sorted(out.glob("*.png"))]


def write_full_pack(folder: Path) -> Path:
    """`folder` with the full pack's stand-ins (dynamic batch) and mask models whose masks follow
    the picture (`content_masks`)."""
    from ffdesk.runtime.standins import write_standins

    write_standins(folder, list(FULL_PACK), dynamic_batch=True)
    content_masks(folder)
    return folder


def content_masks(folder: Path) -> None:
    """Replace the folder's xseg_1 and bisenet_resnet_34 with mask models whose masks follow the
    picture (random stand-ins give masks that hide the whole face): the occluder keeps where red
    outweighs blue (skin), the parser calls skin class 1, blue-ish pixels background (0) and
    the rest some other classes. Upstream shapes and dtypes, dynamic batch, `.hash` sidecars."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from ffdesk.runtime.integrity import save_onnx_atomic, write_sidecar

    def save(name: str, nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: list[Any]) -> None:
        graph = helper.make_graph(nodes, name, inputs, outputs, inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 9
        onnx.checker.check_model(model)
        path = folder / f"{name}.onnx"
        save_onnx_atomic(model, path)
        write_sidecar(path)

    occ_w = np.array([-12.0, 0.0, 12.0], np.float32).reshape(1, 3, 1, 1)  # BGR in: red minus blue
    save(
        "xseg_1",
        [
            helper.make_node("Transpose", ["input"], ["nchw"], perm=[0, 3, 1, 2]),
            helper.make_node("Conv", ["nchw", "occ_w", "occ_b"], ["logit"]),
            helper.make_node("Sigmoid", ["logit"], ["mask"]),
            helper.make_node("Transpose", ["mask"], ["output"], perm=[0, 2, 3, 1]),
        ],
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", 256, 256, 3])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n", 256, 256, 1])],
        [
            numpy_helper.from_array(occ_w, "occ_w"),
            numpy_helper.from_array(np.array([-0.5], np.float32), "occ_b"),
        ],
    )
    rng = np.random.default_rng(7)
    w = rng.normal(0.0, 0.4, (19, 3)).astype(np.float32)
    w[0] = (-2.0, 0.0, 2.5)  # background: blue-ish (RGB in, ImageNet-normalised)
    w[1] = (2.5, 0.0, -2.0)  # skin: red-ish
    save(
        "bisenet_resnet_34",
        [helper.make_node("Conv", ["input", "parse_w", "parse_b"], ["output"])],
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", 3, 512, 512])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n", 19, 512, 512])],
        [
            numpy_helper.from_array(w.reshape(19, 3, 1, 1), "parse_w"),
            numpy_helper.from_array(np.zeros(19, np.float32), "parse_b"),
        ],
    )
