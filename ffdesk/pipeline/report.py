"""The render report: typed figures the engine builds; JSON only at the edges.

`RenderReport` is what `run_render`, `render_segment` and a farm render return and what the
`Done` event carries. Its parts:

- `StageTiming`: calls, frames and wall/CPU milliseconds of one stage (decode and encode too);
- `VideoFigures`: what only a clip render has (encoder, resume, repairs, audio);
- `FaceCounts`: frames with faces, faces swapped and skipped (by reason), from a swap stage;
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
from typing import Any

from ffdesk.runtime.device import Direction, TransferCount
from ffdesk.runtime.residency import ModelStats, OomEvent, ResidencyReport
from ffdesk.runtime.residency_policy import OomAction
from ffdesk.telemetry.render import TelemetrySummary

JsonDict = dict[str, Any]


class ReportError(ValueError):
    """A report's JSON lacks a figure or has one of the wrong type (one line)."""


# ---- reading JSON ------------------------------------------------------------------------------


def _get(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise ReportError(f"{where}: '{key}' is missing")
    value = data[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise ReportError(f"{where}: '{key}' is {value!r}, not {_kind_name(kind)}")
    if not isinstance(value, kind):
        raise ReportError(f"{where}: '{key}' is {type(value).__name__}, not {_kind_name(kind)}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join("null" if k is type(None) else k.__name__ for k in kinds)


def _int(data: Mapping[str, Any], key: str, where: str) -> int:
    return int(_get(data, key, int, where))


def _int_or_zero(data: Mapping[str, Any], key: str, where: str) -> int:
    """A count that older reports left out."""
    return _int(data, key, where) if key in data else 0


def _opt_int(data: Mapping[str, Any], key: str, where: str) -> int | None:
    value = _get(data, key, (int, type(None)), where)
    return None if value is None else int(value)


def _float(data: Mapping[str, Any], key: str, where: str) -> float:
    return float(_get(data, key, (int, float), where))


def _str(data: Mapping[str, Any], key: str, where: str) -> str:
    return str(_get(data, key, str, where))


def _opt_str(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = _get(data, key, (str, type(None)), where)
    return None if value is None else str(value)


def _list(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    return list(_get(data, key, list, where))


def _dict(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value: Mapping[str, Any] = _get(data, key, dict, where)
    return value


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ReportError(f"{where}: expected an object, got {type(value).__name__}")
    return value


# ---- stage timings -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StageTiming:
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

    def to_json_dict(self) -> JsonDict:
        return {
            "calls": self.calls,
            "frames": self.frames,
            "ms_total": self.ms_total,
            "cpu_ms_total": self.cpu_ms_total,
        }

    @classmethod
    def from_json_dict(cls, name: str, data: Mapping[str, Any]) -> StageTiming:
        where = f"stage {name}"
        data = _object(data, where)
        return cls(
            name,
            _int(data, "calls", where),
            _int(data, "frames", where),
            _float(data, "ms_total", where),
            _float(data, "cpu_ms_total", where) if "cpu_ms_total" in data else 0.0,
        )


def merge_timings(*parts: Sequence[StageTiming]) -> tuple[StageTiming, ...]:
    """The stages of several parts of a render, each name once (first seen first), added up."""
    merged: dict[str, StageTiming] = {}
    for part in parts:
        for timing in part:
            seen = merged.get(timing.name)
            merged[timing.name] = timing if seen is None else seen.plus(timing)
    return tuple(merged.values())


# ---- face counts -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FaceCounts:
    """What a swap stage did to faces: frames that had any, faces swapped, faces skipped (and
    why: reason -> count, in the order the reasons first came up)."""

    frames_with_faces: int = 0
    faces_swapped: int = 0
    faces_skipped_by_reason: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, frames_with_faces: int, faces_swapped: int, skipped: Mapping[str, int]) -> FaceCounts:
        return cls(frames_with_faces, faces_swapped, tuple((str(r), int(n)) for r, n in skipped.items()))

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
        )

    def to_json_dict(self) -> JsonDict:
        return {
            "frames_with_faces": self.frames_with_faces,
            "faces_swapped": self.faces_swapped,
            "faces_skipped": self.faces_skipped,
            "faces_skipped_by_reason": dict(self.faces_skipped_by_reason),
        }

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> FaceCounts:
        where = "face counts"
        reasons = _dict(data, "faces_skipped_by_reason", where)
        for reason, n in reasons.items():
            if not isinstance(n, int) or isinstance(n, bool):
                raise ReportError(f"{where}: faces skipped for {reason!r} is {n!r}, not a count")
        return cls.of(_int(data, "frames_with_faces", where), _int(data, "faces_swapped", where), reasons)


# ---- model figures -----------------------------------------------------------------------------


@dataclass(frozen=True)
class QualityFlag:
    """A sampled frame whose reduced-precision face differs from the FP32 one."""

    frame: int
    psnr_db: float

    def to_json_dict(self) -> JsonDict:
        return {"frame": self.frame, "psnr_db": self.psnr_db}

    @classmethod
    def from_json_dict(cls, data: Any) -> QualityFlag:
        where = "quality flag"
        data = _object(data, where)
        return cls(_int(data, "frame", where), _float(data, "psnr_db", where))


@dataclass(frozen=True)
class QualityCheck:
    """The reduced-precision guard of a model-pack render: frames re-rendered in FP32, those
    that differed by more than the threshold."""

    checked_frames: int = 0
    flags: tuple[QualityFlag, ...] = ()
    psnr_threshold_db: float = 0.0

    def plus(self, other: QualityCheck) -> QualityCheck:
        return QualityCheck(
            self.checked_frames + other.checked_frames, self.flags + other.flags, self.psnr_threshold_db
        )

    def to_json_dict(self) -> JsonDict:
        return {
            "quality_checked_frames": self.checked_frames,
            "quality_flags": [f.to_json_dict() for f in self.flags],
            "quality_psnr_threshold_db": self.psnr_threshold_db,
        }

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> QualityCheck:
        where = "quality check"
        return cls(
            _int(data, "quality_checked_frames", where),
            tuple(QualityFlag.from_json_dict(f) for f in _list(data, "quality_flags", where)),
            _float(data, "quality_psnr_threshold_db", where),
        )


@dataclass(frozen=True)
class Alignment:
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

    def to_json_dict(self) -> JsonDict:
        return {
            "landmarker": self.landmarker,
            "landmarker_note": self.landmarker_note,
            "faces_aligned_on_68_points": self.faces_aligned_on_68_points,
            "faces_aligned": self.faces_aligned,
        }

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> Alignment:
        where = "alignment"
        return cls(
            _opt_str(data, "landmarker", where),
            _str(data, "landmarker_note", where),
            _int(data, "faces_aligned_on_68_points", where),
            _int(data, "faces_aligned", where),
        )


@dataclass(frozen=True)
class ModelOrder:
    """In which order a model-pack render ran its models, and why: "batch" (every model over each
    batch of frames in turn) or "segment" (each model over the faces of up to `window_frames`
    frames, held in host memory, before the next model loads)."""

    order: str
    reason: str
    window_frames: int

    def plus(self, other: ModelOrder) -> ModelOrder:
        return self if other == self else replace(self, order="mixed", reason="parts ran in different orders")

    def to_json_dict(self) -> JsonDict:
        return {"order": self.order, "reason": self.reason, "window_frames": self.window_frames}

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> ModelOrder:
        where = "model order"
        order, reason = _str(data, "order", where), _str(data, "reason", where)
        return cls(order, reason, _int(data, "window_frames", where))


@dataclass(frozen=True)
class PixelFigures:
    """Where a model pack's pixels stayed between its model calls ("host", or "device" with the
    torch device), and every copy between host and device memory by kind: "frame" (each frame
    with a face, once), "regions" (the changed regions, once a batch and stage), "mask-boxes" and
    "quality" (a few numbers), "constant", "source" and "affines" (matrices and constants), and
    "model-io" (a model that cannot take device tensors, fed through host memory)."""

    path: str
    device: str
    transfers: tuple[TransferCount, ...] = ()

    def plus(self, other: PixelFigures) -> PixelFigures:
        totals: dict[tuple[Direction, str], tuple[int, int]] = {}
        for t in (*self.transfers, *other.transfers):
            copies, nbytes = totals.get((t.direction, t.kind), (0, 0))
            totals[(t.direction, t.kind)] = (copies + t.copies, nbytes + t.nbytes)
        merged = tuple(TransferCount(d, k, c, n) for (d, k), (c, n) in sorted(totals.items()))
        path = self.path if self.path == other.path else "mixed"
        return replace(self, path=path, transfers=merged)

    def copies(self, direction: str, kind: str) -> int:
        return sum(t.copies for t in self.transfers if t.direction == direction and t.kind == kind)

    def to_json_dict(self) -> JsonDict:
        return {
            "path": self.path,
            "device": self.device,
            "transfers": [
                {"direction": t.direction, "kind": t.kind, "copies": t.copies, "bytes": t.nbytes}
                for t in self.transfers
            ],
        }

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> PixelFigures:
        where = "pixel figures"
        transfers = []
        for item in _list(data, "transfers", where):
            t = _object(item, where)
            way = _str(t, "direction", where)
            if way not in ("up", "down"):
                raise ReportError(f"{where}: direction must be up or down, not {way!r}")
            direction: Direction = "up" if way == "up" else "down"
            kind, copies, nbytes = _str(t, "kind", where), _int(t, "copies", where), _int(t, "bytes", where)
            transfers.append(TransferCount(direction, kind, copies, nbytes))
        return cls(_str(data, "path", where), _str(data, "device", where), tuple(transfers))


def _model_stats_json(m: ModelStats) -> JsonDict:
    return {
        "key": m.key,
        "name": m.name,
        "precision": m.precision,
        "provider": m.provider,
        "loads": m.loads,
        "host_reloads": m.host_reloads,
        "evictions": m.evictions,
        "bytes": m.bytes,
        "load_ms": m.load_ms,
        "batch": m.batch,
    }


def _model_stats(data: Any) -> ModelStats:
    where = "model"
    data = _object(data, where)
    return ModelStats(
        key=_str(data, "key", where),
        name=_str(data, "name", where),
        precision=_str(data, "precision", where),
        provider=_str(data, "provider", where),
        loads=_int(data, "loads", where),
        host_reloads=_int(data, "host_reloads", where),
        evictions=_int(data, "evictions", where),
        bytes=_int(data, "bytes", where),
        load_ms=_float(data, "load_ms", where),
        batch=_int(data, "batch", where) if "batch" in data else 0,
    )


def _oom_event_json(o: OomEvent) -> JsonDict:
    return {
        "key": o.key,
        "batch_before": o.batch_before,
        "batch_after": o.batch_after,
        "actions": [a.value for a in o.actions],
        "error": o.error,
        "evicted": list(o.evicted),
        "precision_before": o.precision_before,
        "precision_after": o.precision_after,
    }


def _oom_event(data: Any) -> OomEvent:
    where = "out-of-memory event"
    data = _object(data, where)
    actions = []
    for a in _list(data, "actions", where):
        try:
            actions.append(OomAction(a))
        except ValueError:
            raise ReportError(f"{where}: unknown action {a!r}") from None
    return OomEvent(
        key=_str(data, "key", where),
        batch_before=_int(data, "batch_before", where),
        batch_after=_int(data, "batch_after", where),
        actions=tuple(actions),
        error=_str(data, "error", where),
        evicted=tuple(str(e) for e in _list(data, "evicted", where)),
        precision_before=_opt_str(data, "precision_before", where),
        precision_after=_opt_str(data, "precision_after", where),
    )


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
            )
        )
    return tuple(merged.values())


@dataclass(frozen=True)
class ModelsReport:
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

    def to_json_dict(self) -> JsonDict:
        out: JsonDict = {
            "models": [_model_stats_json(m) for m in self.models],
            "peak_model_bytes": self.peak_model_bytes,
            "reserved_bytes": self.reserved_bytes,
            "memory_budget_bytes": self.memory_budget_bytes,
            "oom_recoveries": self.oom_recoveries,
            "oom_events": [_oom_event_json(o) for o in self.oom_events],
            "swapper": self.swapper,
        }
        if self.swapper_kind is not None:
            out["swapper_kind"] = self.swapper_kind
        out["swapper_precision"] = self.swapper_precision
        if self.precision_reason is not None:
            out["swapper_precision_reason"] = self.precision_reason
        if self.swap_scale is not None:
            out["swap_scale"] = self.swap_scale
        if self.quality is not None:
            out.update(self.quality.to_json_dict())
        if self.alignment is not None:
            out.update(self.alignment.to_json_dict())
        if self.order is not None:
            out["model_order"] = self.order.to_json_dict()
        if self.pixels is not None:
            out["pixels"] = self.pixels.to_json_dict()
        if self.prepare_seconds is not None:
            out["prepare_seconds"] = self.prepare_seconds
        return out

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> ModelsReport:
        where = "model figures"
        return cls(
            models=tuple(_model_stats(m) for m in _list(data, "models", where)),
            peak_model_bytes=_int(data, "peak_model_bytes", where),
            reserved_bytes=_int(data, "reserved_bytes", where) if "reserved_bytes" in data else 0,
            memory_budget_bytes=_opt_int(data, "memory_budget_bytes", where),
            oom_events=tuple(_oom_event(o) for o in _list(data, "oom_events", where)),
            swapper=_str(data, "swapper", where),
            swapper_precision=_str(data, "swapper_precision", where),
            swapper_kind=_str(data, "swapper_kind", where) if "swapper_kind" in data else None,
            swap_scale=_int(data, "swap_scale", where) if "swap_scale" in data else None,
            quality=QualityCheck.from_json_dict(data) if "quality_checked_frames" in data else None,
            alignment=Alignment.from_json_dict(data) if "faces_aligned" in data else None,
            order=_model_order(data, where),
            pixels=PixelFigures.from_json_dict(_dict(data, "pixels", where)) if "pixels" in data else None,
            prepare_seconds=_float(data, "prepare_seconds", where) if "prepare_seconds" in data else None,
            precision_reason=_opt_str(data, "swapper_precision_reason", where)
            if "swapper_precision_reason" in data
            else None,
        )


def _model_order(data: Mapping[str, Any], where: str) -> ModelOrder | None:
    return ModelOrder.from_json_dict(_dict(data, "model_order", where)) if "model_order" in data else None


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

    def plus(self, other: StageFigures | None) -> StageFigures:
        if other is None:
            return self
        return StageFigures(_plus(self.faces, other.faces), _plus(self.models, other.models))


def merge_figures(figures: Iterable[StageFigures | None]) -> StageFigures:
    """The figures of a render's stages, in stage order, as one."""
    total = StageFigures()
    for f in figures:
        total = total.plus(f)
    return total


# ---- clip figures ------------------------------------------------------------------------------


@dataclass(frozen=True)
class VideoFigures:
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
        )

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> VideoFigures:
        where = "render report"
        return cls(
            encoder=_str(data, "encoder", where),
            mode=_str(data, "mode", where),
            resumed_frames=_int(data, "resumed_frames", where),
            # a farm render's report had neither before its segments' reports were added up
            timestamps_repaired=_int_or_zero(data, "timestamps_repaired", where),
            frames_concealed=_int_or_zero(data, "frames_concealed", where),
            audio_packets_skipped=_int(data, "audio_packets_skipped", where),
            audio=tuple(str(a) for a in _list(data, "audio", where)),
            decoder=_str(data, "decoder", where) if "decoder" in data else "",  # older reports had none
        )


# ---- farm --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FarmWorkerRow:
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

    def to_json_dict(self) -> JsonDict:
        return {
            "slot": self.slot,
            "node": self.node,
            "pid": self.pid,
            "num_cpus": self.num_cpus,
            "num_gpus": self.num_gpus,
            "budget_bytes": self.budget_bytes,
            "segments": self.segments,
            "frames": self.frames,
            "seconds": self.seconds,
            "peak_model_bytes": self.peak_model_bytes,
            "losses": self.losses,
            "dropped": self.dropped,
            "model_loads": self.model_loads,
            "metrics_url": self.metrics_url,
        }

    @classmethod
    def from_json_dict(cls, data: Any) -> FarmWorkerRow:
        where = "farm worker"
        data = _object(data, where)
        return cls(
            slot=_str(data, "slot", where),
            node=_str(data, "node", where),
            pid=_int(data, "pid", where),
            num_cpus=_float(data, "num_cpus", where),
            num_gpus=_float(data, "num_gpus", where),
            budget_bytes=_opt_int(data, "budget_bytes", where),
            segments=_int(data, "segments", where),
            frames=_int(data, "frames", where),
            seconds=_float(data, "seconds", where),
            peak_model_bytes=_int(data, "peak_model_bytes", where),
            losses=_int(data, "losses", where),
            dropped=bool(_get(data, "dropped", bool, where)),
            model_loads=_int(data, "model_loads", where) if "model_loads" in data else 0,
            metrics_url=_opt_str(data, "metrics_url", where) if "metrics_url" in data else None,
        )


@dataclass(frozen=True)
class FarmSummary:
    """How a farm render used the farm: its workers, segments, reruns and losses."""

    address: str
    workers: tuple[FarmWorkerRow, ...]
    segments: int
    segments_rerun: int
    worker_losses: int
    duplicates: int
    render_seconds: float
    """From the first segment handed out to the last one back."""

    def to_json_dict(self) -> JsonDict:
        return {
            "address": self.address,
            "workers": [w.to_json_dict() for w in self.workers],
            "segments": self.segments,
            "segments_rerun": self.segments_rerun,
            "worker_losses": self.worker_losses,
            "duplicates": self.duplicates,
            "render_seconds": self.render_seconds,
        }

    @classmethod
    def from_json_dict(cls, data: Any) -> FarmSummary:
        where = "farm"
        data = _object(data, where)
        return cls(
            address=_str(data, "address", where),
            workers=tuple(FarmWorkerRow.from_json_dict(w) for w in _list(data, "workers", where)),
            segments=_int(data, "segments", where),
            segments_rerun=_int(data, "segments_rerun", where),
            worker_losses=_int(data, "worker_losses", where),
            duplicates=_int(data, "duplicates", where),
            render_seconds=_float(data, "render_seconds", where),
        )


# ---- the report --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RenderReport:
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
        return replace(self, faces=figures.faces, models=figures.models)

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
            stages=merge_timings(self.stages, other.stages),
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

    def to_json_dict(self) -> JsonDict:
        """The report as the JSON `--report` writes (the keys scripts read)."""
        out: JsonDict = {
            "frames_in": self.frames_in,
            "frames_out": self.frames_out,
            "frames_processed": self.frames_processed,
            "stages": {t.name: t.to_json_dict() for t in self.stages},
            "output": str(self.output),
        }
        v = self.video
        if v is not None:
            out["encoder"] = v.encoder
        out["resumed_segments"] = self.resumed_segments
        if v is not None:
            out.update(
                resumed_frames=v.resumed_frames,
                mode=v.mode,
                timestamps_repaired=v.timestamps_repaired,
                frames_concealed=v.frames_concealed,
                audio_packets_skipped=v.audio_packets_skipped,
                audio=list(v.audio),
                decoder=v.decoder,
            )
        if self.faces is not None:
            out.update(self.faces.to_json_dict())
        if self.models is not None:
            out.update(self.models.to_json_dict())
        out["seconds"] = self.seconds
        out["fps"] = self.fps
        if self.peak_rss_bytes is not None:
            out["peak_rss_bytes"] = self.peak_rss_bytes
        if self.telemetry is not None:
            out["telemetry"] = self.telemetry.to_json_dict()
        if self.farm is not None:
            out["farm"] = self.farm.to_json_dict()
        return out

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> RenderReport:
        """A report from its JSON (`to_json_dict`'s); `ReportError` naming what is missing or wrong."""
        where = "render report"
        data = _object(data, where)
        stages = _dict(data, "stages", where)
        telemetry = None
        if "telemetry" in data:
            try:
                telemetry = TelemetrySummary.from_json_dict(_dict(data, "telemetry", where))
            except ValueError as exc:
                raise ReportError(str(exc)) from None
        return cls(
            frames_in=_int(data, "frames_in", where),
            frames_out=_int(data, "frames_out", where),
            frames_processed=_int(data, "frames_processed", where),
            stages=tuple(StageTiming.from_json_dict(str(n), t) for n, t in stages.items()),
            output=Path(_str(data, "output", where)),
            resumed_segments=_int(data, "resumed_segments", where),
            video=VideoFigures.from_json_dict(data) if "encoder" in data else None,
            faces=FaceCounts.from_json_dict(data) if "faces_swapped" in data else None,
            models=ModelsReport.from_json_dict(data) if "models" in data else None,
            seconds=_float(data, "seconds", where),
            fps=_float(data, "fps", where),
            peak_rss_bytes=_int(data, "peak_rss_bytes", where) if "peak_rss_bytes" in data else None,
            telemetry=telemetry,
            farm=FarmSummary.from_json_dict(data["farm"]) if "farm" in data else None,
        )
