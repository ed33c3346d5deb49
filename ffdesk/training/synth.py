"""Synthesized aligned face crops of made-up identities, for tests and benchmarks.

Each identity has its own skin tone, eye colour and forehead pattern; every sample varies pose
(small rotation, shift, scale), expression (eyes, mouth) and background, like crops from a clip.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.training.store import FaceRecord, FacesetWriter
from ffdesk.types import Frame

CONTOUR_POINTS = 32


@dataclass(frozen=True)
class SynthFace:
    crop: Frame
    mask: npt.NDArray[np.uint8]
    points: npt.NDArray[np.float32]
    """CONTOUR_POINTS face-outline points, then the 5 keypoints, in crop pixels."""


_IDENTITIES: tuple[dict[str, Any], ...] = (
    {"skin": (224, 172, 140), "eye": (40, 90, 200), "pattern": "stripes"},
    {"skin": (120, 80, 60), "eye": (60, 160, 60), "pattern": "dots"},
    {"skin": (240, 210, 190), "eye": (120, 70, 30), "pattern": "plain"},
)


def synth_face(identity: int, size: int, rng: np.random.Generator) -> SynthFace:
    """One crop of `identity` (0, 1, 2) at `size` x `size`."""
    ident = _IDENTITIES[identity % len(_IDENTITIES)]
    s = float(size)
    base = rng.integers(30, 200, size=3)
    img = np.empty((size, size, 3), np.uint8)
    img[:] = base
    noise = rng.normal(0, 12, (size // 8 + 1, size // 8 + 1, 3))
    img = np.clip(img + cv2.resize(noise, (size, size), interpolation=cv2.INTER_LINEAR), 0, 255).astype(
        np.uint8
    )
    cx = s * (0.5 + rng.uniform(-0.03, 0.03))
    cy = s * (0.52 + rng.uniform(-0.03, 0.03))
    ax, ay = s * 0.3 * rng.uniform(0.95, 1.05), s * 0.4 * rng.uniform(0.95, 1.05)
    angle = rng.uniform(-8, 8)
    skin = tuple(int(c) for c in np.clip(np.array(ident["skin"]) + rng.normal(0, 6, 3), 0, 255))
    center = (round(cx), round(cy))
    cv2.ellipse(img, center, (round(ax), round(ay)), angle, 0, 360, skin, -1, cv2.LINE_AA)
    rot = cv2.getRotationMatrix2D((cx, cy), -angle, 1.0)

    def place(x: float, y: float) -> tuple[float, float]:
        px, py = rot @ np.array([cx + x * ax, cy + y * ay, 1.0])
        return float(px), float(py)

    if ident["pattern"] == "stripes":
        for k in range(3):
            p1, p2 = place(-0.5, -0.75 + 0.12 * k), place(0.5, -0.75 + 0.12 * k)
            cv2.line(img, _pt(p1), _pt(p2), (200, 40, 40), max(1, size // 64), cv2.LINE_AA)
    elif ident["pattern"] == "dots":
        for k in range(5):
            p = place(-0.4 + 0.2 * k, -0.6)
            cv2.circle(img, _pt(p), max(1, size // 48), (250, 230, 60), -1, cv2.LINE_AA)
    openness = rng.uniform(0.3, 1.0)
    eyes = [place(-0.38, -0.15), place(0.38, -0.15)]
    for e in eyes:
        cv2.ellipse(img, _pt(e), (round(s * 0.06), round(s * 0.035 * openness)), angle, 0, 360,
                    (250, 250, 250), -1, cv2.LINE_AA)  # fmt: skip
        cv2.circle(img, _pt(e), max(1, round(s * 0.025 * openness)), ident["eye"], -1, cv2.LINE_AA)
    nose = place(0.0, 0.1)
    cv2.circle(img, _pt(nose), max(1, size // 40), tuple(int(c * 0.8) for c in skin), -1, cv2.LINE_AA)
    mouth_l, mouth_r = place(-0.3, 0.45), place(0.3, 0.45)
    mouth_c = place(0.0, 0.45)
    cv2.ellipse(img, _pt(mouth_c), (round(s * 0.09), max(1, round(s * 0.05 * rng.uniform(0.1, 1.0)))),
                angle, 0, 360, (150, 40, 50), -1, cv2.LINE_AA)  # fmt: skip
    t = np.linspace(0, 2 * np.pi, CONTOUR_POINTS, endpoint=False)
    contour = [place(float(np.cos(a)), float(np.sin(a))) for a in t]
    points = np.array([*contour, *eyes, nose, mouth_l, mouth_r], np.float32)
    mask = np.zeros((size, size), np.uint8)
    cv2.fillConvexPoly(mask, np.round(points[:CONTOUR_POINTS]).astype(np.int32), 255, cv2.LINE_AA)
    return SynthFace(crop=img, mask=mask, points=points)


def _pt(p: tuple[float, float]) -> tuple[int, int]:
    return round(p[0]), round(p[1])


def synth_faceset(folder: Path, identity: int, count: int, size: int = 64, seed: int = 0) -> Path:
    """Write a faceset of `count` synthesized crops of `identity` into `folder`."""
    rng = np.random.default_rng(seed * 1000 + identity)
    writer = FacesetWriter(folder, size=size, points=CONTOUR_POINTS + 5)
    writer.index.settings = {"alignment": {"template": "arcface_128", "size": size}, "synthesized": True}
    source = f"synth:{identity}:{seed}"
    for i in range(count):
        f = synth_face(identity, size, rng)
        writer.add(f.crop, f.mask, f.points, i, FaceRecord(source=source, frame=i, score=1.0, blur=0.0))
    writer.source_done(source, {"size": count, "mtime_ns": 0, "faces": count, "frames": count})
    writer.commit()
    return folder
