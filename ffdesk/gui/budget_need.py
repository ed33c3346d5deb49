"""What the chosen models need of the memory budget, counted as a render counts it.

A model-pack render refuses, before its first frame, a budget smaller than its largest model
(beside the device's own reservation on a GPU: `ResidencyManager.plan`); an embedded-swap render
on the CPU refuses one smaller than the embedded models and the frames it holds
(`EmbeddedBudget`); a trained swapper and FaceFusion's other processors (`with_processors`) load
their models through a residency manager too, which refuses to load one the budget cannot hold
beside what it already holds (the device's reservation; on the CPU the embedded models and the
frames). `NeedCounter` works out the models' part of that before anything is queued: the same
models (`pack_choices`, `processor_model_choices`, `TrainedSwap`), sized by the same residency
manager from the same remembered footprints (else their files; the embedded models, never
measured yet, are measured once as their render measures them), so the memory budget control
can say which model the budget is too small for. It reads model files: `BudgetNeed` runs it on
a plain thread and hands the answer to the GUI thread.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal

from ffdesk.errors import UserError
from ffdesk.gui.processors import PROCESSOR_KINDS, processor_job_fields
from ffdesk.units import format_bytes

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ffdesk.gui.memory import AppMemory
    from ffdesk.gui.models import SessionModel
    from ffdesk.pipeline.job import Provider, RenderJob
    from ffdesk.pipeline.plan import SwapKind
    from ffdesk.pipeline.stages.models import ModelChoice
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import ResidencyManager
    from ffdesk.types import Mode, Precision

MIB = 2**20
EMBEDDED_MODELS = "the embedded models"
"""How a need and a render's refusal name the embedded swap's models."""
WAIT_S = 3.0
"""How long queueing waits for a count still running before it queues without it (the render
then refuses the budget itself, in the same words): the window's thread waits meanwhile."""
RECOUNT_MS = 1000
"""After the window's models change, the count is made again this much later (a model measured
for the first time takes its measured footprint from then on)."""
SAMPLE_FACE = ("sample", "grace_hopper.jpg")
"""The face photo the embedded models are first run on where no render has measured them."""


@dataclass(frozen=True)
class ModelsAsked:
    """The settings a render's models follow: which face models a render of them loads (the
    enhancer only in final mode: a preview-mode render leaves it off), which of FaceFusion's
    other processors it runs, from which folder, on which device."""

    swapper: str = ""
    recognizer: str = ""
    detector: str = ""
    enhancer: str = ""
    masks: tuple[str, ...] = ()
    models_dir: Path | None = None
    provider: Provider = "auto"
    processors: tuple[tuple[str, str], ...] = ()
    """(`RenderJob` field, model) of each other processor the render runs (`PROCESSOR_KINDS`;
    the face enhancer is `enhancer`)."""
    mode: Mode = "final"
    precision: Precision = "auto"
    """What a trained swapper runs at (its file and variant); a model pack's are counted at FP32,
    as its plan counts them."""
    swaps: bool = True
    """A face is swapped in (a source photo or a face map): without one a model pack loads
    nothing (a trained swapper needs none)."""

    def job(self) -> RenderJob:
        """A render job that loads these models (`pack_choices` and `processor_model_choices`
        read what it names; a stand-in source where it swaps)."""
        from ffdesk.pipeline.job import RenderJob

        job = RenderJob(
            target=Path("need"),
            output=Path("need.mp4"),
            sources=(Path("need.jpg"),) if self.swaps else (),
            mode=self.mode,
            precision=self.precision,
            swapper=self.swapper or None,
            recognizer=self.recognizer or None,
            detector=self.detector or None,
            enhancer=self.enhancer or None,
            masks=self.masks,
            models_dir=self.models_dir,
            provider=self.provider,
        )
        models: dict[str, Any] = dict(self.processors)
        return replace(job, **models)

    @classmethod
    def of_job(cls, job: RenderJob) -> ModelsAsked | None:
        """What `job` loads; None when it loads no model (no face swapped, no swapper, no
        processor)."""
        asked = cls.of(
            job.swapper or "",
            job.recognizer or "",
            job.detector or "",
            job.enhancer if job.mode != "preview" and job.enhancer else "",
            job.masks,
            job.models_dir,
            job.provider,
            processors=_processors((kind, getattr(job, kind)) for kind in PROCESSOR_KINDS),
            mode=job.mode,
            precision=job.precision,
            swaps=bool(job.sources or job.face_map),
        )
        if not (asked.swaps or asked.swapper or asked.enhancer or asked.processors):
            return None
        return asked

    @classmethod
    def of_session(cls, session: SessionModel) -> ModelsAsked:
        """What a render of `session`'s settings loads (with a source to swap in), as
        `SessionModel.build_job` would set it."""
        s = session.settings
        masks: tuple[str, ...] = tuple(session.mask_job_fields({})["masks"]) if s.swapper else ()
        enhancer = s.enhancer if s.mode != "preview" else ""
        fields = processor_job_fields(s, session.processor_states())
        processors = _processors((kind, fields.get(kind)) for kind in PROCESSOR_KINDS)
        return cls.of(
            s.swapper,
            s.recognizer,
            s.detector,
            enhancer,
            masks,
            session.models_dir,
            processors=processors,
            mode=s.mode,
            precision=s.precision,
        )

    @classmethod
    def of(
        cls,
        swapper: str,
        recognizer: str,
        detector: str,
        enhancer: str,
        masks: tuple[str, ...],
        models_dir: Path | None,
        provider: Provider = "auto",
        *,
        processors: tuple[tuple[str, str], ...] = (),
        mode: Mode = "final",
        precision: Precision = "auto",
        swaps: bool = True,
    ) -> ModelsAsked:
        """Only what the models follow: the embedded swap (no `swapper`) has none of the pack's
        (its face enhancer is a processor's stage of its own) and no precision."""
        if not swapper:
            return cls(
                enhancer=enhancer,
                models_dir=models_dir,
                provider=provider,
                processors=processors,
                mode=mode,
                swaps=swaps,
            )
        return cls(
            swapper, recognizer, detector, enhancer, tuple(masks), models_dir, provider, processors, mode,
            precision, swaps,
        )  # fmt: skip


def _processors(fields: Iterable[tuple[str, object]]) -> tuple[tuple[str, str], ...]:
    """The (field, model) pairs of the processors turned on (a model named)."""
    return tuple((kind, str(model)) for kind, model in fields if model)


@dataclass(frozen=True)
class ModelNeed:
    """The least a budget must hold for a render of the models asked for to start: its largest
    model (`name`, `model_bytes`) beside what using the device costs by itself."""

    name: str
    model_bytes: int
    reserved_bytes: int = 0
    """The device's own (the CUDA context: measured, remembered or guessed; 0 on the CPU)."""
    embedded: bool = False
    """The embedded swap's models, counted together."""
    on_cpu: bool = True
    """The budget is this process's memory: a render holds its frames in it beside the models
    (which it counts as it plans its batches, so the budget must be more than the need)."""
    beside_embedded: int = 0
    """The embedded models beside it in the same budget (on the CPU, an embedded swap's pool,
    which the processors after it join)."""

    @property
    def bytes(self) -> int:
        return self.model_bytes + self.reserved_bytes + self.beside_embedded

    def fits(self, budget_bytes: int | None) -> bool:
        """Whether `budget_bytes` (None: no budget) holds it."""
        return budget_bytes is None or self.bytes <= budget_bytes

    def refusal(self, budget_bytes: int) -> str:
        """The one line a render refuses `budget_bytes` with (the command line's words)."""
        if self.embedded or budget_bytes <= self.beside_embedded:  # the embedded swap's own, first
            from ffdesk.pipeline.stages.embedded import embedded_too_small

            return embedded_too_small(budget_bytes, self.beside_embedded or self.model_bytes)
        from ffdesk.runtime.residency import too_small

        held = self.beside_embedded
        return too_small(budget_bytes, self.name, self.model_bytes, self.reserved_bytes, held, held)

    def shortfall(self, budget_bytes: int | None) -> str:
        """What the memory budget control says of `budget_bytes` ("" when it holds the need)."""
        if self.fits(budget_bytes):
            return ""
        least = f"{'more than' if self.on_cpu else 'at least'} {math.ceil(self.bytes / MIB)} MiB"
        if self.embedded:
            return (
                f"Too small for {EMBEDDED_MODELS}: they need {format_bytes(self.model_bytes)}, and a "
                f"render holds its frames beside them. Renders would stop at once: set {least}."
            )
        if self.beside_embedded:
            beside = (
                f", beside {EMBEDDED_MODELS} ({format_bytes(self.beside_embedded)}), and a render holds "
                "its frames beside them"
            )
        elif self.reserved_bytes:
            beside = f", beside the device's own {format_bytes(self.reserved_bytes)} (the CUDA context)"
        else:
            beside = ", and a render holds its frames beside it" if self.on_cpu else ""
        return (
            f"Too small for {self.name}, the largest of the chosen models: it needs "
            f"{format_bytes(self.model_bytes)}{beside}. The preview and renders would stop: set "
            f"{least} or pick a smaller model."
        )


@dataclass(frozen=True)
class _Stamp:
    """A file as it was read: a cached answer about it holds while this is unchanged."""

    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> _Stamp | None:
        try:
            st = path.stat()
        except OSError:
            return None
        return cls(st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class _Chosen:
    """The model files a render of one `ModelsAsked` registers, found and checked, with the
    stamps of the models folder and of those files as they were then."""

    pack: tuple[ModelChoice, ...]
    processors: tuple[ModelChoice, ...]
    stamps: tuple[_Stamp | None, ...]


class NeedCounter:
    """Works out `ModelNeed`s in the runtime environment `env`. Thread-safe; reads model files
    (their fingerprints, the checks a render makes of them): call it off the GUI thread."""

    def __init__(self, env: RuntimeEnv, app: Callable[[], ResidencyManager | None] | None = None) -> None:
        """`app`: gives the window's shared residency manager when it was made (`AppMemory.made`):
        its footprints and measured reservation are what the window's renders plan with; without
        one, a manager of the count's own reads them as a render's own would."""
        self.env = env
        self.app = app
        self._lock = threading.Lock()
        self._chosen: dict[tuple[ModelsAsked, bool], _Chosen] = {}
        self._prints: dict[Path, tuple[str, _Stamp | None]] = {}
        self._measured: dict[tuple[Path, ...], int] = {}
        """The embedded models as measured here (`measure_embedded`), by their files."""

    def need(self, asked: ModelsAsked) -> ModelNeed | None:
        """What a render of `asked` needs of the budget: the largest model it loads through a
        residency manager (a model pack's, a trained swapper, another processor's), beside the
        embedded models where an embedded swap on the CPU holds them in the same budget; else
        the embedded models alone. None when nothing is counted before it starts (the embedded
        models off the CPU, where the budget is the GPU's, with no other model), or when a
        model cannot be found or fails its checks (the render then says so, not the budget)."""
        from ffdesk.pipeline.plan import swap_kind
        from ffdesk.pipeline.providers import job_device
        from ffdesk.runtime.files import resolve_models_dir

        with self._lock:
            try:
                folder = resolve_models_dir(asked.models_dir, self.env)
                kind = swap_kind(asked.job(), self.env)  # the face stages its render builds
                models = self._models(asked, folder, kind)
                on_cpu = job_device(asked.provider, self.env) == "cpu"
                embedded = self._embedded(asked) if on_cpu and kind == "embedded" else None
            except (UserError, OSError):
                return None
        if models is None or embedded is None:
            return models or embedded
        return replace(models, beside_embedded=embedded.model_bytes)

    # -- models loaded through a residency manager ---------------------------------------------
    def _models(self, asked: ModelsAsked, folder: Path, kind: SwapKind) -> ModelNeed | None:
        """The largest model a render of `asked` registers with a residency manager: a model
        pack's where it swaps (registered as the render registers them before its plan,
        `ModelRender`), a trained swapper (`TrainedSwap`), the other processors'
        (`ProcessorModels.register`), none of them loaded; the first of the largest, as `plan`
        names it. None when it registers none."""
        from ffdesk.pipeline.providers import job_device, session_options
        from ffdesk.pipeline.stages.placement import ProcessorModels
        from ffdesk.runtime.footprints import FootprintStore
        from ffdesk.runtime.residency import OnnxLoader, ResidencyManager

        trained = kind == "trained"
        chosen = self._choices(asked, folder, pack=kind == "pack")
        if not (chosen.pack or chosen.processors or trained):
            return None
        device = job_device(asked.provider, self.env)
        app: ResidencyManager | None = self.app() if self.app is not None else None
        if app is not None and app.device != device:
            app = None
        store = app.footprints if app is not None else FootprintStore(env=self.env)
        manager = ResidencyManager(None, device, footprints=store, env=self.env)
        try:
            sizes = [self._trained(asked, folder)] if trained else []
            options = session_options(asked.provider, device, self.env)
            for choice in chosen.pack:
                key = f"{choice.name}@fp32"
                loader = OnnxLoader(choice.path, options, name=choice.name, precision="fp32")
                manager.register(key, loader, fingerprint=self._fingerprint(choice.path), warmup=False)
                sizes.append((choice.name, manager.expected_bytes(key)))
            fp32 = session_options(asked.provider, device, self.env, "fp32")
            processors = ProcessorModels(manager, fp32, owns=False)  # as each processor's stage
            for choice in chosen.processors:
                sizes.append((choice.name, manager.expected_bytes(processors.register(choice))))
            reserved = (app or manager).expected_reservation()
        finally:
            manager.close()
        name, nbytes = max(sizes, key=lambda s: s[1])
        return ModelNeed(name, nbytes, reserved, on_cpu=device == "cpu")

    def _trained(self, asked: ModelsAsked, folder: Path) -> tuple[str, int]:
        """(name, bytes) of a trained swapper as its render registers it (`TrainedSwap`: the file
        its mode and precision pick, `chosen_model`, in the variant that runs), never loaded. An
        FP16 variant not made yet is not made here (a whole model converted in the window's
        process): it counts at half the FP32 file's, as its own file would."""
        from ffdesk.pipeline.stages.trained import TrainedSwap, chosen_model, read_contract
        from ffdesk.runtime.precision import cached_variants

        path = chosen_model(asked.swapper, folder, asked.mode, asked.precision)
        contract = read_contract(path)
        if contract is None:
            raise UserError(f"{path}: not a model exported by `ffdesk train`")
        precision, halve = asked.precision, False
        if precision == "fp16" and "fp16" not in cached_variants(path, self.env.variants_dir):
            precision, halve = "fp32", True
        model = TrainedSwap(path, contract, None, asked.provider, env=self.env, precision=precision)
        try:
            nbytes = model.manager.expected_bytes(model.key)
            return model.key.split("@")[0], nbytes // 2 if halve else nbytes
        finally:
            model.close()

    def _choices(self, asked: ModelsAsked, folder: Path, *, pack: bool) -> _Chosen:
        """The models a render of `asked` registers, in its order: with `pack`, the pack's
        (`pack_choices`); the other processors' (`processor_model_choices`); found and checked
        as the render checks them, and checked again only when a file of theirs or the models
        folder changed."""
        from ffdesk.pipeline.plan import processor_model_choices
        from ffdesk.pipeline.stages.models import pack_choices
        from ffdesk.runtime.catalog import load_catalog

        def stamps(choices: tuple[ModelChoice, ...]) -> tuple[_Stamp | None, ...]:
            return (_Stamp.of(folder), *(_Stamp.of(c.path) for c in choices))

        known = self._chosen.get((asked, pack))
        if known is not None and stamps((*known.pack, *known.processors)) == known.stamps:
            return known
        job = asked.job()
        packed = (
            tuple(c for _role, c in pack_choices(job, folder, load_catalog()).registered()) if pack else ()
        )
        processors = tuple(processor_model_choices(job, env=self.env))
        chosen = _Chosen(packed, processors, stamps((*packed, *processors)))
        self._chosen[(asked, pack)] = chosen
        return chosen

    def _fingerprint(self, path: Path) -> str:
        """`file_fingerprint` of `path`, read again only when the file changed."""
        from ffdesk.runtime.integrity import file_fingerprint

        stamp = _Stamp.of(path)
        known = self._prints.get(path)
        if known is not None and stamp is not None and known[1] == stamp:
            return known[0]
        printed = file_fingerprint(path)
        self._prints[path] = (printed, stamp)
        return printed

    # -- the embedded swap ---------------------------------------------------------------------
    def _embedded(self, asked: ModelsAsked) -> ModelNeed | None:
        """On the CPU, the embedded models as an embedded render counts them before its first
        frame: the largest of their last measurements, never less than their files. Where no
        render has measured them yet, they are measured here once, as a render measures them
        (`measure_embedded`): their files alone are a fraction of what they take."""
        from ffdesk.pipeline.providers import job_device
        from ffdesk.pipeline.stages.embedded import embedded_footprint_key
        from ffdesk.runtime.footprints import FootprintStore

        if job_device(asked.provider, self.env) != "cpu":
            return None
        store = FootprintStore(env=self.env)  # read now, as each embedded render reads it
        sets = _embedded_file_sets(asked)
        for files in sets:  # the way the mesh runs first, then the other
            remembered = store.get(embedded_footprint_key(files))
            if remembered is not None:
                break
        else:
            files, remembered = sets[0], None
            if files not in self._measured:
                try:
                    self._measured[files] = measure_embedded(asked.job())
                except Exception:  # noqa: BLE001 - a file the runtime refuses: its size, and the render says why
                    log.warning("measuring the embedded models failed", exc_info=True)
                    self._measured[files] = 0
        weights = sum(p.stat().st_size for p in files)
        # measured here only while no render has: a render's own figure is the truer one (this
        # process's memory moves with the preview and the decoder too)
        measured = self._measured.get(files, 0) if remembered is None else 0
        return ModelNeed(EMBEDDED_MODELS, max(weights, remembered or 0, measured), embedded=True)


def measure_embedded(job: RenderJob) -> int:
    """What the embedded models of a render of `job` take, measured as that render measures them
    before its first frame (`embedded_stages`): this process's memory before and after they are
    made and first run on a face photo (the bundled sample), never less than their files. Kept
    in this process only: a render's own measurement is what the footprint store remembers."""
    from ffdesk.media.images import read_image
    from ffdesk.pipeline.stages.front import job_analyser, source_face
    from ffdesk.runtime.memprobe import ProcessMemoryProbe
    from ffdesk.runtime.residency_policy import measured_footprint
    from ffdesk.runtime.resources import resource_path

    probe = ProcessMemoryProbe("cpu")
    before = probe.used()
    analyser = job_analyser(job)
    photo_path = resource_path(*SAMPLE_FACE)
    if photo_path.is_file():
        with contextlib.suppress(UserError):  # (no face found: what was made still counts)
            source_face(analyser, read_image(photo_path), photo_path.name, None)
    after = probe.used()
    return measured_footprint(before, after, analyser.weights_bytes)


def _embedded_file_sets(asked: ModelsAsked) -> list[tuple[Path, ...]]:
    """The files the embedded analyser of a render of `asked` runs (`FaceAnalyser.model_files`,
    from `embedded_models_dir`): with the mesh on LiteRT where it is installed and its file is
    there, else on ONNX Runtime; the other way second (LiteRT that does not load falls back)."""
    from ffdesk.faces.analyser import DETECTOR_FILE, MESH_FILE, NEAR_DETECTOR_FILE
    from ffdesk.faces.mesh_model import TFLITE_FILE, litert_available
    from ffdesk.pipeline.stages.front import embedded_models_dir
    from ffdesk.runtime.resources import resource_path

    folder = embedded_models_dir(asked.job()) or resource_path("models")
    meshes = [MESH_FILE]
    if (folder / TFLITE_FILE).is_file():
        meshes.insert(0 if litert_available() else 1, TFLITE_FILE)
    return [(folder / DETECTOR_FILE, folder / mesh, folder / NEAR_DETECTOR_FILE) for mesh in meshes]


class BudgetNeed(QObject):
    """What the models `session`'s settings choose need of the memory budget (`need`), counted
    on a plain thread whenever the choice changes, and again a while after the window's models
    change (`AppMemory.changed`: a model measured for the first time). `changed` says the need
    or the budget changed; `shortfall()` is what the control then says."""

    changed = Signal()
    _counted = Signal(object, object)
    """(ModelsAsked, ModelNeed | None), from the counting thread."""

    def __init__(
        self,
        session: SessionModel,
        env: RuntimeEnv,
        memory: AppMemory | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.session = session
        self.counter = NeedCounter(env, memory.made if memory is not None else None)
        self.asked = ModelsAsked.of_session(session)
        self.need: ModelNeed | None = None
        """The need of `asked` (None: not counted yet, or nothing to count)."""
        self._lock = threading.Lock()
        self._known: dict[ModelsAsked, ModelNeed | None] = {}
        self._counting: dict[ModelsAsked, threading.Thread] = {}
        self._again: set[ModelsAsked] = set()
        """Counts in flight that began before a recount: counted again when they end."""
        self._stopped = False
        self._recount = QTimer(self)
        self._recount.setSingleShot(True)
        self._recount.setInterval(RECOUNT_MS)
        self._recount.timeout.connect(self.recount)
        self._counted.connect(self._on_counted)
        session.settingsChanged.connect(self._follow)
        session.targetChanged.connect(self._follow)  # (the clip decides whether a lip syncer runs)
        if memory is not None:
            memory.changed.connect(self._recount.start)
        self._follow()

    def shortfall(self) -> str:
        """What the control says of the budget set now ("" when it holds the need, or there is
        no budget, or nothing is known to need more)."""
        budget = self.session.settings.memory_budget_bytes
        return self.need.shortfall(budget) if self.need is not None else ""

    def refusal(self, job: RenderJob, wait_s: float = WAIT_S) -> str | None:
        """The line a render of `job` would refuse its budget with, before any frame (None when
        it would not, as far as is known within `wait_s`: a count still running is waited for)."""
        asked = ModelsAsked.of_job(job)
        if job.memory_budget is None or asked is None:
            return None
        self._count_unless_known(asked)
        deadline = time.monotonic() + wait_s
        while True:
            with self._lock:
                known, need = asked in self._known, self._known.get(asked)
                thread = self._counting.get(asked)
            left = deadline - time.monotonic()
            if known or thread is None or not thread.is_alive() or left <= 0:
                break
            thread.join(left)
        return None if need is None or need.fits(job.memory_budget) else need.refusal(job.memory_budget)

    def recount(self) -> None:
        """Count again what was counted (footprints measured since are taken)."""
        with self._lock:
            self._known.clear()
            self._again.update(self._counting)
        if self.session.settings.memory_budget_bytes is not None:
            self._count(self.asked)

    def _follow(self) -> None:
        """The models and the budget set now: their need counted where a budget is set (with
        none there is nothing to say, and a window opened without one does not load ONNX
        Runtime for it)."""
        asked = ModelsAsked.of_session(self.session)
        if asked != self.asked:
            self.asked = asked
            with self._lock:
                self.need = self._known.get(asked)
        if self.session.settings.memory_budget_bytes is not None:
            self._count_unless_known(asked)
        self.changed.emit()  # (the budget may be what changed)

    def _count_unless_known(self, asked: ModelsAsked) -> None:
        with self._lock:
            known = asked in self._known
        if not known:
            self._count(asked)

    def _count(self, asked: ModelsAsked) -> None:
        with self._lock:
            if self._stopped or asked in self._counting:
                return
            thread = threading.Thread(target=self._run, args=(asked,), name="ffdesk-budget-need", daemon=True)
            self._counting[asked] = thread
        thread.start()

    def _run(self, asked: ModelsAsked) -> None:
        need: ModelNeed | None = None
        try:
            need = self.counter.need(asked)
        except Exception:  # noqa: BLE001 - a model the runtime refuses: nothing known, said by the render
            log.warning("counting what the models need failed", exc_info=True)
        with self._lock:
            self._counting.pop(asked, None)
            again = asked in self._again
            self._again.discard(asked)
            if not again:
                self._known[asked] = need
        if again:
            self._count(asked)
            return
        with contextlib.suppress(RuntimeError):  # the window went while it counted (past `stop`'s wait)
            self._counted.emit(asked, need)

    def _on_counted(self, asked: ModelsAsked, need: ModelNeed | None) -> None:
        if asked == self.asked and need != self.need:
            self.need = need
            self.changed.emit()

    def wait(self, timeout_s: float | None = None) -> None:
        """Let the counts in flight finish."""
        with self._lock:
            threads = list(self._counting.values())
        for thread in threads:
            thread.join(timeout_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Start no more counts and wait for those in flight (window shutdown)."""
        with self._lock:
            self._stopped = True
        self._recount.stop()
        self.wait(timeout_s)
