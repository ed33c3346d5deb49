"""Render stages for a locally trained swapper (`ffdesk train` -> `RUN_DIR/model.onnx`).

    detect -> track (the embedded pipeline's) -> swap with the trained model (batched)

A trained swapper needs no source photo: it only ever draws the one person it was trained on.
Its contract (`model.json` beside the file, also in the ONNX metadata) gives the crop size and
the alignment template; each chosen face is aligned with that template, swapped in batches
through the render's `ResidencyManager`, and pasted back under the model's own face mask.
`--swapper` may name the .onnx file or the run folder holding it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.errors import UserError
from ffdesk.faces.align import TEMPLATES, paste_back, warp_face
from ffdesk.faces.types import Face
from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.stage import FramePacket, Stage, writable
from ffdesk.types import Frame, Mask

KIND = "ffdesk-trained-swapper"
DEFAULT_TEMPLATE = "arcface_128"


def model_path(value: str) -> Path:
    """The .onnx a `--swapper` value names (a run folder means its model.onnx)."""
    p = Path(value).expanduser()
    return p / "model.onnx" if p.is_dir() else p


def read_contract(path: Path) -> dict[str, Any] | None:
    """The trained-swapper contract of an .onnx file (sidecar JSON, else ONNX metadata), or None."""
    if not path.is_file() or path.suffix.lower() != ".onnx":
        return None
    sidecar = path.with_suffix(".json")
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
        if isinstance(data, dict) and data.get("kind") == KIND:
            return data
    except (OSError, json.JSONDecodeError):
        pass
    try:
        import onnx

        proto = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - not an ONNX file we can read: not ours
        return None
    for prop in proto.metadata_props:
        if prop.key == "ffdesk.contract":
            try:
                data = json.loads(prop.value)
            except json.JSONDecodeError:
                return None
            return data if isinstance(data, dict) and data.get("kind") == KIND else None
    return None


def is_trained_swapper(value: str | None) -> bool:
    """Whether a `--swapper` value names a model made by `ffdesk train`."""
    return bool(value) and read_contract(model_path(str(value))) is not None


class TrainedSwap:
    """The model and its contract; swaps stacks of aligned crops through a residency manager."""

    def __init__(self, path: Path, contract: dict[str, Any], budget_bytes: int | None) -> None:
        from ffdesk.runtime.residency import OnnxLoader, ResidencyManager
        from ffdesk.runtime.sessions import resolve_device

        self.path = path
        self.resolution = int(contract["resolution"])
        self.template = str((contract.get("alignment") or {}).get("template") or DEFAULT_TEMPLATE)
        if self.template not in TEMPLATES:
            raise UserError(f"{path}: unknown alignment template {self.template!r} in its contract")
        self.on_event: Callable[[ev.Event], None] = lambda _e: None
        self.manager = ResidencyManager(
            budget_bytes=budget_bytes, device=resolve_device("auto"), on_change=self._memory_changed
        )
        self.key = "trained_swapper@fp32"
        self.manager.register(self.key, OnnxLoader(path, name="trained_swapper", precision="fp32"))

    def _memory_changed(self, models: tuple[tuple[str, int], ...], budget: int | None) -> None:
        self.on_event(ev.MemoryChanged(models, budget))

    def swap(self, crops: npt.NDArray[np.uint8]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
        """N x R x R x 3 uint8 crops of the person to replace -> (drawn faces, masks N x R x R)."""

        def run(session: Any, chunk: Sequence[Frame]) -> list[tuple[Frame, Mask]]:
            x = np.stack(chunk).astype(np.float32).transpose(0, 3, 1, 2) / 255.0
            out = session.run({"target": np.ascontiguousarray(x)})
            rgb = (np.clip(out["output"], 0, 1).transpose(0, 2, 3, 1) * 255 + 0.5).astype(np.uint8)
            masks = np.clip(out["mask"][:, 0], 0, 1).astype(np.float32)
            return list(zip(rgb, masks, strict=True))

        results = self.manager.run_with_recovery(self.key, run, list(crops))
        return np.stack([r[0] for r in results]), np.stack([r[1] for r in results])

    def close(self) -> None:
        self.manager.close()


def blend_mask(mask: Mask, face: Face, m: npt.NDArray[np.float64]) -> Mask:
    """Where to blend the drawn face: the hull of the face's mesh in the crop (the same region
    the model was trained to draw) or, without a mesh, the model's own mask; shrunk a little and
    feathered so the seam falls inside the drawn face."""
    r = mask.shape[0]
    k = max(3, (r // 32) | 1)
    if face.landmarks is not None:
        pts = np.asarray(face.landmarks, np.float64)[:, :2] @ m[:, :2].T + m[:, 2]
        hard = np.zeros((r, r), np.uint8)
        cv2.fillConvexPoly(hard, cv2.convexHull(np.round(pts).astype(np.int32)), 1)
    else:
        hard = (mask > 0.5).astype(np.uint8)
    shrunk = cv2.erode(hard, np.ones((k, k), np.uint8))
    return np.asarray(cv2.GaussianBlur(shrunk.astype(np.float32), (2 * k + 1, 2 * k + 1), 0), np.float32)


class TrainedSwapStage:
    """Swaps the chosen faces of a batch of frames in one model call. One thread: the model
    call is the batch."""

    name = "swap"
    workers = 1

    def __init__(self, model: TrainedSwap, max_batch: int) -> None:
        self.model = model
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._frames_with_faces = 0
        self._swapped = 0

    def bind_events(self, on_event: Callable[[Any], None]) -> None:
        self.model.on_event = on_event

    def start(self) -> None:
        pass

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        r, template = self.model.resolution, self.model.template
        jobs: list[tuple[FramePacket, Face, npt.NDArray[np.float64]]] = []
        crops: list[Frame] = []
        with_faces = 0
        for p in batch:
            faces: list[Face] = p.annotations.get("swap_faces", [])
            if p.annotations.get("faces"):
                with_faces += 1
            for face in faces:
                crop, m = warp_face(p.image, face.kps, template, r)
                crops.append(crop)
                jobs.append((p, face, m))
        if crops:
            drawn, masks = self.model.swap(np.stack(crops))
            for (p, face, m), face_img, mask in zip(jobs, drawn, masks, strict=True):
                image = writable(p.image)
                p.image = paste_back(image, face_img, m, blend_mask(mask, face, m), inplace=True)
        with self._lock:
            self._frames_with_faces += with_faces
            self._swapped += len(crops)
        return list(batch)

    def finish(self) -> dict[str, Any]:
        figures = self.model.manager.report()
        self.model.close()
        with self._lock:
            figures.update(
                swapper=str(self.model.path),
                swapper_kind=KIND,
                swapper_precision="fp32",
                frames_with_faces=self._frames_with_faces,
                faces_swapped=self._swapped,
                faces_skipped=0,
            )
        return figures


def trained_stages(job: RenderJob, info: MediaInfo | None = None) -> list[Stage]:
    """Stages for a render with a trained swapper; the model and its contract are checked here,
    on the caller's thread, before any frame is decoded."""
    from ffdesk.faces.analyser import AnalyserSettings, FaceAnalyser
    from ffdesk.pipeline.stages.embedded import (
        DET_SIZE,
        DetectStage,
        TrackStage,
        clip_fps,
        embedded_models_dir,
        reference_appearance,
    )

    assert job.swapper is not None
    path = model_path(job.swapper)
    contract = read_contract(path)
    if contract is None:
        raise UserError(f"{path}: not a model exported by `ffdesk train` (no {KIND} contract)")
    model = TrainedSwap(path, contract, job.memory_budget)
    analyser = FaceAnalyser(AnalyserSettings(), models_dir=embedded_models_dir(job))
    reference = reference_appearance(analyser, job) if job.face_selection == "reference" else None
    return [
        DetectStage(analyser, det_size=DET_SIZE.get(job.mode, 640)),
        TrackStage(analyser, fps=clip_fps(job, info), selection=job.face_selection, reference=reference),
        TrainedSwapStage(model, max_batch=max(1, job.batch)),
    ]
