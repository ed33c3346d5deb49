"""Immutable render settings, built on the caller's thread and never mutated by the engine."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from ffdesk.errors import UserError
from ffdesk.types import VIDEO_PRESETS, EncoderName, FaceSelection, Mode, Precision, VideoPreset
from ffdesk.userpath import expand_user, stream_fd

if TYPE_CHECKING:
    from ffdesk.media.probe import VideoInfo

Provider = Literal["auto", "cpu", "cuda", "tensorrt"]
"""Where the models of a render run: "auto" (CUDA when usable, else the CPU), "cpu", "cuda"
(falls back to the CPU where CUDA is not usable), "tensorrt" (TensorRT first, then CUDA, then CPU)."""
PROVIDERS: tuple[Provider, ...] = get_args(Provider)

Pixels = Literal["auto", "host", "device"]
"""Where a model-pack render keeps the pixels between its model calls: "host" (numpy and OpenCV
in host memory), "device" (torch tensors on the models' device: each frame with a face is
uploaded once and only the changed regions come back; on a machine without a GPU, torch's CPU
device), "auto" (the device where the models run on a GPU, else the host)."""
PIXELS: tuple[Pixels, ...] = get_args(Pixels)

MatteKind = Literal["none", "alpha", "clip"]
"""Where a render writes its matte (where the pasted faces cover each frame, or the background
remover's subject matte, 0-255): nowhere, as
the output's alpha channel (prores, png), or as a grey clip beside the output (`OUTPUT-matte.EXT`);
see `ffdesk.pipeline.matte`."""
MATTES: tuple[MatteKind, ...] = get_args(MatteKind)
MODES: tuple[Mode, ...] = get_args(Mode)
PRECISIONS: tuple[Precision, ...] = get_args(Precision)
ENCODERS: tuple[EncoderName, ...] = get_args(EncoderName)
FACE_SELECTIONS: tuple[FaceSelection, ...] = get_args(FaceSelection)

SwapScale = Literal[1, 2, 4]
ExpressionArea = Literal["upper-face", "lower-face"]
"""FaceFusion's expression restorer areas (`--expression-restorer-areas`)."""
EXPRESSION_AREAS: tuple[ExpressionArea, ...] = get_args(ExpressionArea)
FaceEdit = Literal[
    "eyebrow_direction",
    "eye_gaze_horizontal",
    "eye_gaze_vertical",
    "eye_open_ratio",
    "lip_open_ratio",
    "mouth_grim",
    "mouth_pout",
    "mouth_purse",
    "mouth_smile",
    "mouth_position_horizontal",
    "mouth_position_vertical",
    "head_pitch",
    "head_yaw",
    "head_roll",
]
"""FaceFusion's face editor settings (`--face-editor-<name with dashes>`), each -1 to 1."""
FACE_EDITS: tuple[FaceEdit, ...] = get_args(FaceEdit)
ColorizerSize = Literal["192x192", "256x256", "384x384", "512x512"]
"""FaceFusion's frame colorizer input sizes (`--frame-colorizer-size`)."""
COLORIZER_SIZES: tuple[ColorizerSize, ...] = get_args(ColorizerSize)
PROCESSOR_OPTIONS: dict[str, tuple[str, ...]] = {
    "expression_restorer": ("expression_restorer_factor", "expression_restorer_areas"),
    "face_editor": ("face_edits",),
    "deep_swapper": ("deep_swapper_morph",),
    "age_modifier": ("age_modifier_direction",),
    "background_remover": ("background_fill", "background_despill"),
    "frame_colorizer": ("frame_colorizer_size", "frame_colorizer_blend"),
}
"""FaceFusion's processors that came after the lip syncer and frame enhancer: the job field naming
each one's model (None: off) and the fields of its options (left out of the output's fingerprint
while it is off, so older jobs keep their hash)."""
DEFAULT_MODELS: dict[str, str] = {
    "expression_restorer": "live_portrait",
    "face_editor": "live_portrait",
    "deep_swapper": "iperov/elon_musk_224",
    "age_modifier": "fran",
    "background_remover": "modnet",
    "frame_colorizer": "ddcolor",
}
"""FaceFusion 3.8's default model of each of those processors (its `--<processor>-model`
default), what `--<processor>` alone and the app's pickers choose."""

"""The swapper's output resolution as a multiple of its own (sub-pixel tiling of the crop)."""
SWAP_SCALES: tuple[SwapScale, ...] = get_args(SwapScale)

PREVIEW_MAX_HEIGHT = 540
"""Working height of preview mode (renders and scrubbing): a draft of the whole clip."""


def working_size(width: int, height: int, mode: str) -> tuple[int, int]:
    """The (width, height) a preview works at: full size in final mode, capped height otherwise."""
    if mode != "preview" or height <= PREVIEW_MAX_HEIGHT:
        return width, height
    scale = PREVIEW_MAX_HEIGHT / height
    return max(2, round(width * scale / 2) * 2), PREVIEW_MAX_HEIGHT


SEGMENT_FRAMES = 240
"""Default segment length (about 10 s at 24-25 frames/s); a crash loses at most this much work.

Each segment starts with a keyframe, and a keyframe costs the encoder several times a normal frame:
forcing one every 25 frames added 6-7 CPU ms per 720p frame to x264 at preset medium. At 240
frames, a little under x264's own keyframe interval (250), segmenting adds no more keyframes than
the encoder would place anyway. A multiple of the embedded detector's cadence (8 frames)."""
DEFAULT_BATCH = 4
"""Frames per inference batch unless `--batch` says otherwise (a batch other than it is a setting given)."""
MAX_BATCH = 256
"""The most frames a batch takes: beyond it no card gains (16 faces a call keep an H200's models
busy), and each batch shape is warmed up before the first frame, so a mistyped 1000 would spend
minutes and gigabytes warming shapes a clip never reaches."""
DEFAULT_MASK_BLUR = 0.3
"""How soft the box mask's edge is by default (`--mask-blur`, FaceFusion's 0.3)."""


@dataclass(frozen=True)
class FaceMapping:
    """One person of the target and the source photos put in their place (`--map PERSON=FACE`)."""

    person: int | Path
    """The person: an index of `ffdesk faces`'s listing of the same clip and range, or a photo
    of them (its largest face)."""
    sources: tuple[Path, ...]
    """Their source photos (the largest face of each; several are averaged)."""
    centroid: tuple[float, ...] = ()
    """The person's identity as `recognizer` measured it where they were found (the app hands on
    what its People pass saw): with it, a render by the same recognizer matches faces to it
    without a pass over the clip of its own; empty: the render finds the people itself."""
    recognizer: str = ""
    """The recognizer `centroid` is a vector of (its `name`)."""

    def photos(self) -> tuple[Path, ...]:
        """The photos the entry reads: the person's (when a photo names them), then the sources."""
        return (*(() if isinstance(self.person, int) else (Path(self.person),)), *self.sources)


@dataclass(frozen=True)
class RenderJob:
    """Everything a render needs to know. Paths are absolute after `resolved()`."""

    target: Path
    output: Path
    sources: tuple[Path, ...] = ()
    source_face: int | None = None
    mode: Mode = "final"
    precision: Precision = "auto"
    batch: int = DEFAULT_BATCH
    memory_budget: int | None = None
    encoder: EncoderName = "h264"
    quality: int | None = None
    start: float | None = None
    end: float | None = None
    resume: bool = True
    report: Path | None = None
    face_selection: FaceSelection = "largest"
    reference_face: int | None = None
    models_dir: Path | None = None
    swapper: str | None = None
    recognizer: str | None = None
    detector: str | None = None
    enhancer: str | None = None
    masks: tuple[str, ...] = ()
    telemetry_log: Path | None = None
    segment_frames: int | None = None
    """Frames per resumable segment; None: `SEGMENT_FRAMES`."""
    fps: float | None = None
    """Frame rate of an image-sequence target (None: 24); clips keep their own."""
    deinterlace: bool = False
    """Turn an interlaced source progressive (yadif) instead of keeping its fields."""
    mask_regions: tuple[str, ...] = ()
    """Face regions the region mask keeps (FaceFusion's names, e.g. skin, nose, glasses); empty:
    every region, as FaceFusion does by default."""
    enhancer_weight: float = 0.5
    """Fidelity weight of enhancers that take one (CodeFormer); FaceFusion's default."""
    enhancer_blend: int = 80
    """Percent of the enhanced face mixed into the frame; FaceFusion's default."""
    provider: Provider = "auto"
    """Where the swapper, enhancer and mask models run (see `Provider`)."""
    swap_scale: SwapScale = 1
    """Swapper output resolution x N (see `SwapScale`); needs a swapper model."""
    video_preset: VideoPreset | None = None
    """The video encoder's speed preset (x264's names); None: medium in final mode, veryfast in
    preview."""
    pixels: Pixels = "auto"
    """Where the pixels stay between model calls (see `Pixels`); both give the same frames within
    rounding, so it is not part of the output's fingerprint."""
    max_pixels: int | None = None
    """The most pixels the target's frames and the source photos may declare before they are
    decoded (`--max-pixels`, `FFDESK_MAX_PIXELS`); None: `ffdesk.media.probe.DEFAULT_MAX_PIXELS`.
    A guard on the inputs, not a setting of the output: not part of its fingerprint."""
    mask_blur: float = DEFAULT_MASK_BLUR
    """Blur of the box mask, 0-1 (FaceFusion's --face-mask-blur; also the enhancer's box)."""
    mask_padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    """Box mask padding in percent of the crop: top, right, bottom, left (--face-mask-padding)."""
    mask_areas: tuple[str, ...] = ()
    """Landmark areas the area mask keeps (upper-face, lower-face, mouth); empty: every area, as
    FaceFusion does by default."""
    matte: MatteKind = "none"
    """Where the matte (the pasted faces', or the background remover's) goes (`--matte`, see
    `MatteKind`)."""
    face_map: tuple[FaceMapping, ...] = ()
    """Who goes where (`--map`): each mapped person is swapped with their own sources, the other
    faces are left untouched; empty: `face_selection` picks the faces and `sources` go in."""
    frame_enhancer: str | None = None
    """The whole-frame upscaler run after the face processors (`--frame-enhancer`, a catalog
    name such as real_esrgan_x4 or an .onnx path): the output is its scale times the working size;
    None: none."""
    frame_enhancer_blend: int = 80
    """Percent of the upscaler's picture mixed with the frame resized to its size
    (`--frame-enhancer-blend`); FaceFusion's default."""
    lip_syncer: str | None = None
    """FaceFusion's lip syncer (`--lip-syncer`: wav2lip_96, wav2lip_gan_96, edtalk_256 or an .onnx path):
    the chosen faces' mouths follow `lip_sync_audio`; None: no lip sync."""
    lip_sync_audio: Path | None = None
    """The voice the mouths follow (`--lip-sync-audio`: an audio file or a clip's audio track),
    from the first rendered frame; None: the target's own audio from the range's start."""
    lip_sync_weight: float = 0.5
    """FaceFusion's --lip-syncer-weight, 0-1 (`--lip-sync-weight`): scales the voice the model
    hears (x weight x 2; 0.5 feeds it as it is)."""
    voice_extractor: str = "auto"
    """The model that takes the voice out of the lip syncer's track first (`--voice-extractor`:
    kim_vocal_2, FaceFusion's default, kim_vocal_1, uvr_mdxnet or an .onnx path); "auto":
    kim_vocal_2 when its file is in the models folder, else none (a warning says so); "none":
    the whole track."""
    expression_restorer: str | None = None
    """FaceFusion's expression restorer (`--expression-restorer live_portrait`): the swapped
    faces take back the target actor's expression; None: off."""
    expression_restorer_factor: int = 80
    """How much of the target's expression comes back, 0-100 (FaceFusion's default 80)."""
    expression_restorer_areas: tuple[ExpressionArea, ...] = ()
    """Areas whose expression comes back; empty: both (FaceFusion's default)."""
    face_editor: str | None = None
    """FaceFusion's face editor (`--face-editor live_portrait`); None: off."""
    face_edits: tuple[tuple[FaceEdit, float], ...] = ()
    """The face editor's settings that are not 0 (`--face-edit NAME=VALUE`, each -1 to 1)."""
    deep_swapper: str | None = None
    """A DeepFaceLab model (`--deep-swapper`: a catalog name such as iperov/elon_musk_224 or a
    .dfm/.onnx path) swapped onto the chosen faces; needs no source photo. None: off."""
    deep_swapper_morph: int = 100
    """How far the face morphs to the model's identity, 0-100 (FaceFusion's default 100)."""
    age_modifier: str | None = None
    """FaceFusion's age modifier (`--age-modifier fran|styleganex_age`); None: off."""
    age_modifier_direction: int = 0
    """Younger (-100) to older (100), FaceFusion's `--age-modifier-direction`."""
    background_remover: str | None = None
    """FaceFusion's background remover (`--background-remover modnet`, ...): the matte of the
    person, as the output's alpha or a matte clip (`--matte`), and a fill; None: off."""
    background_fill: tuple[int, int, int, int] = (0, 0, 0, 0)
    """RGBA put where the background was (`--background-fill R,G,B,A`); FaceFusion's default."""
    background_despill: tuple[int, int, int, int] = (0, 0, 0, 0)
    """RGBA of a screen's spill to take out of the edges (`--background-despill`); A 0: none."""
    frame_colorizer: str | None = None
    """FaceFusion's frame colorizer (`--frame-colorizer ddcolor|deoldify...`); None: off."""
    frame_colorizer_size: ColorizerSize = "256x256"
    """The size frames are fed to the colorizer at (FaceFusion's default)."""
    frame_colorizer_blend: int = 100
    """Percent of the colorized frame in the output, 0-100 (FaceFusion's default 100)."""

    def __post_init__(self) -> None:
        check_job(self)

    def files_read(self) -> tuple[Path, ...]:
        """The files the job reads: its target, source photos, face-map photos and lip-sync audio."""
        audio = (self.lip_sync_audio,) if self.lip_sync_audio is not None else ()
        return (self.target, *self.sources, *(p for e in self.face_map for p in e.photos()), *audio)

    def resolved(self) -> RenderJob:
        """A copy with every path made absolute."""
        from dataclasses import replace

        def ab(p: Path | None) -> Path | None:
            # `-`, /dev/stdout: the descriptor they name, not the file it is open on now
            return None if p is None else p if stream_fd(p) is not None else expand_user(p).resolve()

        return replace(
            self,
            target=expand_user(self.target).resolve(),
            output=expand_user(self.output).resolve(),
            sources=tuple(expand_user(s).resolve() for s in self.sources),
            report=ab(self.report),
            models_dir=ab(self.models_dir),
            face_map=tuple(
                replace(  # (the centroid and its recognizer kept: no pass over the clip again)
                    m,
                    person=m.person if isinstance(m.person, int) else expand_user(m.person).resolve(),
                    sources=tuple(expand_user(p).resolve() for p in m.sources),
                )
                for m in self.face_map
            ),
            telemetry_log=ab(self.telemetry_log),
            lip_sync_audio=ab(self.lip_sync_audio),
        )

    def output_fingerprint(self, *, keeps_target_alpha: bool = False, picture: str | None = None) -> str:
        """Hash of every setting that changes the output's pixels or layout.

        A resumed render only reuses finished segments when this matches, so a changed setting
        never splices two different renders into one file. `keeps_target_alpha`: the output keeps
        the video target's alpha channel (`ffdesk.pipeline.matte.keeps_target_alpha`), which
        segments written before ffdesk kept it do not have. `picture`: the output picture's
        format where ffdesk once wrote another for the same source (`ffdesk.media.encode.
        picture_key`), so segments of both are never joined.
        """
        d = asdict(self)
        for k in ("resume", "report", "telemetry_log", "batch", "memory_budget", "pixels", "max_pixels"):
            d.pop(k, None)
        # provider and swap scale once travelled as string pairs: the same hash as then, so a
        # render interrupted before that change still resumes
        d["extra"] = [list(pair) for pair in legacy_extra(d.pop("provider"), d.pop("swap_scale"))]
        if d["video_preset"] is None:
            del d["video_preset"]  # jobs from before the setting keep their hash
        if d["matte"] == "none":
            del d["matte"]  # likewise
        if not d["face_map"]:
            del d["face_map"]  # likewise
        for entry in d.get("face_map", ()):  # who the person is, not how they were measured
            entry.pop("centroid", None)
            entry.pop("recognizer", None)
        if d["lip_syncer"] is None:
            for name in ("lip_syncer", "lip_sync_audio", "lip_sync_weight", "voice_extractor"):
                del d[name]  # likewise
        elif self.lip_sync_audio is not None and self.lip_sync_audio.exists():
            st_voice = self.lip_sync_audio.stat()
            d["lip_sync_audio_stat"] = [st_voice.st_size, st_voice.st_mtime_ns]
        if d["frame_enhancer"] is None:
            del d["frame_enhancer"], d["frame_enhancer_blend"]  # likewise
        for processor, options in PROCESSOR_OPTIONS.items():
            if d[processor] is None:
                for name in (processor, *options):
                    del d[name]  # likewise
        for name, default in (
            ("mask_blur", DEFAULT_MASK_BLUR),
            ("mask_padding", (0, 0, 0, 0)),
            ("mask_areas", ()),
        ):
            if d[name] == default:
                del d[name]  # as are these
        if self.masks and not any(m.partition("=")[0].strip() == "box" for m in self.masks):
            d["no_box"] = True  # masks named without the box once had it under them all the same
        for src in self.sources:
            st = src.stat() if src.exists() else None
            d.setdefault("source_stats", []).append(
                [str(src), st.st_size if st else 0, st.st_mtime_ns if st else 0]
            )
        st = self.target.stat() if self.target.exists() else None
        d["target_stat"] = [st.st_size, st.st_mtime_ns] if st else None
        if keeps_target_alpha:
            d["target_alpha"] = True  # absent otherwise: other renders keep their hash
        if picture:
            d["picture"] = picture  # likewise
        blob = json.dumps(d, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def check_job(job: RenderJob) -> None:
    """`UserError` (one line) for a setting outside its choices or its range; every front end,
    the queue and the farm build jobs through `RenderJob`, so this is the one check (the
    messages name the command line's option, which the app's controls mirror)."""
    _check_choice(job.mode, MODES, "mode", "--mode")
    _check_choice(job.precision, PRECISIONS, "precision", "--precision")
    _check_choice(job.encoder, ENCODERS, "encoder", "--encoder")
    _check_choice(job.face_selection, FACE_SELECTIONS, "face selection", "--face-selection")
    if job.quality is not None and (type(job.quality) is not int or not 0 <= job.quality <= 100):
        raise UserError(f"quality (--quality) must be between 0 and 100, not {job.quality!r}")
    if type(job.batch) is not int or not 1 <= job.batch <= MAX_BATCH:
        raise UserError(f"batch (--batch) must be a whole number from 1 to {MAX_BATCH}, not {job.batch!r}")
    budget = job.memory_budget
    if budget is not None and (type(budget) is not int or budget < 1):
        raise UserError(f"the memory budget (--memory-budget) must be more than zero, not {budget!r}")
    weight = job.enhancer_weight
    if not isinstance(weight, int | float) or isinstance(weight, bool) or not 0.0 <= weight <= 1.0:
        raise UserError(f"enhancer weight (--enhancer-weight) must be between 0 and 1, not {weight!r}")
    blend = job.enhancer_blend
    if type(blend) is not int or not 0 <= blend <= 100:
        raise UserError(f"enhancer blend (--enhancer-blend) must be between 0 and 100, not {blend!r}")
    if job.mask_regions:
        from ffdesk.swap.masks import region_classes  # OpenCV behind it: loaded when there are regions

        try:
            region_classes(job.mask_regions)
        except ValueError as exc:
            raise UserError(f"--mask-regions: {exc}") from None
    _check_masks(job)
    lip = job.lip_sync_weight
    if not isinstance(lip, int | float) or isinstance(lip, bool) or not 0.0 <= lip <= 1.0:
        raise UserError(f"lip sync weight (--lip-sync-weight) must be between 0 and 1, not {lip!r}")
    if not isinstance(job.voice_extractor, str) or not job.voice_extractor.strip():
        raise UserError(
            f"the voice extractor (--voice-extractor) is a model, auto or none, not {job.voice_extractor!r}"
        )
    if job.lip_sync_audio is not None and job.lip_syncer is None:
        raise UserError("--lip-sync-audio needs a lip syncer (--lip-syncer wav2lip_gan_96)")
    if job.provider not in PROVIDERS:
        raise UserError(f"unknown provider {job.provider!r} (choose from {', '.join(PROVIDERS)})")
    if job.swap_scale not in SWAP_SCALES or type(job.swap_scale) is not int:
        raise UserError(f"swap scale must be 1, 2 or 4, not {job.swap_scale!r}")
    if job.pixels not in PIXELS:
        raise UserError(f"unknown pixels path {job.pixels!r} (choose from {', '.join(PIXELS)})")
    if job.video_preset is not None and job.video_preset not in VIDEO_PRESETS:
        raise UserError(f"unknown video preset {job.video_preset!r} (choose from {', '.join(VIDEO_PRESETS)})")
    if job.max_pixels is not None and (type(job.max_pixels) is not int or job.max_pixels < 1):
        raise UserError(f"max pixels must be a whole number of pixels, 1 or more, not {job.max_pixels!r}")
    fe_blend = job.frame_enhancer_blend
    if type(fe_blend) is not int or not 0 <= fe_blend <= 100:
        raise UserError(
            f"frame enhancer blend (--frame-enhancer-blend) must be between 0 and 100, not {fe_blend!r}"
        )
    _check_processors(job)
    if job.matte not in MATTES:
        raise UserError(f"unknown matte (--matte) {job.matte!r}; choose from {', '.join(MATTES)}")
    if job.matte != "none":
        from ffdesk.media.images import IMAGE_SUFFIXES
        from ffdesk.media.matte import check_matte
        from ffdesk.media.sequence import is_sequence_path

        image = job.target.suffix.lower() in IMAGE_SUFFIXES and not is_sequence_path(job.target)
        check_matte(job.matte, job.encoder, image_output=job.output if image else None)


def _check_whole(value: object, low: int, high: int, what: str, option: str) -> None:
    if type(value) is not int or not low <= value <= high:
        raise UserError(f"{what} ({option}) must be a whole number from {low} to {high}, not {value!r}")


def _check_processors(job: RenderJob) -> None:
    """The settings of the processors named in `PROCESSOR_OPTIONS`."""
    _check_whole(
        job.expression_restorer_factor, 0, 100, "expression restorer factor", "--expression-restorer-factor"
    )
    for area in job.expression_restorer_areas:
        _check_choice(area, EXPRESSION_AREAS, "expression restorer area", "--expression-restorer-areas")
    seen: set[str] = set()
    for pair in job.face_edits:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise UserError(f"a face edit (--face-edit) is NAME=VALUE, not {pair!r}")
        name, value = pair
        _check_choice(name, FACE_EDITS, "face edit", "--face-edit")
        if name in seen:
            raise UserError(f"face edit {name} (--face-edit) is given twice")
        seen.add(name)
        if not isinstance(value, int | float) or isinstance(value, bool) or not -1.0 <= value <= 1.0:
            raise UserError(f"face edit {name} (--face-edit) must be between -1 and 1, not {value!r}")
    if job.face_edits and job.face_editor is None:
        raise UserError("--face-edit needs a face editor (--face-editor live_portrait)")
    _check_whole(job.deep_swapper_morph, 0, 100, "deep swapper morph", "--deep-swapper-morph")
    _check_whole(job.age_modifier_direction, -100, 100, "age modifier direction", "--age-modifier-direction")
    for colour, option in (
        (job.background_fill, "--background-fill"),
        (job.background_despill, "--background-despill"),
    ):
        if not isinstance(colour, tuple) or len(colour) != 4:
            raise UserError(f"{option} takes four numbers R,G,B,A, not {colour!r}")
        for v in colour:
            _check_whole(v, 0, 255, "a colour channel", option)
    _check_choice(job.frame_colorizer_size, COLORIZER_SIZES, "frame colorizer size", "--frame-colorizer-size")
    _check_whole(job.frame_colorizer_blend, 0, 100, "frame colorizer blend", "--frame-colorizer-blend")


def _check_masks(job: RenderJob) -> None:
    """The mask settings: known mask types and areas, a blur 0-1, four padding percents 0-100."""
    blur = job.mask_blur
    if not isinstance(blur, int | float) or isinstance(blur, bool) or not 0.0 <= blur <= 1.0:
        raise UserError(f"mask blur (--mask-blur) must be between 0 and 1, not {blur!r}")
    padding = job.mask_padding
    if (
        not isinstance(padding, tuple)
        or len(padding) != 4
        or any(type(p) is not int or not 0 <= p <= 100 for p in padding)
    ):
        raise UserError(f"mask padding (--mask-padding) must be 1 to 4 percents 0-100, not {padding!r}")
    if job.masks:
        from ffdesk.swap.masks import mask_types  # OpenCV behind these: loaded when they are set

        try:
            mask_types(job.masks)
        except ValueError as exc:
            raise UserError(f"--mask: {exc}") from None
    if job.mask_areas:
        from ffdesk.swap.areas import check_areas

        try:
            check_areas(job.mask_areas)
        except ValueError as exc:
            raise UserError(f"--mask-areas: {exc}") from None


def _check_choice(value: object, choices: tuple[str, ...], what: str, option: str) -> None:
    if value not in choices:
        raise UserError(f"unknown {what} ({option}) {value!r}; choose from {', '.join(choices)}")


LEGACY_EXTRA_KEYS = ("provider", "swap_scale")
"""The keys of the string pairs (`extra`) jobs carried before these settings were fields."""


def legacy_extra(provider: str, swap_scale: int) -> tuple[tuple[str, str], ...]:
    """The string pairs a job with these settings carried before they were fields."""
    pairs: list[tuple[str, str]] = []
    if provider != "auto":
        pairs.append(("provider", provider))
    if swap_scale != 1:
        pairs.append(("swap_scale", str(swap_scale)))
    return tuple(pairs)


def _box_kept(fields: dict[str, Any]) -> dict[str, Any]:
    """A stored job's fields with "box" added to masks named without it, when the job comes from
    before the mask settings (it has no mask_blur): until then a box lay under every mask."""
    masks = fields.get("masks")
    if "mask_blur" in fields or not isinstance(masks, list | tuple) or not masks:
        return fields
    if any(isinstance(m, str) and m.partition("=")[0].strip() == "box" for m in masks):
        return fields
    return {**fields, "masks": ["box", *masks]}


def upgrade_legacy_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """A stored job's fields with the old `extra` string pairs (provider, swap_scale) turned into
    the fields that replaced them; other fields pass through. `UserError` for pairs that cannot
    be read, an unknown key or a value that is not a number where one is needed. Masks named
    without the box in a job stored before the box could be left out get the box back."""
    fields = _box_kept(fields)
    if "extra" not in fields:
        return fields
    out = {k: v for k, v in fields.items() if k != "extra"}
    pairs = fields["extra"]
    if not isinstance(pairs, list | tuple) or not all(
        isinstance(p, list | tuple) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs
    ):
        raise UserError(f"render job: extra must be [key, value] string pairs, not {json.dumps(pairs)[:40]}")
    for key, value in pairs:
        if key not in LEGACY_EXTRA_KEYS:
            raise UserError(f"render job: unknown extra setting {key!r}")
        if key in out:
            continue  # the field itself wins over an old copy
        if key == "swap_scale":
            try:
                out[key] = int(value)
            except ValueError:
                raise UserError(f"render job: swap scale must be 1, 2 or 4, not {value!r}") from None
        else:
            out[key] = value
    return out


def span_frames(start: float | None, end: float | None, video: VideoInfo) -> int:
    """About how many frames the range from `start` to `end` (seconds; None: the clip's start or
    end) of `video` has: at least 1."""
    duration = video.duration_s
    span_end = min(end, duration) if end is not None and duration > 0 else duration
    span = max(0.0, span_end - (start or 0.0))
    if duration > 0 and video.frame_count > 0:
        return max(1, round(video.frame_count * span / duration))
    return max(1, round(span * (video.fps or 25.0)))
