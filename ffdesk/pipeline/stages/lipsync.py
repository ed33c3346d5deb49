"""The lip-sync stage: each chosen face's mouth follows a voice (FaceFusion's lip syncer).

Where it runs: after the swap and before the face enhancer, as FaceFusion runs
`--processors face_swapper lip_syncer face_enhancer` (it applies processors in the order given,
each on the frame the previous one drew; the enhancer then restores the 96 px mouth as well).
Without a swap it runs alone after the face front end (dubbing a clip as it is).

Each frame's window of the voice comes from its position in the render range
(`FramePacket.index`); frames past the voice's end, and (wav2lip) faces without a face mesh
(their 68 points come from it, `ffdesk.swap.areas.points_68`), are left as they are; EDTalk
redraws the whole aligned face and pastes it under the render's box mask, so it needs no mesh.
The lip syncer loads through the render's residency manager: the model stages' own when there
is a swap, else one of its own in the same pool; it takes one face a call, and is run once on
zeros of its file's shapes before the first frame where new shapes cost (a GPU). The occlusion
models it runs itself take the crops of a batch up to `--batch` a call, padded there to batch
shapes each warmed up on black crops before the first frame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ffdesk.errors import UserError
from ffdesk.faces.align import warp_face
from ffdesk.faces.recognizer import Runner
from ffdesk.media.probe import MediaInfo
from ffdesk.media.voice import MelSettings, VoiceWindows, read_voice_windows
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import ProcessorFigures
from ffdesk.pipeline.stage import FramePacket, Stage
from ffdesk.pipeline.stages.placement import ProcessorFrames, WarmUp
from ffdesk.pipeline.stages.redraw import AlignedFaces, paste_aligned
from ffdesk.swap import lipsync as ls
from ffdesk.swap.areas import points_68
from ffdesk.swap.masks import box_mask
from ffdesk.types import Frame, Mask

if TYPE_CHECKING:
    from ffdesk.pipeline.stages.models import ModelChoice
    from ffdesk.pipeline.stages.placement import ProcessorModels
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share

ROLE = "lip_syncer"


@dataclass(frozen=True)
class _Face:
    """One face to redraw: its crop, the frame -> crop matrix, its 68 points in the crop."""

    crop: Frame
    affine: npt.NDArray[np.float64]
    points: npt.NDArray[np.float64] | None
    """The 68 points in the crop (wav2lip); None for a model that needs none (EDTalk)."""
    window: npt.NDArray[np.float32]
    owner: int


def mel_settings(spec: ls.LipSyncSpec) -> MelSettings:
    """The voice preparation of a lip syncer's catalog entry (`options.audio`), FaceFusion's
    where the entry says nothing."""
    known = MelSettings.__dataclass_fields__
    given = {k: v for k, v in spec.audio if k in known}
    try:
        return MelSettings(**given)  # type: ignore[arg-type]
    except TypeError as exc:
        raise UserError(f"{spec.name}: bad options.audio ({exc})") from None


def voice_of(
    job: RenderJob, info: MediaInfo, settings: MelSettings, extractor: Extractor | None = None
) -> VoiceWindows | PendingVoice:
    """The voice windows of the job: `lip_sync_audio` from the first rendered frame, or the
    target's own audio from the range's start; with `extractor`, the track read at 48 kHz
    stereo, as FaceFusion reads it for its voice extractor, whose voice the stage takes out when
    it prepares (`PendingVoice`).
    `UserError` (one line) for a still image, a missing or unreadable file, or a file without
    audio."""
    if info.is_image or info.video is None:
        raise UserError(f"{job.target.name}: lip sync needs a clip as the target, not a still image")
    if job.lip_sync_audio is None:
        if not info.audio:
            raise UserError(
                f"{job.target.name} has no audio track to lip sync to; give one with --lip-sync-audio FILE"
            )
        path, start = job.target, job.start or 0.0
    else:
        path, start = job.lip_sync_audio, 0.0
    if extractor is None:
        return read_voice_windows(path, info.video.fps, settings, start_s=start)
    from ffdesk.media import voice_extract as vx
    from ffdesk.media.voice import read_voice

    track = read_voice(path, sample_rate=vx.RATE, start_s=start, channels=2)
    return PendingVoice(path.name, track, extractor, settings, info.video.fps)


@dataclass(frozen=True)
class PendingVoice:
    """A track read (so a bad file has failed already) whose voice the extractor takes out when
    the stage prepares, before the first frame, with progress (`Preparing` events): a long
    track through a real MDX-Net model takes a while."""

    name: str
    track: npt.NDArray[np.float32]
    extractor: Extractor
    settings: MelSettings
    fps: float

    def windows(self, on_event: Callable[[Any], None]) -> VoiceWindows:
        from ffdesk.media import voice_extract as vx
        from ffdesk.media.voice import voice_windows

        what = f"taking the voice out of {self.name} ({self.extractor.name})"

        def chunk(done: int, total: int) -> None:
            on_event(ev.Preparing(what, done, total))

        voice = vx.extract_voice(self.track, self.extractor.model, self.extractor.frames, chunk)
        return voice_windows(vx.voice_for_lip_sync(voice, self.settings.sample_rate), self.fps, self.settings)


@dataclass(frozen=True)
class Extractor:
    """A loaded voice extractor: `model` takes the spectra ([N, 4, bins, frames]) and gives the
    voice's; `frames` is its windows' length in transform frames."""

    name: str
    model: Callable[[npt.NDArray[np.float32]], npt.NDArray[np.float32]]
    frames: int


VOICE_EXTRACTOR = "kim_vocal_2"
"""FaceFusion's default voice extractor (what `--voice-extractor auto` takes when present)."""


def _voice_extractor(job: RenderJob, env: RuntimeEnv) -> tuple[ModelChoice | None, str | None]:
    """The job's voice extractor file (checked), or None; and, for `auto` without the default's
    file, the line that says the lip syncer hears the whole track."""
    from ffdesk.pipeline.stages.models import resolve_model
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import resolve_models_dir

    value = job.voice_extractor.strip()
    if value == "none":
        return None, None
    catalog = load_catalog()
    folder = resolve_models_dir(job.models_dir, env)
    if value == "auto":
        if not (folder / catalog.get(VOICE_EXTRACTOR).file).exists():
            note = (
                f"{catalog.get(VOICE_EXTRACTOR).file} (FaceFusion's voice extractor) is not in the models "
                "folder: the lip syncer hears the whole track, music and all"
            )
            return None, note
        value = VOICE_EXTRACTOR
    return resolve_model(value, "voice_extractor", folder, catalog), None


def _load_extractor(models: ProcessorModels, choice: ModelChoice) -> Extractor:
    """`choice` registered with `models`, as a callable over spectra (out-of-memory safe)."""
    from ffdesk.faces.recognizer import accepts_batch, first_output, run_batched

    key = models.register(choice, every_frame=False)  # runs once, before the first frame
    assert choice.spec is not None
    x = choice.spec.inputs[0]
    frames = int(x.shape[3]) if x.rank == 4 and isinstance(x.shape[3], int) else 256

    def model(spectra: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        def run(session: Runner, chunk: Sequence[npt.NDArray[np.float32]]) -> list[npt.NDArray[np.float32]]:
            feeds = {x.name: np.stack(list(chunk))}
            out = run_batched(session, feeds, [x.name], one_run=accepts_batch(session))
            return list(np.asarray(first_output(out), np.float32))

        return np.stack(models.run(key, run, list(spectra)))

    return Extractor(choice.name, model, frames)


class LipSyncStage(ProcessorFrames):
    """Redraws the mouth of every chosen face of a batch for its frame's voice window."""

    name = "lip_sync"
    workers = 1
    edits_regions = True  # records each pasted mouth's region

    def __init__(
        self,
        spec: ls.LipSyncSpec,
        voice: VoiceWindows | PendingVoice,
        models: ProcessorModels,
        key: str,
        *,
        weight: float,
        max_batch: int,
        occlusion: Callable[[npt.NDArray[np.uint8]], npt.NDArray[np.float32]] | None = None,
        box: tuple[float, tuple[int, int, int, int]] = (0.3, (0, 0, 0, 0)),
        notes: Sequence[str] = (),
        masks_warm_ups: Sequence[WarmUp] = (),
    ) -> None:
        """`models`/`key`: the lip syncer, registered on a residency manager (`finish` lets go of
        a manager of the stage's own); `occlusion`: the render's occlusion masks of a stack of
        crops (FaceFusion keeps them under the mouth too); `box`: the box mask's blur and padding
        (the render's `--mask-blur`, `--mask-padding`), EDTalk's paste mask; `masks_warm_ups`:
        how the mask models it runs on `models` are warmed up (`RenderMasks.warm_ups`)."""
        self.spec = spec
        self.voice = voice
        self.models = models
        self.key = key
        self.weight = weight
        self.max_batch = max_batch
        self._occlusion = occlusion
        self._box = box
        self._notes = tuple(notes)
        self._masks_warm_ups = tuple(masks_warm_ups)
        self.frame_origin = 0
        """The packet index of the voice's first frame (`ffdesk.pipeline.preview.FollowsRange`)."""
        self._emit: Callable[[ev.Event], None] = ev.ignore
        self._warned_end = False
        self.faces_synced = 0
        self.faces_without_mesh = 0

    def bind_events(self, on_event: Callable[[Any], None]) -> None:
        self._emit = on_event

    def prepare(self, on_event: Callable[[Any], None]) -> None:
        """The voice taken out of its track, when an extractor is to do it, the lip syncer
        loaded, and where new shapes cost its models run at the shapes the frames meet (before
        the first frame)."""
        self._ready(on_event)
        self.models.warm_up(self.warm_ups(), on_event)

    def start(self) -> None:
        for note in self._notes:
            self._emit(ev.Warning(note))
        self._ready(self._emit)

    def _ready(self, on_event: Callable[[Any], None]) -> None:
        """The voice taken out of its track, when an extractor is to do it, and the lip syncer
        loaded: in `prepare`, and again in `start` for a caller that does not prepare (a
        preview), where it finds the voice taken out already."""
        if isinstance(self.voice, PendingVoice):
            self.voice = self.voice.windows(on_event)
        self.models.prepare(on_event)

    def batched(self) -> list[WarmUp]:
        """The occlusion models it runs itself (the lip syncer takes one face a call)."""
        return list(self._masks_warm_ups)

    def _faces(self, batch: Sequence[FramePacket]) -> list[_Face]:
        spec, out = self.spec, []
        for i, packet in enumerate(batch):
            if not packet.swap.faces:
                continue
            frame = packet.index - self.frame_origin
            voice = self.voice
            assert isinstance(voice, VoiceWindows), "the voice is ready once the stage started"
            window = voice.window(frame)
            if window is None:  # before the range (a preview before the in point) or past the voice
                if frame >= 0 and not self._warned_end:
                    self._warned_end = True
                    end = len(voice)
                    self._emit(
                        ev.Warning(f"the voice ends at frame {end}: later mouths are left as they are")
                    )
                continue
            for face in packet.swap.faces:
                if spec.needs_mesh and face.landmarks is None:
                    self.faces_without_mesh += 1
                    continue
                crop, affine = warp_face(packet.image, face.kps, spec.template, spec.crop_size)
                m = np.asarray(affine, np.float64)
                points = None
                if spec.needs_mesh:
                    assert face.landmarks is not None
                    points = points_68(face.landmarks).astype(np.float64) @ m[:, :2].T + m[:, 2]
                out.append(_Face(crop, m, points, window, i))
        return out

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        faces = self._faces(batch)
        if not faces:
            return list(batch)
        spec, weight = self.spec, self.weight

        def draw(session: Runner, chunk: Sequence[_Face]) -> list[Frame]:
            syncer = ls.LipSyncer(session, spec, weight=weight)
            return [syncer.mouth(f.crop, f.points, f.window) for f in chunk]

        drawn = self.models.run(self.key, draw, faces)
        masks: list[Mask] = [self._mask(f) for f in faces]
        crops = np.stack([f.crop for f in faces])
        if self._occlusion is not None:
            masks = [np.minimum(m, o) for m, o in zip(masks, self._occlusion(crops), strict=True)]
        aligned = AlignedFaces(crops, tuple(f.affine for f in faces), (), tuple(f.owner for f in faces))
        paste_aligned(batch, aligned, drawn, masks)
        self.faces_synced += len(faces)
        return list(batch)

    def _mask(self, face: _Face) -> Mask:
        """The paste mask: the lower-face area of the 68 points (wav2lip), the box (EDTalk)."""
        if face.points is None:
            blur, padding = self._box
            return box_mask(self.spec.crop_size, blur, padding)
        return ls.lower_face_mask(face.points, self.spec.crop_size, self.spec.area)

    def work(self) -> ProcessorFigures:
        """The faces whose mouths were redrawn."""
        return ProcessorFigures(self.name, self.spec.name, faces=self.faces_synced)


def _spec_of(choice: ModelChoice) -> ls.LipSyncSpec:
    from ffdesk.pipeline.stages.models import processor_spec

    return processor_spec(choice, "lip syncer", ls.lip_sync_spec)


def _resolve(job: RenderJob, env: RuntimeEnv) -> ModelChoice:
    from ffdesk.pipeline.stages.models import job_model

    assert job.lip_syncer is not None
    return job_model(job, job.lip_syncer, ROLE, env)


def _stage(
    job: RenderJob,
    info: MediaInfo,
    before: Sequence[Stage],
    choice: ModelChoice,
    env: RuntimeEnv,
    share: Share | None,
) -> LipSyncStage:
    """The stage after `before`: its models (the voice extractor's and the lip syncer's) on the
    model stages' manager, and their occlusion masks, when the render has them; else on a
    manager of its own (in `share`'s pool when given), with the job's occlusion models there."""
    from ffdesk.pipeline.stages.placement import processor_models, render_masks

    spec = _spec_of(choice)
    models = processor_models(job, before, env=env, share=share)
    try:
        extractor, note = _voice_extractor(job, env)
        loaded = _load_extractor(models, extractor) if extractor is not None else None
        voice = voice_of(job, info, mel_settings(spec), loaded)
        key = models.register(choice)
        masks = render_masks(job, before, models, env)
    except BaseException:
        models.close()
        raise

    return LipSyncStage(
        spec,
        voice,
        models,
        key,
        weight=job.lip_sync_weight,
        max_batch=max(1, job.batch),
        occlusion=masks.occlusion,
        box=(job.mask_blur, job.mask_padding),
        notes=(note,) if note else (),
        masks_warm_ups=masks.warm_ups(spec.crop_size),
    )


def with_lip_sync(
    stages: Sequence[Stage],
    job: RenderJob,
    info: MediaInfo | None,
    *,
    env: RuntimeEnv,
    share: Share | None = None,
) -> list[Stage]:
    """`stages` with the lip-sync stage where FaceFusion's order puts it
    (`ffdesk.pipeline.stages.placement`): after the face stages that redraw faces (sharing a model
    swap's manager and occlusion masks), before the face enhancer and whole-frame stages; with no
    stages at all, after a face front end of its own. Unchanged without `job.lip_syncer`. Bad
    settings fail here, before any frame is decoded."""
    if not job.lip_syncer:
        return list(stages)
    from ffdesk.pipeline.stages.placement import place_face_stage

    choice = _resolve(job, env)

    def make(before: Sequence[Stage], given: MediaInfo | None) -> Stage:
        from ffdesk.media.probe import probe

        known = given if given is not None else probe(job.target, fps=job.fps, max_pixels=job.max_pixels)
        return _stage(job, known, before, choice, env, share)

    return place_face_stage(stages, job, info, make)
