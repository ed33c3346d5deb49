"""Qt-side state objects with signals. Views subscribe to them; they never know their views."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from PySide6.QtCore import QObject, Signal

from ffdesk.faces.scan import ScanPoint
from ffdesk.faces.types import Face
from ffdesk.gui.processors import (
    DEFAULTS,
    ProcessorFacts,
    ProcessorState,
    installed_processors,
    processor_job_fields,
    processor_states,
)
from ffdesk.media.frame_clock import FrameClock
from ffdesk.pipeline import mask_use
from ffdesk.pipeline.job import ColorizerSize, FaceMapping, MatteKind, RenderJob
from ffdesk.pipeline.job_json import field_types
from ffdesk.pipeline.preview import PreviewResult
from ffdesk.pipeline.queue import fits
from ffdesk.types import EncoderName, FaceSelection, Frame, Mode, Precision, VideoPreset

if TYPE_CHECKING:
    from ffdesk.faces.people import People
    from ffdesk.media.probe import VideoInfo

MarkerKind = Literal["noface", "flagged"]
Level = Literal["info", "warning", "error"]
_QT_INT_MAX = 2**31 - 1
"""The largest int a Qt control (a spin box) holds."""
_SIGNED = frozenset({"age_modifier_direction"})
"""The int settings that may be below 0."""


@dataclass(frozen=True)
class ClipInfo:
    """What the window needs to know about the target clip (or image)."""

    path: Path
    width: int
    height: int
    fps: float
    frame_count: int
    duration_s: float
    is_image: bool = False
    has_audio: bool = False
    """Whether the clip has an audio track (the lip syncer's voice when no file is given)."""
    start_timecode: str | None = None
    """The first frame's SMPTE timecode (a camera's or an edit's); the window counts from it."""
    clock: FrameClock | None = None
    """Where each frame starts (None: every 1 / fps), as the preview and a render count them."""
    vfr: bool = False
    """A variable frame rate: `clock` comes from reading every packet, in the background
    (`ffdesk.media.frame_clock.ClockRead`); until it is there, frames count at the average rate."""
    video: VideoInfo | None = field(default=None, compare=False, repr=False)
    """The probed picture stream (what the clock read needs)."""
    chapters: tuple[tuple[float, str], ...] = ()
    """The clip's chapters: (start in seconds from the first frame, title), in order."""

    @classmethod
    def probe(cls, path: Path) -> ClipInfo:
        """Probe `path`, its header only (MediaError for a file that is not a clip or image): a
        variable rate's clock is read apart (`clock_known` is False until `SessionModel.set_clock`)."""
        from ffdesk.media.probe import probe

        info = probe(path)
        v = info.video
        if v is None:
            from ffdesk.errors import MediaError

            raise MediaError(f"{path}: no video stream")
        return cls(
            path=path,
            width=v.display_width,
            height=v.display_height,
            fps=v.fps if v.fps > 0 else 25.0,
            frame_count=max(1, v.frame_count if not info.is_image else 1),
            duration_s=info.duration_s,
            is_image=info.is_image,
            has_audio=bool(info.audio),
            start_timecode=v.timecode,
            vfr=v.vfr and not info.is_image,
            video=v,
            chapters=tuple((max(0.0, c.start_s - v.start_time_s), c.title) for c in info.chapters),
        )

    def chapter_frames(self) -> tuple[tuple[int, str], ...]:
        """Each chapter's first frame and its title (a chapter starting between frames: the
        first frame shown at its start), as the frames count now."""
        last = max(0, self.frame_count - 1)
        return tuple((self.frame_clock.index_at(t, last), title) for t, title in self.chapters)

    def chapter_at(self, index: int) -> tuple[int, str] | None:
        """The chapter frame `index` is in (its number from 1, its title); None before the first."""
        found = None
        for number, (first, title) in enumerate(self.chapter_frames(), start=1):
            if first <= index:
                found = (number, title)
        return found

    @property
    def frame_clock(self) -> FrameClock:
        """How frames count now: the clock, or the average rate (a variable rate's until read)."""
        return self.clock or FrameClock(self.fps)

    @property
    def clock_known(self) -> bool:
        """Whether frame N is where a render puts it (False while a variable rate's clock is read)."""
        return not self.vfr or self.clock is not None

    def time_of(self, index: int) -> float:
        """When frame `index` starts, in seconds from the first frame."""
        return self.frame_clock.time_of(index)

    def timecode(self, index: int) -> str:
        """HH:MM:SS:FF: the clip's own timecode at frame `index` where it has one (drop-frame
        written HH:MM:SS;FF), else counted from 00:00:00:00."""
        if self.start_timecode is not None:
            from ffdesk.media.timecode import moved_on

            shown = moved_on(self.start_timecode, self.fps, max(0, index))
            if shown is not None:
                return shown
        fps_int = max(1, round(self.fps))
        secs, ff = divmod(index, fps_int)
        mm, ss = divmod(secs, 60)
        hh, mm = divmod(mm, 60)
        return f"{hh:02d}:{mm:02d}:{ss:02d}:{ff:02d}"


@dataclass(frozen=True)
class Settings:
    """The controls' values; turned into a `RenderJob` by `SessionModel.build_job`."""

    mode: Mode = "preview"
    precision: Precision = "auto"
    batch: int = 4
    memory_budget_mb: int = 0
    """0 = no budget (the runtime's default). Read as bytes through `memory_budget_bytes` only."""
    swapper: str = ""
    recognizer: str = ""
    detector: str = ""
    enhancer: str = ""
    parser: str = ""
    """The face parser of the region mask ("": no region mask)."""
    enhancer_weight: float = 0.5
    """CodeFormer's fidelity weight (FaceFusion's default 0.5)."""
    enhancer_blend: int = 80
    """How much of the enhanced face is pasted, percent (FaceFusion's default 80)."""
    mask_regions: str = ""
    """Comma-separated face-parser regions for the region mask; "" = every region."""
    mask_types: str = "box"
    """Comma-separated masks besides the region mask (`parser`): box, occlusion, area; none
    chosen: the box, FaceFusion's default."""
    mask_blur: float = 0.3
    """Blur of the box mask, 0-1."""
    mask_padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    """Box mask padding in percent: top, right, bottom, left."""
    mask_areas: str = ""
    """Comma-separated landmark areas of the area mask; "" = every area."""
    face_selection: FaceSelection = "largest"
    encoder: EncoderName = "h264"
    quality: int = 65
    """0-100; 65 is CRF 18, the command line's final-render default."""
    video_preset: Literal["auto"] | VideoPreset = "auto"
    """The encoder's speed preset; "auto": the mode's (medium in final, veryfast in preview)."""
    matte: MatteKind = "none"
    """Where renders write the swapped faces' matte (the command line's --matte)."""
    output_dir: str = ""
    # FaceFusion's other processors (`ffdesk.gui.processors`): each one's on/off, its model (kept
    # while it is off; FaceFusion's default until another is picked) and its options.
    lip_syncer_on: bool = False
    lip_syncer: str = DEFAULTS["lip_syncer"]
    lip_sync_audio: str = ""
    """The voice the mouths follow (an audio file or a clip); "": the clip's own audio."""
    lip_sync_weight: float = 0.5
    voice_extractor: str = "auto"
    """The lip syncer's voice extractor: auto, none or a model's name."""
    frame_enhancer_on: bool = False
    frame_enhancer: str = DEFAULTS["frame_enhancer"]
    frame_enhancer_blend: int = 80
    expression_restorer_on: bool = False
    expression_restorer: str = DEFAULTS["expression_restorer"]
    expression_restorer_factor: int = 80
    expression_restorer_areas: str = ""
    """Comma-separated areas whose expression comes back; "": both."""
    face_editor_on: bool = False
    face_editor: str = DEFAULTS["face_editor"]
    face_edits: str = ""
    """The face editor's sliders that are not 0, as "name=value,..." (each -1..1)."""
    deep_swapper_on: bool = False
    deep_swapper: str = DEFAULTS["deep_swapper"]
    deep_swapper_morph: int = 100
    age_modifier_on: bool = False
    age_modifier: str = DEFAULTS["age_modifier"]
    age_modifier_direction: int = 0
    """Younger (-100) to older (100)."""
    background_remover_on: bool = False
    background_remover: str = DEFAULTS["background_remover"]
    background_fill: tuple[int, int, int, int] = (0, 0, 0, 0)
    """RGBA where the background was, 0-255 each."""
    background_despill: tuple[int, int, int, int] = (0, 0, 0, 0)
    """RGBA of a screen's spill taken out of the edges; A 0: none."""
    frame_colorizer_on: bool = False
    frame_colorizer: str = DEFAULTS["frame_colorizer"]
    frame_colorizer_size: ColorizerSize = "256x256"
    frame_colorizer_blend: int = 100

    @property
    def memory_budget_bytes(self) -> int | None:
        """The budget in bytes (None: no budget): the one conversion of `memory_budget_mb`, used
        for the app's shared budget and for the jobs it queues alike."""
        return self.memory_budget_mb * 2**20 if self.memory_budget_mb > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Settings:
        """Values of the right type are taken; anything else keeps its default."""
        return cls.checked(d)[0]

    @classmethod
    def checked(cls, d: dict[str, Any]) -> tuple[Settings, str | None]:
        """The settings `d` holds, each value checked against its field's declared type (a
        `Literal` only takes its choices, an int is never a bool and fits a Qt spin box), and
        the first value that does not fit, said in one line ("the saved batch is "8""); such
        values and missing ones keep their defaults."""
        good: dict[str, Any] = {}
        problem: str | None = None
        for name, hint in field_types(cls).items():
            if name not in d:
                continue
            value = d[name]
            low = -_QT_INT_MAX if name in _SIGNED else 0
            if fits(value, hint) and (hint is not int or low <= value <= _QT_INT_MAX):
                good[name] = tuple(value) if isinstance(value, list) else value  # JSON's tuples
            elif problem is None:
                problem = f"the saved {name} is {json.dumps(value)[:40]}"
        return cls(**good), problem


@dataclass(frozen=True)
class SourceItem:
    """One source-face photo with the faces found in it."""

    path: Path
    faces: tuple[Face, ...] = ()
    """Left to right (the order jobs count them in)."""
    chosen: int = 0
    thumbnail: Frame | None = None
    """The whole photo, downscaled (for the card)."""
    error: str = ""
    pending: bool = True


def left_to_right(faces: Sequence[Face]) -> list[int]:
    """The indexes of `faces` in order of their boxes' left edges: how jobs count the faces of a
    frame (`--reference-face N`), and the order R steps through them."""
    return sorted(range(len(faces)), key=lambda i: faces[i].bbox[0])


class SessionModel(QObject):
    """The project being edited: target clip, sources, settings, position, range, preview."""

    targetChanged = Signal()
    sourcesChanged = Signal()
    settingsChanged = Signal()
    positionChanged = Signal(int)
    rangeChanged = Signal()
    markersChanged = Signal()
    previewChanged = Signal(object)
    referenceChanged = Signal()
    loopChanged = Signal(bool)
    playingChanged = Signal(bool)
    rateChanged = Signal(float)
    viewChanged = Signal()
    peopleChanged = Signal()
    """The people found in the clip, or the photos mapped onto them, changed."""
    modelsChanged = Signal()
    """What the models folder offers (`folder_models`) changed."""
    clockChanged = Signal(object)
    """The clip's clock arrived (a variable rate's, read in the background): carries the function
    that moves a frame counted at the average rate to the frame shown at the same time (before
    `rangeChanged`, `markersChanged` and `positionChanged` say where the frames moved)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.clip: ClipInfo | None = None
        self.player = False
        """Whether the clip is open only to be watched (a render's output): no processing, no jobs."""
        self.sources: list[SourceItem] = []
        self.settings = Settings()
        self.position = 0
        self.in_point: int | None = None
        self.out_point: int | None = None
        self.markers: dict[int, MarkerKind] = {}
        self.preview: PreviewResult | None = None
        self.preview_display: object | None = None
        self.reference_face: int | None = None
        self.playing = False
        self.rate = 0.0
        """Playback speed in times real time: negative plays backwards, 0 is stopped."""
        self.loop = False
        """Whether playback starts over at the far end of the play range (off: it stops there,
        as an editor's does)."""
        self.show_before = True
        """Whether the before/after split is shown (off: the processed frame alone)."""
        self.split = 0.5
        self.zoom_fit = True
        self.models_dir: Path | None = None
        self.people: People | None = None
        """The people of the clip (`ffdesk.faces.people.find_people`), once found."""
        self.people_span: tuple[float | None, float | None] = (None, None)
        """The seconds of the clip the people were found in (as `span_s`)."""
        self.person_photos: dict[int, tuple[Path, ...]] = {}
        """Person index -> the photos put on them; a person not here is left untouched."""
        """The models folder jobs use (None: the runtime environment's)."""
        self.folder_models: dict[str, tuple[str, ...]] | None = None
        """The usable models of the models folder by kind, once verified (None: not yet)."""
        self.processor_stages = installed_processors()
        """The processors this ffdesk has a render stage for."""

    # -- target --------------------------------------------------------------------------
    def set_clip(self, clip: ClipInfo | None, *, player: bool = False) -> None:
        """Open `clip` for editing, or (`player`) only to watch it as it is, unprocessed. A face
        chosen as the reference in the last clip means nothing in this one: the choice goes back
        to the largest face."""
        self.clip = clip
        self.player = player
        self.position = 0
        self.in_point = self.out_point = None
        self.markers = {}
        self.preview = None
        self.reference_face = None
        self.people, self.people_span, self.person_photos = None, (None, None), {}
        self.set_playing(False)
        if self.settings.face_selection == "reference":
            self.settings = replace(self.settings, face_selection="largest")
            self.settingsChanged.emit()
        self.targetChanged.emit()
        self.rangeChanged.emit()
        self.markersChanged.emit()
        self.peopleChanged.emit()
        self.positionChanged.emit(0)

    def set_clock(self, path: Path, clock: FrameClock) -> bool:
        """The open clip's clock, read in the background, is there: frames count by it from now
        on. The position, the in/out points and the markers stay at the same *time* (the frame
        shown there). False (nothing changes) when `path` is no longer open or its clock is known."""
        clip = self.clip
        if clip is None or clip.path != path or clip.clock_known:
            return False
        moved = clock_move(clip.frame_clock, clock, self.last_index)
        people_of_range = self.people is not None and self.people_span == self.span_s()
        # the frames are the stamps read, not the average rate's estimate from the header
        self.clip = replace(clip, clock=clock, frame_count=len(clock.times) or clip.frame_count)
        self.position = moved(self.position)
        self.in_point, self.out_point = _moved(self.in_point, moved), _moved(self.out_point, moved)
        if people_of_range:  # the people found in the range are its people still, counted anew
            self.people_span = self.span_s()
        markers: dict[int, MarkerKind] = {}
        for index, kind in self.markers.items():
            markers[moved(index)] = "flagged" if "flagged" in (kind, markers.get(moved(index))) else kind
        self.markers = markers
        self.clockChanged.emit(moved)
        self.rangeChanged.emit()
        self.markersChanged.emit()
        self.positionChanged.emit(self.position)
        return True

    @property
    def last_index(self) -> int:
        return max(0, self.clip.frame_count - 1) if self.clip else 0

    def set_position(self, index: int) -> None:
        index = max(0, min(int(index), self.last_index))
        if index != self.position:
            self.position = index
            self.positionChanged.emit(index)

    def step(self, delta: int) -> None:
        self.set_position(self.position + delta)

    def set_playing(self, playing: bool) -> None:
        """Play forward at normal speed (or keep the shuttle's speed), or stop."""
        self.set_rate((self.rate or 1.0) if playing else 0.0)

    def set_rate(self, rate: float) -> None:
        """Play at `rate` times real time (negative: backwards; 0: stop). A still image never plays."""
        rate = float(rate) if self.clip is not None and not self.clip.is_image else 0.0
        if rate == self.rate:
            return
        was_playing = self.playing
        self.rate, self.playing = rate, rate != 0.0
        self.rateChanged.emit(rate)
        if self.playing != was_playing:
            self.playingChanged.emit(self.playing)

    def set_loop(self, on: bool) -> None:
        """Loop playback within the play range, or stop at its end."""
        if bool(on) != self.loop:
            self.loop = bool(on)
            self.loopChanged.emit(self.loop)

    @property
    def play_range(self) -> tuple[int, int]:
        """The frames playback runs over (and loops over, with `loop`): in to out point, or the
        whole clip."""
        lo = self.in_point if self.in_point is not None else 0
        hi = self.out_point if self.out_point is not None else self.last_index
        return lo, max(lo, hi)

    def set_range(self, in_point: int | None, out_point: int | None) -> None:
        """Set both points at once (one `rangeChanged`); an out point before the in point is dropped."""
        backwards = in_point is not None and out_point is not None and out_point < in_point
        self.in_point, self.out_point = in_point, None if backwards else out_point
        self.rangeChanged.emit()

    def set_in(self, index: int | None) -> None:
        self.in_point = index
        if index is not None and self.out_point is not None and self.out_point < index:
            self.out_point = None
        self.rangeChanged.emit()

    def set_out(self, index: int | None) -> None:
        self.out_point = index
        if index is not None and self.in_point is not None and self.in_point > index:
            self.in_point = None
        self.rangeChanged.emit()

    def set_marker(self, index: int, kind: MarkerKind | None) -> None:
        if kind is None:
            if self.markers.pop(index, None) is None:
                return
        elif self.markers.get(index) == kind:
            return
        else:
            self.markers[index] = kind
        self.markersChanged.emit()

    # -- sources -------------------------------------------------------------------------
    def add_source(self, path: Path) -> bool:
        """Add a photo (pending detection); False when it is already there."""
        if any(s.path == path for s in self.sources):
            return False
        self.sources.append(SourceItem(path=path))
        self.sourcesChanged.emit()
        return True

    def update_source(self, path: Path, **changes: Any) -> None:
        for i, s in enumerate(self.sources):
            if s.path == path:
                self.sources[i] = replace(s, **changes)
                self.sourcesChanged.emit()
                return

    def remove_source(self, path: Path) -> None:
        self.sources = [s for s in self.sources if s.path != path]
        self.sourcesChanged.emit()

    # -- settings, preview, view ---------------------------------------------------------
    def update_settings(self, **changes: Any) -> None:
        new = replace(self.settings, **changes)
        if new != self.settings:
            self.settings = new
            self.settingsChanged.emit()

    def set_preview(self, result: PreviewResult, display: object | None = None) -> None:
        """A new preview; `display` is an optional view-ready copy made off the main thread."""
        self.preview = result
        self.preview_display = display
        if result.faces and self.markers.get(result.index) == "noface":
            self.set_marker(result.index, None)  # the preview's own detector found one here
        self.previewChanged.emit(result)

    def apply_scan(self, points: Sequence[ScanPoint]) -> None:
        """Mark the frames a face scan found no face in (and unmark those it found one in); a
        frame the quality guard flagged keeps that mark. One `markersChanged` for the batch."""
        changed = False
        for point in points:
            now = self.markers.get(point.index)
            if point.faces == 0 and now is None:
                self.markers[point.index] = "noface"
                changed = True
            elif point.faces > 0 and now == "noface":
                del self.markers[point.index]
                changed = True
        if changed:
            self.markersChanged.emit()

    def set_reference_face(self, index: int | None) -> None:
        self.reference_face = index
        if index is not None and self.settings.face_selection != "reference":
            self.update_settings(face_selection="reference")
        self.referenceChanged.emit()

    def step_reference_face(self, direction: int) -> int | None:
        """Make the next face of the shown frame the reference, left to right (`direction` 1)
        or right to left (-1), from the chosen one (none chosen: the leftmost, or the rightmost
        going left), so that a face is picked without a mouse. Its index; None, with nothing
        changed, where the shown frame has no face."""
        faces = self.preview.faces if self.preview is not None and not self.player else ()
        if not faces:
            return None
        order = left_to_right(faces)
        ref = self.reference_face
        if ref is None or ref not in order:
            pick = order[0] if direction > 0 else order[-1]
        else:
            pick = order[(order.index(ref) + direction) % len(order)]
        self.set_reference_face(pick)
        return pick

    def set_show_before(self, on: bool) -> None:
        self.show_before = bool(on)
        self.viewChanged.emit()

    def set_split(self, fraction: float) -> None:
        self.split = max(0.0, min(1.0, float(fraction)))
        self.viewChanged.emit()

    def set_zoom_fit(self, fit: bool) -> None:
        self.zoom_fit = bool(fit)
        self.viewChanged.emit()

    def set_models_dir(self, folder: Path) -> None:
        """Jobs use the models in `folder` from now on (a settings change: the preview follows)."""
        if folder != self.models_dir:
            self.models_dir = folder
            if self.folder_models is not None:  # until the new folder is verified
                self.folder_models = None
                self.modelsChanged.emit()
            self.settingsChanged.emit()

    def set_folder_models(self, models: dict[str, list[str]] | dict[str, tuple[str, ...]]) -> None:
        """The models folder offers these usable models (by kind): the processors whose model is
        not among them are left out of jobs (a settings change: the preview follows)."""
        found = {kind: tuple(names) for kind, names in models.items()}
        if found != self.folder_models:
            self.folder_models = found
            self.modelsChanged.emit()
            self.settingsChanged.emit()

    def processor_facts(self) -> ProcessorFacts:
        """What besides the settings decides which processors a job runs."""
        clip = self.clip
        return ProcessorFacts(
            folder_models=self.folder_models,
            clip_open=clip is not None,
            is_image=clip is not None and clip.is_image,
            has_audio=clip is not None and clip.has_audio,
            stages=self.processor_stages,
        )

    def processor_states(self) -> dict[str, ProcessorState]:
        """Each processor's state (on, in jobs, why not), by kind, in the order renders run them."""
        return processor_states(self.settings, self.processor_facts())

    # -- people --------------------------------------------------------------------------
    def set_people(self, people: People | None, span: tuple[float | None, float | None]) -> None:
        """The people found in `span` of the clip. Photos already put on someone follow them to
        their new number (matched by identity, by the same recognizer); one no longer found is
        left out."""
        old, photos = self.people, self.person_photos
        carried: dict[int, tuple[Path, ...]] = {}
        if people is not None and old is not None and old.recognizer == people.recognizer:
            for index, paths in photos.items():
                now = people.match(old.people[index].centroid) if index < len(old.people) else None
                if now is not None and now not in carried:
                    carried[now] = paths
        self.people, self.people_span, self.person_photos = people, span, carried
        self.peopleChanged.emit()

    def set_person_photos(self, index: int, photos: Sequence[Path]) -> None:
        """Put `photos` on person `index` (several are averaged); none: leave them untouched."""
        photos = tuple(dict.fromkeys(photos))
        if self.person_photos.get(index, ()) == photos:
            return
        if photos:
            self.person_photos[index] = photos
        else:
            self.person_photos.pop(index, None)
        self.peopleChanged.emit()

    def face_map(self) -> tuple[FaceMapping, ...]:
        """The people with photos, as a job's face map (empty: no one is mapped)."""
        people = self.people
        out = []
        for i in sorted(self.person_photos):
            if people is not None and i < len(people.people):  # what the pass saw: no pass again
                centroid = tuple(float(v) for v in people.people[i].centroid)
                out.append(FaceMapping(i, self.person_photos[i], centroid, people.recognizer))
            else:
                out.append(FaceMapping(i, self.person_photos[i]))
        return tuple(out)

    def span_s(self) -> tuple[float | None, float | None]:
        """The seconds a job covers: in to just after out (None: the clip's start / end)."""
        if self.clip is None:
            return None, None
        return self.clip.frame_clock.span(self.in_point, self.out_point)

    # -- jobs ----------------------------------------------------------------------------
    def reference_rank(self) -> int | None:
        """The reference face counted left to right (how jobs name it), from the shown frame."""
        if self.reference_face is None:
            return None
        faces = self.preview.faces if self.preview is not None else ()
        if not 0 <= self.reference_face < len(faces):
            return self.reference_face
        return left_to_right(faces).index(self.reference_face)

    def default_output(self, mode: Mode | None = None, taken: Iterable[Path] = ()) -> Path | None:
        """Where a new render in `mode` (None: the current one) writes: CLIP-ffdesk.EXT for a
        final render, CLIP-ffdesk-preview.EXT for a draft (EXT: the encoder's container, or an
        image target's own type), numbered (-2, -3, ...) when a file is there or `taken`
        (outputs queued jobs will write) holds it. None without a clip."""
        if self.clip is None:
            return None
        from ffdesk.media.encode import container_suffix
        from ffdesk.pipeline.output_names import render_output

        folder = Path(self.settings.output_dir) if self.settings.output_dir else self.clip.path.parent
        suffix = container_suffix(self.settings.encoder)
        if self.clip.is_image:  # a photo renders to a photo of its own kind (PNG for an alpha matte)
            from ffdesk.media.images import IMAGE_SUFFIXES
            from ffdesk.media.matte import ALPHA_IMAGE_SUFFIXES

            own = self.clip.path.suffix.lower()
            alpha = self.settings.matte == "alpha"
            if own in IMAGE_SUFFIXES:
                suffix = ".png" if alpha and own not in ALPHA_IMAGE_SUFFIXES else own
        return render_output(self.clip.path, mode or self.settings.mode, folder, suffix, taken)

    def usable_sources(self) -> list[SourceItem]:
        """The source photos a job uses: all but those that failed or have no face."""
        return [src for src in self.sources if not src.error and (src.pending or src.faces)]

    def build_job(
        self, output: Path | None = None, *, mode: Mode | None = None, matte: MatteKind | None = None
    ) -> RenderJob:
        """An immutable job from the current state (ValueError when there is no clip; UserError,
        one line, for settings a render refuses). `matte`: instead of the control's (a preview
        writes none)."""
        if self.clip is None:
            raise ValueError("no clip is open")
        s = self.settings
        out = output or self.default_output(mode)
        assert out is not None
        face_map = self.face_map()  # with people mapped, the Sources photos are not used
        chosen = [] if face_map else self.usable_sources()
        first = chosen[0] if chosen else None
        start, end = self.span_s()
        processors = processor_job_fields(s, self.processor_states())
        return RenderJob(
            target=self.clip.path,
            output=out,
            sources=tuple(src.path for src in chosen),
            source_face=first.chosen if first is not None and len(first.faces) > 1 else None,
            mode=mode or s.mode,
            precision=s.precision,
            batch=s.batch,
            memory_budget=s.memory_budget_bytes,
            encoder=s.encoder,
            matte=s.matte if matte is None else matte,
            quality=s.quality,
            video_preset=None if s.video_preset == "auto" else s.video_preset,
            start=start,
            end=end,
            face_selection=s.face_selection,
            reference_face=self.reference_rank() if s.face_selection == "reference" else None,
            swapper=s.swapper or None,
            # a pack's detector and recognizer (the embedded swap has its own: a pick left from a
            # pack would only be named in the render's warnings as set to no effect)
            recognizer=(s.recognizer or None) if s.swapper else None,
            detector=(s.detector or None) if s.swapper else None,
            enhancer=s.enhancer or None,
            enhancer_weight=s.enhancer_weight,
            enhancer_blend=s.enhancer_blend,
            **self.mask_job_fields(processors),
            models_dir=self.models_dir,
            face_map=face_map,
            **processors,
        )

    def mask_job_fields(self, processors: Mapping[str, Any]) -> dict[str, Any]:
        """The mask fields of a job (a render's or a live session's) that runs these processor
        fields: every control's with a swapper model; with the embedded swap, which has masks of
        its own, those the face processors turned on read (`ffdesk.pipeline.mask_use`)."""
        s = self.settings
        read = mask_use.ALL if s.swapper else mask_use.reads(k for k, v in processors.items() if v)
        return _mask_fields(s, read)


def clock_move(before: FrameClock, after: FrameClock, last: int) -> Callable[[int], int]:
    """Frame N counted by `before` -> the frame `after` shows at that time (0..`last`, or to
    `after`'s own last frame where it lists its frames: `last` then is only an estimate)."""
    last = len(after.times) - 1 if after.times else last
    return lambda index: after.index_at(before.time_of(index), last)


def _moved(index: int | None, moved: Callable[[int], int]) -> int | None:
    return None if index is None else moved(index)


def _mask_fields(s: Settings, read: frozenset[mask_use.MaskSetting]) -> dict[str, Any]:
    """The job's mask settings from the controls', those its stages `read` (the others keep the
    job's defaults; `ffdesk.pipeline.mask_use`). Values a damaged settings file put out of range
    are brought back into it; unknown names are left out."""
    from ffdesk.swap.areas import AREAS

    types = [t for t in ("box", "occlusion", "area") if t in _names(s.mask_types) and t in read]
    region = bool(s.parser) and "region" in read
    out: dict[str, Any] = {
        "masks": (*types, *((f"region={s.parser}",) if region else ())),
        "mask_regions": tuple(_names(s.mask_regions)) if "region" in read else (),
    }
    if "blur" in read:
        out["mask_blur"] = min(1.0, max(0.0, float(s.mask_blur)))
    if "padding" in read:
        out["mask_padding"] = tuple(min(100, max(0, int(p))) for p in s.mask_padding)
    if "areas" in read:
        out["mask_areas"] = tuple(a for a in _names(s.mask_areas) if a in AREAS)
    return out


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


@dataclass(frozen=True)
class StatusEntry:
    level: Level
    text: str
    count: int = 1


class StatusLog(QObject):
    """Warnings and errors for the status area. A repeated message bumps a count instead of a row."""

    changed = Signal()
    posted = Signal(str, str)  # level, text

    def __init__(self, parent: QObject | None = None, capacity: int = 200) -> None:
        super().__init__(parent)
        self.entries: list[StatusEntry] = []
        self.capacity = capacity

    def post(self, level: Level, text: str) -> None:
        text = " ".join(str(text).split())
        if self.entries and self.entries[-1].text == text and self.entries[-1].level == level:
            last = self.entries[-1]
            self.entries[-1] = replace(last, count=last.count + 1)
        else:
            self.entries.append(StatusEntry(level, text))
            del self.entries[: -self.capacity]
        self.posted.emit(level, text)
        self.changed.emit()

    def clear(self) -> None:
        self.entries = []
        self.changed.emit()


class ResidencyModel(QObject):
    """Models resident on the device and the budget, as the window's shared manager reports them:
    (label, bytes) pairs where the label names the model and who holds it
    ("inswapper_128@fp32 (preview)", "... (render clip.mp4)"), so the bar shows the sum."""

    changed = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.models: tuple[tuple[str, int], ...] = ()
        self.budget_bytes: int | None = None

    def set(self, models: tuple[tuple[str, int], ...], budget_bytes: int | None) -> None:
        self.models, self.budget_bytes = tuple(models), budget_bytes
        self.changed.emit()

    @property
    def used_bytes(self) -> int:
        return sum(b for _, b in self.models)
