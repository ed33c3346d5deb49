"""The render report: typed figures the engine builds; JSON only at the edges.

`RenderReport` is what `run_render`, `render_segment` and a farm render return and what the
`Done` event carries. Its parts:

- `StageTiming`: calls, frames and wall/CPU milliseconds of one stage (decode and encode too);
- `VideoFigures`: what only a clip render has (encoder, resume, repairs, audio);
- `FaceCounts`: frames with faces, faces swapped and skipped (by reason), from a swap stage;
- `ShotFigures`: the hard cuts between shots the tracking stage found, and so the shots;
- `ModelsReport`: the models a model stage ran (`ModelStats`), its residency figures, the
  out-of-memory recoveries (`OomEvent`, actions as `OomAction`), the swapper, and for a model pack
  the reduced-precision `QualityCheck`, the `Alignment` it used and the `ModelOrder` it ran in;
- `FarmSummary`: how a farm render used its workers.

A stage's `finish()` returns `StageFigures` (its face counts and/or model figures); the engine
merges them into the report. `to_json_dict()` gives the JSON the command line writes with
`--report` (its keys are the report's public format: scripts read them) and `from_json_dict()`
reads it back into an equal report; a farm worker ships its segment's report that way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar, runtime_checkable

from ffdesk.pipeline.codec import Codec, Shape
from ffdesk.runtime.device import TransferCount, copies_of, tally
from ffdesk.runtime.residency import ModelStats, OomEvent, ResidencyReport
from ffdesk.telemetry.render import TelemetrySummary

JsonDict = dict[str, Any]


class ReportError(ValueError):
    """A report's JSON lacks a figure or has one of the wrong type (one line)."""


class _InJson:
    """What every part of the report has: its JSON through the one codec (`REPORTS`)."""

    def to_json_dict(self) -> JsonDict:
        """This part as the JSON `--report` writes (the keys scripts read)."""
        return REPORTS.encode(self)

    @classmethod
    def from_json_dict(cls, data: Any) -> Self:
        """The part `to_json_dict` wrote; `ReportError` naming what is missing or wrong."""
        return REPORTS.decode(cls, data)


# ---- stage timings -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StageTiming(_InJson):
    """What one stage of a render did: calls, frames, and the wall and CPU time it took."""

    name: str
    calls: int = 0
    frames: int = 0
    ms_total: float = 0.0
    cpu_ms_total: float = 0.0

    def plus(self, other: StageTiming) -> StageTiming:
        """Both parts' figures added up (the same stage in two parts of a render)."""
        return StageTiming(
            self.name,
            self.calls + other.calls,
            self.frames + other.frames,
            round(self.ms_total + other.ms_total, 3),
            round(self.cpu_ms_total + other.cpu_ms_total, 3),
        )


class _Adds(Protocol):
    """A part's figures that add up with another part's of the same name."""

    @property
    def name(self) -> str: ...

    def plus(self, other: Self) -> Self: ...


A = TypeVar("A", bound=_Adds)


def merge_by_name(*parts: Sequence[A]) -> tuple[A, ...]:
    """The figures of several parts of a render, each name once (first seen first), added up."""
    merged: dict[str, A] = {}
    for part in parts:
        for figures in part:
            seen = merged.get(figures.name)
            merged[figures.name] = figures if seen is None else seen.plus(figures)
    return tuple(merged.values())


# ---- face counts -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FaceCounts(_InJson):
    """What a swap stage did to faces: frames that had any, faces swapped, faces skipped (and
    why: reason -> count, in the order the reasons first came up)."""

    frames_with_faces: int = 0
    faces_swapped: int = 0
    faces_skipped_by_reason: tuple[tuple[str, int], ...] = ()
    people: tuple[PersonFaces, ...] | None = None
    """With a face map: which person got which sources, and how many of their faces were swapped
    (None without one)."""

    @classmethod
    def of(
        cls,
        frames_with_faces: int,
        faces_swapped: int,
        skipped: Mapping[str, int],
        people: tuple[PersonFaces, ...] | None = None,
    ) -> FaceCounts:
        return cls(
            frames_with_faces, faces_swapped, tuple((str(r), int(n)) for r, n in skipped.items()), people
        )

    @property
    def faces_skipped(self) -> int:
        return sum(n for _, n in self.faces_skipped_by_reason)

    def skipped(self, reason: str) -> int:
        """Faces skipped for `reason` (0 when none was)."""
        return dict(self.faces_skipped_by_reason).get(reason, 0)

    def plus(self, other: FaceCounts) -> FaceCounts:
        reasons = dict(self.faces_skipped_by_reason)
        for reason, n in other.faces_skipped_by_reason:
            reasons[reason] = reasons.get(reason, 0) + n
        return FaceCounts.of(
            self.frames_with_faces + other.frames_with_faces,
            self.faces_swapped + other.faces_swapped,
            reasons,
            PersonFaces.merged(self.people, other.people) if self.people or other.people else None,
        )


@dataclass(frozen=True)
class PersonFaces(_InJson):
    """One face-map entry of a render: the person (their index in `ffdesk faces`'s listing, or
    the reference photo's name), the source photos put on them, and their faces swapped."""

    person: str
    sources: tuple[str, ...]
    faces: int = 0

    @staticmethod
    def merged(
        a: tuple[PersonFaces, ...] | None, b: tuple[PersonFaces, ...] | None
    ) -> tuple[PersonFaces, ...]:
        """The entries of both parts of a render, the faces of one entry added up."""
        out: dict[tuple[str, tuple[str, ...]], int] = {}
        for p in (*(a or ()), *(b or ())):
            out[(p.person, p.sources)] = out.get((p.person, p.sources), 0) + p.faces
        return tuple(PersonFaces(person, sources, n) for (person, sources), n in out.items())


@dataclass(frozen=True)
class ShotFigures(_InJson):
    """The shots of the frames a tracking stage followed: the frames (render range indices) that
    start a new shot by a hard cut (`ffdesk.media.cuts`), the tracking restarted at each. A cut on
    a segment's first frame is not seen (the tracking restarts there anyway)."""

    cuts: tuple[int, ...] = ()

    @property
    def shots(self) -> int:
        return len(self.cuts) + 1

    def plus(self, other: ShotFigures) -> ShotFigures:
        return ShotFigures(tuple(sorted(set(self.cuts) | set(other.cuts))))


# ---- model figures -----------------------------------------------------------------------------


@dataclass(frozen=True)
class QualityFlag(_InJson):
    """A sampled frame whose reduced-precision face differs from the FP32 one."""

    frame: int
    psnr_db: float


@dataclass(frozen=True)
class QualityCheck(_InJson):
    """The reduced-precision guard of a model-pack render: frames re-rendered in FP32, those
    that differed by more than the threshold."""

    checked_frames: int = 0
    flags: tuple[QualityFlag, ...] = ()
    psnr_threshold_db: float = 0.0

    def plus(self, other: QualityCheck) -> QualityCheck:
        return QualityCheck(
            self.checked_frames + other.checked_frames, self.flags + other.flags, self.psnr_threshold_db
        )


@dataclass(frozen=True)
class Alignment(_InJson):
    """How a model-pack render aligned faces: the landmarker (None, and why, when none ran) and
    how many faces it aligned on its 68 points."""

    landmarker: str | None = None
    landmarker_note: str = ""
    faces_aligned_on_68_points: int = 0
    faces_aligned: int = 0

    def plus(self, other: Alignment) -> Alignment:
        return replace(
            self,
            faces_aligned_on_68_points=self.faces_aligned_on_68_points + other.faces_aligned_on_68_points,
            faces_aligned=self.faces_aligned + other.faces_aligned,
        )


@dataclass(frozen=True)
class ModelOrder(_InJson):
    """In which order a model-pack render ran its models, and why: "batch" (every model over each
    batch of frames in turn) or "segment" (each model over the faces of up to `window_frames`
    frames, held in host memory, before the next model loads)."""

    order: str
    reason: str
    window_frames: int
    held_bytes: int = 0
    """What the frames a render holds at once were counted at against the budget (on the CPU,
    in either order; 0 elsewhere)."""
    flow_frames: int | None = None
    """The most frames its flow held at once between decoder and encoder (None: not bounded)."""

    def plus(self, other: ModelOrder) -> ModelOrder:
        return self if other == self else replace(self, order="mixed", reason="parts ran in different orders")


@dataclass(frozen=True)
class PixelFigures(_InJson):
    """Where a model pack's pixels stayed between its model calls ("host", or "device" with the
    torch device), and every copy between host and device memory by kind: "frame" (each frame
    with a face, once), "regions" (the changed regions, once a batch and stage), "mask-boxes" and
    "quality" (a few numbers), "constant", "source" and "affines" (matrices and constants), and
    "model-io" (a model that cannot take device tensors, fed through host memory)."""

    path: str
    device: str
    transfers: tuple[TransferCount, ...] = ()
    device_bytes: int = 0
    """The most the pixels took in the GPU's memory at once (torch's allocator, read after
    each batch and after the warm-ups), counted against a memory budget beside the models; 0
    on the host path and on the CPU."""

    def plus(self, other: PixelFigures) -> PixelFigures:
        path = self.path if self.path == other.path else "mixed"
        transfers = tally((*self.transfers, *other.transfers))
        most = max(self.device_bytes, other.device_bytes)
        return replace(self, path=path, transfers=transfers, device_bytes=most)

    def copies(self, direction: str, kind: str) -> int:
        return copies_of(self.transfers, direction, kind)


def _merge_models(a: Sequence[ModelStats], b: Sequence[ModelStats]) -> tuple[ModelStats, ...]:
    merged: dict[str, ModelStats] = {}
    for m in (*a, *b):
        seen = merged.get(m.key)
        merged[m.key] = (
            m
            if seen is None
            else replace(
                seen,
                loads=seen.loads + m.loads,
                host_reloads=seen.host_reloads + m.host_reloads,
                evictions=seen.evictions + m.evictions,
                bytes=max(seen.bytes, m.bytes),
                load_ms=round(seen.load_ms + m.load_ms, 1),
                batch=max(seen.batch, m.batch),
                late_shapes=seen.late_shapes + m.late_shapes,
                frame_calls=_sum_known(seen.frame_calls, m.frame_calls),
            )
        )
    return tuple(merged.values())


def _sum_known(a: int | None, b: int | None) -> int | None:
    """a + b, either missing counted as nothing; None where neither is known."""
    return None if a is None and b is None else (a or 0) + (b or 0)


@dataclass(frozen=True)
class ModelsReport(_InJson):
    """What the model stages of a render ran, and how memory went.

    `swapper_kind` is set for a trained swapper only; `swap_scale`, `quality`, `alignment` and
    `order` for a model pack only (their JSON keys are left out otherwise)."""

    models: tuple[ModelStats, ...]
    peak_model_bytes: int
    memory_budget_bytes: int | None
    oom_events: tuple[OomEvent, ...]
    swapper: str
    swapper_precision: str
    swapper_kind: str | None = None
    swap_scale: int | None = None
    quality: QualityCheck | None = None
    alignment: Alignment | None = None
    order: ModelOrder | None = None
    """A model pack's model order (JSON: "model_order")."""
    pixels: PixelFigures | None = None
    """A model pack's pixel path and what crossed between host and device."""
    prepare_seconds: float | None = None
    """A model pack's time getting the models ready before the first frame (source embedding,
    precision variant, warm-up); the render's own frames/s leaves it out."""
    reserved_bytes: int = 0
    """What using the device cost by itself (the CUDA context), counted against the budget
    beside `peak_model_bytes` (0 on the CPU)."""
    precision_reason: str | None = None
    """Why `--precision auto` took `swapper_precision`, where it timed the variants on the device
    (JSON: "swapper_precision_reason")."""
    batch_notes: tuple[str, ...] | None = None
    """How each per-face model whose file fixes its batch at 1 took its faces on a GPU or the
    device path: its batch freed (a checked copy), or one face a call and why (JSON:
    "model_batch_notes"; None, left out: no such file, or a render that takes no batches there)."""

    @classmethod
    def of(
        cls,
        residency: ResidencyReport,
        *,
        swapper: str,
        swapper_precision: str,
        swapper_kind: str | None = None,
        swap_scale: int | None = None,
        quality: QualityCheck | None = None,
        alignment: Alignment | None = None,
        order: ModelOrder | None = None,
        pixels: PixelFigures | None = None,
        prepare_seconds: float | None = None,
        precision_reason: str | None = None,
        batch_notes: tuple[str, ...] | None = None,
    ) -> ModelsReport:
        """A residency manager's figures, with what the stage that ran the models adds."""
        return cls(
            models=residency.models,
            peak_model_bytes=residency.peak_model_bytes,
            reserved_bytes=residency.reserved_bytes,
            memory_budget_bytes=residency.memory_budget_bytes,
            oom_events=residency.oom_events,
            swapper=swapper,
            swapper_precision=swapper_precision,
            swapper_kind=swapper_kind,
            swap_scale=swap_scale,
            quality=quality,
            alignment=alignment,
            order=order,
            pixels=pixels,
            prepare_seconds=prepare_seconds,
            precision_reason=precision_reason,
            batch_notes=batch_notes,
        )

    @property
    def oom_recoveries(self) -> int:
        return len(self.oom_events)

    def model(self, name: str) -> tuple[ModelStats, ...]:
        """The figures of the model called `name` (one per precision it ran in)."""
        return tuple(m for m in self.models if m.name == name)

    def names(self) -> set[str]:
        return {m.name for m in self.models}

    def plus(self, other: ModelsReport) -> ModelsReport:
        """Two parts of one render as one: loads and times add up, the peak is the larger."""
        return replace(
            self,
            models=_merge_models(self.models, other.models),
            peak_model_bytes=max(self.peak_model_bytes, other.peak_model_bytes),
            reserved_bytes=max(self.reserved_bytes, other.reserved_bytes),
            oom_events=self.oom_events + other.oom_events,
            quality=_plus(self.quality, other.quality),
            alignment=_plus(self.alignment, other.alignment),
            order=_plus(self.order, other.order),
            pixels=_plus(self.pixels, other.pixels),
            prepare_seconds=_sum(self.prepare_seconds, other.prepare_seconds),
        )


def _sum(a: float | None, b: float | None) -> float | None:
    """`a + b` where both are there, else whichever is."""
    if a is None or b is None:
        return a if b is None else b
    return round(a + b, 3)


def _plus(a: Any, b: Any) -> Any:
    """`a.plus(b)` where both are there, else whichever is."""
    if a is None or b is None:
        return a if b is None else b
    return a.plus(b)


# ---- what a stage reports ----------------------------------------------------------------------


@dataclass(frozen=True)
class StageFigures:
    """What a stage's `finish()` gives the report: face counts, model figures, or both."""

    faces: FaceCounts | None = None
    models: ModelsReport | None = None
    shots: ShotFigures | None = None

    def plus(self, other: StageFigures | None) -> StageFigures:
        if other is None:
            return self
        return StageFigures(
            _plus(self.faces, other.faces), _plus(self.models, other.models), _plus(self.shots, other.shots)
        )


def merge_figures(figures: Iterable[StageFigures | None]) -> StageFigures:
    """The figures of a render's stages, in stage order, as one."""
    total = StageFigures()
    for f in figures:
        total = total.plus(f)
    return total


# ---- clip figures ------------------------------------------------------------------------------


@dataclass(frozen=True)
class VideoFigures(_InJson):
    """What only a clip render has: the encoder and decoder, the resume, the repairs and the audio."""

    encoder: str
    mode: str
    resumed_frames: int = 0
    timestamps_repaired: int = 0
    frames_concealed: int = 0
    audio_packets_skipped: int = 0
    audio: tuple[str, ...] = ()
    """What the join did with each audio stream ("copy aac", "encode aac", ...)."""
    decoder: str = ""
    """The video's decoder: "h264 (NVDEC)", or "h264 (software; NVDEC: <why not>)" ("" in
    reports from before it was recorded)."""
    timecode: str | None = None
    """The output's start timecode: the source's, moved on to the first frame rendered (None
    when the source has none)."""

    def plus(self, other: VideoFigures) -> VideoFigures:
        return VideoFigures(
            encoder=self.encoder or other.encoder,
            mode=self.mode,
            resumed_frames=self.resumed_frames + other.resumed_frames,
            timestamps_repaired=self.timestamps_repaired + other.timestamps_repaired,
            frames_concealed=self.frames_concealed + other.frames_concealed,
            audio_packets_skipped=self.audio_packets_skipped + other.audio_packets_skipped,
            audio=self.audio or other.audio,
            decoder=self.decoder or other.decoder,
            timecode=self.timecode or other.timecode,
        )


@dataclass(frozen=True)
class MatteFigures(_InJson):
    """Where a render wrote its matte (`RenderJob.matte`): "alpha", the output's alpha channel
    (`path` is the output); "clip", a grey clip beside it (`path`)."""

    kind: str
    path: Path


@dataclass(frozen=True)
class UpscaleFigures(_InJson):
    """What the frame enhancer did (`RenderJob.frame_enhancer`): its model, scale and blend, the
    size of the frames it wrote (the output's) and how many tiles a frame took."""

    model: str
    scale: int
    blend: int
    width: int
    height: int
    tiles_per_frame: int = 0
    late_shapes: int = 0
    """Its model's calls at an input shape its session had not run at, once the frames started
    (`ModelStats.late_shapes`): 0 on a GPU, where each tile batch is warmed up before."""


@dataclass(frozen=True)
class BudgetFigures(_InJson):
    """What an embedded-swap render counted against its CPU memory budget (`--memory-budget`; a
    model pack's render says it in `ModelsReport`)."""

    budget_bytes: int
    models_bytes: int
    """The embedded models, as measured while they were made and first ran (or as remembered)."""
    held_bytes: int
    """The frames the render holds at once (the flow's bound and the encoder's frame)."""
    flow_frames: int
    """The most frames between its decoder and its encoder."""


@dataclass(frozen=True)
class ProcessorFigures(_InJson):
    """What one of FaceFusion's processors besides the swap and a model pack's face enhancer did
    (the lip syncer, deep swapper, expression restorer, face editor, age modifier, the face
    enhancer where no model pack runs it, background remover, frame colorizer): its stage, its
    model, the faces it redrew (a face processor) or the frames it went through (a whole-frame
    one)."""

    name: str
    model: str
    faces: int = 0
    frames: int = 0
    late_shapes: int = 0
    """Its models' calls at an input shape their session had not run at, once the frames started
    (`ModelStats.late_shapes`): 0 on a GPU, where each batch shape is warmed up before."""

    def plus(self, other: ProcessorFigures) -> ProcessorFigures:
        return replace(
            self,
            faces=self.faces + other.faces,
            frames=self.frames + other.frames,
            late_shapes=self.late_shapes + other.late_shapes,
        )


@runtime_checkable
class ReportsWork(Protocol):
    """A processor stage that says what it did (`ProcessorFigures`)."""

    def work(self) -> ProcessorFigures: ...


def processor_figures(stages: Iterable[object]) -> tuple[ProcessorFigures, ...]:
    """The figures of the processor stages among `stages`, in stage order, with the late shapes
    of the models each ran (a stage's `models.late_shapes()`, where it has them)."""
    figures = []
    for stage in stages:
        if isinstance(stage, ReportsWork):
            figure = stage.work()
            late = getattr(getattr(stage, "models", None), "late_shapes", None)
            figures.append(replace(figure, late_shapes=int(late())) if callable(late) else figure)
    return tuple(figures)


# ---- farm --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FarmWorkerRow(_InJson):
    """One worker of a farm render: where it ran, what it reserved, what it rendered."""

    slot: str
    node: str
    pid: int
    num_cpus: float
    num_gpus: float
    budget_bytes: int | None
    segments: int
    frames: int
    seconds: float
    peak_model_bytes: int
    losses: int
    dropped: bool
    model_loads: int = 0
    """Models it loaded: a job's pack once while the worker keeps it, not once a segment."""
    metrics_url: str | None = None
    """Where it served its Prometheus metrics (None: not served)."""


@dataclass(frozen=True)
class FarmSummary(_InJson):
    """How a farm render used the farm: its workers, segments, reruns and losses."""

    address: str
    workers: tuple[FarmWorkerRow, ...]
    segments: int
    segments_rerun: int
    worker_losses: int
    duplicates: int
    render_seconds: float
    """From the first segment handed out to the last one back."""


# ---- the report --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RenderReport(_InJson):
    """Everything a render reports. `video` is None for an image; `faces` and `models` come from
    the stages that report them; `peak_rss_bytes` is this process's peak (None for a farm render,
    whose frames are rendered elsewhere); `telemetry` is added by a front end that sampled the
    render; `farm` by a farm render."""

    frames_in: int
    frames_out: int
    frames_processed: int
    """Frames rendered by this run (a resumed render's earlier frames are not)."""
    stages: tuple[StageTiming, ...]
    output: Path
    resumed_segments: int = 0
    video: VideoFigures | None = None
    faces: FaceCounts | None = None
    models: ModelsReport | None = None
    seconds: float = 0.0
    fps: float = 0.0
    peak_rss_bytes: int | None = None
    telemetry: TelemetrySummary | None = None
    farm: FarmSummary | None = None
    matte: MatteFigures | None = None
    """Where the matte went, for a render asked for one."""
    shots: ShotFigures | None = None
    """The shots the tracking found (None: the render tracked no faces)."""
    upscale: UpscaleFigures | None = None
    """The frame enhancer's figures, the output's size among them (None: no frame enhancer)."""
    processors: tuple[ProcessorFigures, ...] = ()
    """What the other processors did, in the order they ran (empty: none ran)."""
    budget: BudgetFigures | None = None
    """What an embedded-swap render counted against its CPU budget (None: no such budget)."""

    def timing(self, name: str) -> StageTiming:
        """The timing of the stage called `name`; `KeyError` when the render had none."""
        for t in self.stages:
            if t.name == name:
                return t
        raise KeyError(f"no stage {name!r} in the report (stages: {', '.join(self.stage_names)})")

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.stages)

    def stage_ms(self) -> dict[str, float]:
        """Wall milliseconds per stage, in stage order."""
        return {t.name: t.ms_total for t in self.stages}

    def with_figures(self, figures: StageFigures) -> RenderReport:
        """This report with the stages' face counts and model figures."""
        return replace(self, faces=figures.faces, models=figures.models, shots=figures.shots)

    def timed(self, seconds: float, peak_rss_bytes: int | None) -> RenderReport:
        """This report with its wall time, the frames/s it gives and the peak memory."""
        seconds = round(seconds, 3)
        fps = round(self.frames_processed / seconds, 3) if seconds else 0.0
        return replace(self, seconds=seconds, fps=fps, peak_rss_bytes=peak_rss_bytes)

    def plus(self, other: RenderReport) -> RenderReport:
        """Two parts of one render (a farm's segments) as one: frames, stage times, face counts,
        model loads and seconds add up; peaks take the larger; the encoder, mode, output and
        swapper are the first part's (or the second's where the first has none). The whole
        render's own figures (output, resume, wall time, farm) are the caller's to set after."""
        seconds = round(self.seconds + other.seconds, 3)
        processed = self.frames_processed + other.frames_processed
        peaks = [p for p in (self.peak_rss_bytes, other.peak_rss_bytes) if p is not None]
        return RenderReport(
            frames_in=self.frames_in + other.frames_in,
            frames_out=self.frames_out + other.frames_out,
            frames_processed=processed,
            stages=merge_by_name(self.stages, other.stages),
            output=self.output,
            resumed_segments=self.resumed_segments + other.resumed_segments,
            video=_plus(self.video, other.video),
            faces=_plus(self.faces, other.faces),
            models=_plus(self.models, other.models),
            seconds=seconds,
            fps=round(processed / seconds, 3) if seconds else 0.0,
            peak_rss_bytes=max(peaks) if peaks else None,
            telemetry=self.telemetry or other.telemetry,
            farm=self.farm or other.farm,
            matte=self.matte or other.matte,
            shots=_plus(self.shots, other.shots),
            upscale=self.upscale or other.upscale,
            processors=merge_by_name(self.processors, other.processors),
            budget=self.budget or other.budget,
        )

    @classmethod
    def merge(cls, parts: Iterable[RenderReport]) -> RenderReport:
        """`plus` over the parts, in order; `ValueError` for none."""
        items = list(parts)
        if not items:
            raise ValueError("no reports to merge")
        total = items[0]
        for part in items[1:]:
            total = total.plus(part)
        return total


# ---- JSON ---------------------------------------------------------------------------------------


def _faces_skipped(counts: FaceCounts) -> int:
    return counts.faces_skipped


def _oom_recoveries(models: ModelsReport) -> int:
    return models.oom_recoveries


def _shots(figures: ShotFigures) -> int:
    return figures.shots


SHAPES: dict[type, Shape] = {
    RenderReport: Shape(
        flat={"video": "encoder", "faces": "faces_swapped", "models": "models", "shots": "shots"},
        keyed={"stages": "name", "processors": "name"},
        omit_none=("peak_rss_bytes", "telemetry", "farm", "matte", "upscale", "processors", "budget"),
    ),
    ModelsReport: Shape(
        keys={
            "order": "model_order",
            "precision_reason": "swapper_precision_reason",
            "batch_notes": "model_batch_notes",
        },
        flat={"quality": "quality_checked_frames", "alignment": "faces_aligned"},
        omit_none=(
            "swapper_kind",
            "swap_scale",
            "order",
            "pixels",
            "prepare_seconds",
            "precision_reason",
            "batch_notes",
        ),  # fmt: skip
        computed={"oom_recoveries": _oom_recoveries},
    ),
    FaceCounts: Shape(
        pairs=("faces_skipped_by_reason",), computed={"faces_skipped": _faces_skipped}, omit_none=("people",)
    ),
    ShotFigures: Shape(keys={"cuts": "shot_cuts"}, computed={"shots": _shots}),
    QualityCheck: Shape(
        keys={
            "checked_frames": "quality_checked_frames",
            "flags": "quality_flags",
            "psnr_threshold_db": "quality_psnr_threshold_db",
        }
    ),
    TransferCount: Shape(keys={"nbytes": "bytes"}),
    TelemetrySummary: Shape(pairs=("stage_ms", "model_bytes")),
}
"""Where the report's JSON (the `--report` file's format, older than the codec) does not map its
fields one to one: a clip's video figures, the face counts and the model figures sit in the
report's own object; stages are keyed by name; some keys are renamed or computed."""

REPORTS = Codec("render report", ReportError, SHAPES, finite=False)
"""The report's JSON: the codec of jobs with the report's shapes; keys it does not know are
passed over (a newer version's), and any float is written as it is."""
