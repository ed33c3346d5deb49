"""Render stages for a locally trained swapper (`ffdesk train` -> `RUN_DIR/model.onnx`).

    detect -> track (the shared face front end) -> swap with the trained model (batched)

A trained swapper needs no source photo: it only ever draws the one person it was trained on.
Its contract (`model.json` beside the file, also in the ONNX metadata) gives the crop size and
the alignment template; each chosen face is aligned with that template, swapped in batches
through the render's `ResidencyManager`, and pasted back under the model's own face mask. The
pasted pixels are recorded as changed regions, so the encoder writes only those back into the
decoded frames (as for the other swappers).
`--swapper` may name the .onnx file or the run folder holding it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk import jsontext
from ffdesk.errors import UserError
from ffdesk.faces.align import TEMPLATES
from ffdesk.faces.types import Face
from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.job import Provider, RenderJob
from ffdesk.pipeline.report import FaceCounts, ModelsReport, StageFigures
from ffdesk.pipeline.stage import FramePacket, Stage
from ffdesk.pipeline.stages.placement import ProcessorFrames, ProcessorModels, WarmUp, held_back_by
from ffdesk.pipeline.stages.redraw import AlignedFaces, redraw_faces
from ffdesk.training.contract import KIND, ContractError, TrainedContract
from ffdesk.types import Frame, Mask, Mode, Precision
from ffdesk.userpath import expand_user

if TYPE_CHECKING:
    from ffdesk.pipeline.stages.front import FaceFrontEnd
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.precision import Concrete
    from ffdesk.runtime.residency import Share

DEFAULT_TEMPLATE = "arcface_128"


def model_path(value: str, models_dir: Path | None = None) -> Path:
    """The .onnx a `--swapper` value names (a run folder means its model.onnx). A relative
    name that is not there is looked for in `models_dir` (the environment's models folder)."""
    p = expand_user(value)
    if models_dir is not None and not p.is_absolute() and not p.exists() and (models_dir / p).exists():
        p = models_dir / p
    return p / "model.onnx" if p.is_dir() else p


def chosen_model(value: str, models_dir: Path | None, mode: Mode, precision: Precision) -> Path:
    """The .onnx a render runs for a `--swapper` value. A file is run as named. A run folder gives
    its `model.onnx`, except: `--precision int8` takes the quantization-aware export beside it
    (`model_int8.onnx`: a one-line error when the run has none), and a preview with `--precision
    auto` takes the run's latest distilled student (the one its `student.json` names) when that
    file is there."""
    from ffdesk.training import control

    path = model_path(value, models_dir)
    run = path.parent
    if path.name != control.MODEL or not (run / control.MODEL).is_file():
        return path
    if precision == "int8":
        int8 = run / control.INT8_MODEL
        if not int8.is_file():
            raise UserError(
                f"{run}: --precision int8 needs the run's quantization-aware export "
                f"{control.INT8_MODEL} (make it with `ffdesk train --qat`)"
            )
        return int8
    if mode == "preview" and precision == "auto":
        student = _student_of(run)
        if student is not None:
            return student
    return path


def _student_of(run: Path) -> Path | None:
    """The student export a teacher run's `student.json` names, when it is there and ours."""
    from ffdesk.training import control

    try:
        note = jsontext.read(run / control.STUDENT_NOTE)
    except (OSError, ValueError):
        return None
    model = Path(str(note.get("model") or "")) if isinstance(note, dict) else None
    if model is None or not model.is_file() or read_contract(model) is None:
        return None
    return model


def read_contract(path: Path) -> TrainedContract | None:
    """The trained-swapper contract of an .onnx file (sidecar JSON, else ONNX metadata); None
    when the file is not one `ffdesk train` made. A contract that says it is one but is damaged
    (a size or precision it cannot have) is a one-line `UserError` naming the file."""
    if not path.is_file() or path.suffix.lower() != ".onnx":
        return None
    for source, data in _contract_documents(path):
        if not isinstance(data, dict) or data.get("kind") != KIND:
            continue
        try:
            return TrainedContract.from_json(data)
        except ContractError as exc:
            raise UserError(f"{source}: damaged trained-swapper contract ({exc})") from None
    return None


def _contract_documents(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, the JSON) of each place a contract may be: the sidecar, then the ONNX metadata."""
    sidecar = path.with_suffix(".json")
    try:
        document = jsontext.read(sidecar)
    except (OSError, ValueError):
        document = None
    if document is not None:
        yield sidecar.name, document
    try:
        import onnx

        proto = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - not an ONNX file we can read: not ours
        return
    for prop in proto.metadata_props:
        if prop.key == "ffdesk.contract":
            try:
                document = jsontext.loads(prop.value)
            except ValueError:
                return
            yield f"{path.name} (metadata)", document


def is_trained_swapper(value: str | None, models_dir: Path | None = None) -> bool:
    """Whether a `--swapper` value names a model made by `ffdesk train` (`models_dir`: where a
    relative name is also looked for)."""
    return bool(value) and read_contract(model_path(str(value), models_dir)) is not None


def trained_variant(
    path: Path, holds: Concrete, requested: Precision, env: RuntimeEnv
) -> tuple[Concrete, Path]:
    """The precision a trained swapper runs at and the file to load. `--precision fp16` runs the
    file's FP16 variant (made now and cached, as a model pack's swapper's is); `int8` runs the
    quantization-aware export `chosen_model` picked (what the file `holds`); `fp32` and `auto`
    run what the file holds (a trained swapper has no FP32 sample check that would catch an FP16
    variant gone wrong, so `auto` does not take one unasked). `UserError` in one line when the
    FP16 variant cannot be made (`requested` was checked with the job)."""
    from ffdesk.runtime.precision import make_fp16

    if requested != "fp16" or holds != "fp32":
        return holds, path
    try:
        return "fp16", make_fp16(path, cache_dir=env.variants_dir)
    except Exception as exc:  # noqa: BLE001 - the converter's failure on the user's model, in one line
        detail = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise UserError(f"{path.name}: cannot make its fp16 variant ({detail}); run it in fp32") from None


class TrainedSwap:
    """The model and its contract; swaps stacks of aligned crops through a residency manager.

    `provider` says where the model runs; `tile` > 1 draws faces at `tile` x the model's
    resolution by sub-pixel tiling, as the model-pack swappers do."""

    def __init__(
        self,
        path: Path,
        contract: TrainedContract,
        budget_bytes: int | None,
        provider: Provider = "auto",
        tile: int = 1,
        *,
        env: RuntimeEnv,
        share: Share | None = None,
        precision: Precision = "auto",
    ) -> None:
        """`precision`: what the job asks for (`--precision`; `trained_variant`)."""
        from ffdesk.pipeline.providers import job_device, session_options
        from ffdesk.runtime.residency import OnnxLoader, ResidencyManager

        self.path = path
        self.resolution = contract.resolution
        self.template = contract.template or DEFAULT_TEMPLATE
        if self.template not in TEMPLATES:
            raise UserError(f"{path}: unknown alignment template {self.template!r} in its contract")
        self.tile = tile
        self.on_event: Callable[[ev.Event], None] = lambda _e: None
        self.device = job_device(provider, env)
        self.options = session_options(provider, self.device, env)
        self.manager = ResidencyManager(
            budget_bytes=budget_bytes,
            device=self.device,
            on_change=self._memory_changed,
            env=env,
            share=share,
        )
        holds: Concrete = contract.precision
        self.precision, self.session_path = trained_variant(path, holds, precision, env)
        """The precision that runs (what the file holds, or its FP16 variant) and its file."""
        self.key = f"trained_swapper@{self.precision}"
        self.manager.register(
            self.key,
            OnnxLoader(self.session_path, self.options, name="trained_swapper", precision=self.precision),
        )

    @property
    def crop_size(self) -> int:
        """The side of the aligned crops `swap` takes: the model's resolution x `tile`."""
        return self.resolution * self.tile

    def _memory_changed(self, models: tuple[tuple[str, int], ...], budget: int | None) -> None:
        self.on_event(ev.MemoryChanged(models, budget))

    @staticmethod
    def draw_tiles(session: Any, chunk: Sequence[Frame]) -> list[tuple[Frame, Mask]]:
        """One model call: R x R x 3 uint8 tiles (R: `resolution`) -> (drawn tile, its mask) each."""
        x = np.stack(chunk).astype(np.float32).transpose(0, 3, 1, 2) / 255.0
        out = session.run({"target": np.ascontiguousarray(x)})
        rgb = (np.clip(out["output"], 0, 1).transpose(0, 2, 3, 1) * 255 + 0.5).astype(np.uint8)
        masks = np.clip(out["mask"][:, 0], 0, 1).astype(np.float32)
        return list(zip(rgb, masks, strict=True))

    def swap(
        self, crops: npt.NDArray[np.uint8], models: ProcessorModels, max_batch: int
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
        """N x C x C x 3 uint8 crops of the person to replace (C: `crop_size`) -> (drawn faces,
        masks N x C x C); their tiles through `models` (its manager) in chunks of at most
        `max_batch`."""
        from ffdesk.swap.onnx_swapper import merge_tiles, split_tiles

        results = models.run(
            self.key, self.draw_tiles, list(split_tiles(crops, self.tile)), max_batch=max_batch
        )
        rgb = merge_tiles(np.stack([r[0] for r in results]), self.tile)
        masks = merge_tiles(np.stack([r[1] for r in results])[..., None], self.tile)  # type: ignore[arg-type]
        return rgb, np.asarray(masks[..., 0], np.float32)

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


class TrainedSwapStage(ProcessorFrames):
    """Swaps the chosen faces of a batch of frames in one model call. One thread: the model
    call is the batch. Its model's manager is the one later processors share (`models`), and on
    a CPU budget it bounds and counts the frames the render holds (`ProcessorFrames`)."""

    name = "swap"
    workers = 1
    edits_regions = True  # records each pasted face's region

    def __init__(self, model: TrainedSwap, max_batch: int, ahead: int = 0) -> None:
        """`ahead`: the frames the stages before it hold back (the face front end's tracking)."""
        self.model = model
        self.max_batch = max_batch
        self.models = ProcessorModels(model.manager, model.options, owns=True, ahead=ahead, keys=[model.key])
        self.tiles_per_call = max_batch * model.tile * model.tile
        """The most tiles one model call takes: a face a frame of a batch, each in `tile`^2 tiles."""
        self._lock = threading.Lock()
        self._frames_with_faces = 0
        self._swapped = 0
        self._skipped: Counter[str] = Counter()

    def bind_events(self, on_event: Callable[[Any], None]) -> None:
        self.model.on_event = on_event

    def start(self) -> None:
        pass

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        with_faces = sum(1 for p in batch if p.faces)
        aligned = redraw_faces(batch, self.model.template, self.model.crop_size, self._draw)
        with self._lock:
            self._frames_with_faces += with_faces
            self._swapped += len(aligned) if aligned is not None else 0
            self._skipped.update(reason or "unknown" for p in batch for reason in p.swap.skips)
        return list(batch)

    def warm_ups(self) -> list[WarmUp]:
        """Its model at every batch of tiles it takes (black tiles)."""
        side = self.model.resolution
        sample = np.zeros((side, side, 3), np.uint8)
        return [WarmUp(self.model.key, self.model.draw_tiles, sample, self.tiles_per_call)]

    def _draw(self, aligned: AlignedFaces) -> tuple[npt.NDArray[np.uint8], list[Mask]]:
        drawn, masks = self.model.swap(aligned.crops, self.models, self.tiles_per_call)
        faces = zip(masks, aligned.faces, aligned.affines, strict=True)
        return drawn, [blend_mask(mask, face, m) for mask, face, m in faces]

    def finish(self) -> StageFigures:
        residency = self.model.manager.report()
        self.model.close()
        models = ModelsReport.of(
            residency,
            swapper=str(self.model.path),
            swapper_precision=self.model.precision,
            swapper_kind=KIND,
            swap_scale=self.model.tile,
        )
        with self._lock:
            faces = FaceCounts.of(self._frames_with_faces, self._swapped, self._skipped)
        return StageFigures(faces=faces, models=models)


def trained_stages(
    job: RenderJob,
    info: MediaInfo | None = None,
    *,
    env: RuntimeEnv,
    share: Share | None = None,
    front: FaceFrontEnd | None = None,
) -> list[Stage]:
    """Stages for a render with a trained swapper; the model and its contract are checked here,
    on the caller's thread, before any frame is decoded. `env`: the runtime environment (models
    folder, driver switches); `share`: the residency pool the model joins; `front`: the face
    front end the swap follows (default: the job's, `FaceFrontEnd.for_job`)."""
    from ffdesk.pipeline.stages.front import FaceFrontEnd
    from ffdesk.runtime.files import refuse_unsafe, resolve_models_dir

    assert job.swapper is not None
    path = chosen_model(job.swapper, resolve_models_dir(job.models_dir, env), job.mode, job.precision)
    contract = read_contract(path)
    if contract is None:
        raise UserError(f"{path}: not a model exported by `ffdesk train` (no {KIND} contract)")
    refuse_unsafe(path)  # a run folder from elsewhere: what its model declares, checked first
    model = TrainedSwap(
        path, contract, job.memory_budget, provider=job.provider, tile=job.swap_scale, env=env, share=share,
        precision=job.precision,
    )  # fmt: skip
    front = front or FaceFrontEnd.for_job(job, info=info)
    before = front.stages()
    return [*before, TrainedSwapStage(model, max_batch=max(1, job.batch), ahead=held_back_by(before))]
