"""Rendering a clip with a model pack through `ffdesk render`, and comparing frames."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ffdesk.cli import main
from ffdesk.media.decode import VideoReader, read_image
from ffdesk.resources import resource_path

from .conftest import FRAMES

PHOTO = str(resource_path("sample", "grace_hopper.jpg"))


def render_args(pack: Path, clip: Path, out: Path, *extra: str) -> list[str]:
    args = [
        "render",
        "--target",
        str(clip),
        "--output",
        str(out),
        "--no-resume",
        "-q",
        "--end",
        str(FRAMES / 25),
    ]
    args += ["--source", PHOTO, "--models-dir", str(pack), "--precision", "fp32", *extra]
    return args


def render(pack: Path, clip: Path, out: Path, *extra: str) -> dict[str, Any]:
    """Render to PNG frames in `out`; the JSON report."""
    report = out.with_suffix(".json")
    assert main([*render_args(pack, clip, out, *extra), "--encoder", "png", "--report", str(report)]) == 0
    result: dict[str, Any] = json.loads(report.read_text())
    assert result["frames_out"] == FRAMES
    return result


def changed_fractions(clip: Path, out: Path) -> list[float]:
    """Per frame, the fraction of pixels the render changed."""
    frames = [read_image(p) for p in sorted(out.glob("*.png"))]
    with VideoReader(clip, end_s=FRAMES / 25) as reader:
        originals = [f.image for f in reader][: len(frames)]
    assert len(frames) == len(originals) == FRAMES
    return [
        float((a.astype(int) - b.astype(int)).any(-1).mean()) for a, b in zip(originals, frames, strict=True)
    ]


def model_names(report: dict[str, Any]) -> set[str]:
    return {str(m["name"]) for m in report["models"]}


def frames(out: Path) -> list[np.ndarray]:
    return [read_image(p) for p in sorted(out.glob("*.png"))]
