"""A model pack's model calls on device tensors: swapper, occluders, parser, enhancer.

The device twin of the model calls in `ffdesk.pipeline.stages.models` (`ModelRender.swap_crops`,
`occlusion_masks`, the parser and the enhancer): the crops stay on the device from the warp to
the paste, and each call goes through the render's residency manager (loads, out-of-memory
recovery) in chunks of at most `cap` faces. Every chunk is padded to one of a few batch shapes
(`ffdesk.pipeline.batch_shapes.buckets`), and `warm_up` runs each model at every one of them before the
first frame, so the device never meets a new shape (cuDNN's algorithm search, 30-725 ms a shape
on an H200) in the middle of a render.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from ffdesk.faces.align import Affine
from ffdesk.faces.recognizer import Runner, accepts_batch
from ffdesk.faces.types import Face
from ffdesk.pipeline.batch_shapes import bucket, buckets
from ffdesk.swap import device_ops as dev
from ffdesk.swap.areas import area_regions
from ffdesk.swap.masks import NO_PADDING, Padding

if TYPE_CHECKING:
    import torch

    from ffdesk.pipeline.stages.device_redraw import DeviceFrames
    from ffdesk.pipeline.stages.models import ModelRender
    from ffdesk.swap.enhancer import EnhancerSpec

Feed = Callable[["torch.Tensor", Sequence[int]], dict[str, "torch.Tensor"]]
"""Stacked crops (padded to a batch shape) and their positions among the call's items -> the
model's named inputs."""
Pick = Callable[[list["torch.Tensor"], list[str]], "torch.Tensor"]
"""The model's outputs and their names -> the one tensor read (one row per item)."""
Warm = Callable[["torch.Tensor"], object]
"""How a model is run on crops (the device call a render makes)."""
SWAPPER = "swapper"
FP32_SWAPPER = "swapper:fp32"
"""The roles of the swapper at the render's precision and of the FP32 one the quality check uses."""
WARM_FACE = 128
"""The crop side `DeviceModels.warm_pixels` runs the pixel operations at."""


def _names(session: Runner) -> list[str]:
    return [o.name for o in getattr(session, "outputs", ())]


class DeviceModels:
    """The model calls of one model-pack render on `frames`' device."""

    def __init__(self, ctx: ModelRender, frames: DeviceFrames, cap: int) -> None:
        self.ctx = ctx
        self.frames = frames
        self.ops = frames.ops
        self.pixels = frames.pixels
        self.cap = max(1, cap)
        """The most faces a model call takes (the render's batch: its shapes are the powers of
        two below it and itself, `buckets`)."""
        self.caps: dict[str, int] = {}
        """Per model key, the most items a call takes: the largest batch the budget allows beside
        what stays resident (`plan_batches`); `cap` (times the tiles, for the swapper) until then."""
        self._sources: torch.Tensor | None = None

    def call(
        self, key: str, items: torch.Tensor, feed: Feed, pick: Pick, cap: int | None = None
    ) -> torch.Tensor:
        """One model over `items` (stacked along the first axis) in chunks of at most `cap`, each
        padded to its batch shape (one item a call for a file that fixes its batch at 1, as the
        published files do); the picked output's rows for the items, stacked. `feed` is told
        which items each chunk holds (their positions in `items`), for an input each item has
        of its own."""
        import torch

        model = self.ctx.keys.get(key, key)
        limit = self.caps.get(model, cap or self.cap)

        def run(session: Runner, chunk: Sequence[int]) -> list[torch.Tensor]:
            n = len(chunk)
            if n > 1 and not accepts_batch(session):  # a file that fixes its batch at 1
                return [row for i in chunk for row in run(session, [i])]
            x = dev.pad_batch(torch.stack([items[i] for i in chunk]), bucket(n, limit))
            outputs = dev.run_model(session, feed(x, chunk), self.pixels)
            return list(pick(outputs, _names(session))[:n])

        rows = self.ctx.manager.run_with_recovery(model, run, range(len(items)), max_batch=limit)
        return torch.stack(rows)

    # ------------------------------------------------------------------ the models
    def box(self, size: int, n: int, padding: Padding = NO_PADDING) -> torch.Tensor:
        """The box mask of `size` crops for `n` faces, at the job's blur (one constant, not copied)."""
        return self.ops.box_mask(size, self.ctx.job.mask_blur, padding).expand(n, size, size)

    def areas(self, faces: Sequence[Face], affines: Sequence[Affine], size: int) -> torch.Tensor:
        """Softened area masks of the faces' `size` crops: the landmark polygons are drawn on the
        host as the host path draws them (a few numbers a face in, one small copy of 0/1 bytes
        up a batch) and softened on the device."""
        import torch

        regions = area_regions(faces, affines, size, self.ctx.job.mask_areas).astype(np.uint8)
        hard = self.pixels.upload(regions, "area-masks").to(torch.float32)
        return self.ops.soften(hard)

    def sources(self) -> torch.Tensor:
        """The swapper's identity input of every source slot (`ModelRender.source_vectors`), one
        row a slot, on the device: uploaded together, once."""
        if self._sources is None:
            vectors = self.ctx.source_vectors
            assert vectors, "the sources are embedded before any swap"
            rows = np.stack([v.reshape(-1) if v.ndim <= 2 else v[0] for v in vectors])
            self._sources = self.pixels.constant(rows, "source")
        return self._sources

    def swap(
        self, crops: torch.Tensor, key: str | None = None, slots: Sequence[int] | None = None
    ) -> torch.Tensor:
        """Swapped crops (the device `ModelRender.swap_crops`), sub-pixel tiles included; `slots`:
        the source slot of each crop (`SwapPlan.sources`; None: the first). Crops of different
        slots share a call: each item takes its own row of the sources (every tile of a crop its
        crop's), which follows it into its chunk."""
        ctx = self.ctx
        spec, k = ctx.swap_spec, ctx.tile
        table = self.sources()
        per_tile = [s for s in (slots or [0] * len(crops)) for _ in range(k * k)]
        if len(per_tile) != len(crops) * k * k:
            raise ValueError(f"{len(crops)} crops but {len(per_tile) // (k * k)} source slots")

        def feed(x: torch.Tensor, chunk: Sequence[int]) -> dict[str, torch.Tensor]:
            picks = [per_tile[i] for i in chunk]
            picks += picks[-1:] * (x.shape[0] - len(picks))  # the padding takes a real source
            src = dev.take_rows(table, picks)
            return {spec.target_input: dev.swapper_input(x, spec, self.ops), spec.source_input: src}

        def pick(outputs: list[torch.Tensor], names: list[str]) -> torch.Tensor:
            return dev.swapper_output(dev.output(outputs, names, spec.output), spec, self.ops)

        tiles = dev.split_tiles(crops, k)
        out = self.call(key or ctx.swap_key, tiles, feed, pick, self.cap * k * k)
        return dev.merge_tiles(out, k)

    def occlusion(self, crops: torch.Tensor) -> torch.Tensor:
        """Softened occlusion masks of the crops: the minimum of the chosen occluders'."""
        import torch

        raws = [self.occluder(role, crops) for role in self.ctx.occluders]
        raw = raws[0] if len(raws) == 1 else torch.stack(raws).amin(dim=0)
        return self.ops.soften(raw)

    def occluder(self, role: str, crops: torch.Tensor, key: str | None = None) -> torch.Tensor:
        """One occluder's masks of the crops, before softening (`key`: a variant of its model)."""
        size = int(crops.shape[-1])
        side, name = self.ctx.mask_input(role, 256)

        def feed(x: torch.Tensor, _chunk: Sequence[int]) -> dict[str, torch.Tensor]:
            return {name: dev.occlusion_input(x, side)}

        def pick(outputs: list[torch.Tensor], _names: list[str]) -> torch.Tensor:
            return dev.occlusion_output(outputs[0], size)

        return self.call(key or role, crops, feed, pick)

    def regions(self, crops: torch.Tensor, key: str | None = None) -> torch.Tensor:
        """Softened face-region masks of the crops (the parser's chosen classes; `key`: a variant
        of its model)."""
        size = int(crops.shape[-1])
        side, name = self.ctx.mask_input("region", 512)
        classes = self.ctx.region_classes

        def feed(x: torch.Tensor, _chunk: Sequence[int]) -> dict[str, torch.Tensor]:
            return {name: dev.region_input(x, side, self.ops)}

        def pick(outputs: list[torch.Tensor], _names: list[str]) -> torch.Tensor:
            return dev.resize_masks(dev.region_from_logits(outputs[0], classes, self.ops), size)

        return self.ops.soften(self.call(key or "region", crops, feed, pick))

    def enhance(
        self, crops: torch.Tensor, spec: EnhancerSpec, blend: float, fidelity: float, key: str | None = None
    ) -> torch.Tensor:
        """Restored crops mixed with the originals by `blend` (the device `FaceEnhancer`; `key`: a
        variant of its model)."""
        weight = None
        if spec.weight_input:
            weight = self.ops.constant(("weight", fidelity), lambda: np.array([fidelity], np.float64))

        def feed(x: torch.Tensor, _chunk: Sequence[int]) -> dict[str, torch.Tensor]:
            feeds = {spec.input_name: dev.enhancer_input(x)}
            if spec.weight_input and weight is not None:
                feeds[spec.weight_input] = weight
            return feeds

        def pick(outputs: list[torch.Tensor], names: list[str]) -> torch.Tensor:
            return dev.enhancer_output(dev.output(outputs, names, spec.output))

        restored = self.call(key or "enhancer", crops, feed, pick)
        return dev.mix(restored, crops, min(max(blend, 0.0), 1.0))

    def psnr(self, a: torch.Tensor, b: torch.Tensor) -> list[float]:
        """Peak signal-to-noise ratio (dB) of each pair of crops; only the numbers come back."""
        mse = ((a - b) ** 2).flatten(1).mean(dim=1)
        return [
            math.inf if v == 0 else 10.0 * math.log10(255.0**2 / v)
            for v in self.pixels.numbers(mse, "quality")
        ]

    # ------------------------------------------------------------------ preparation
    def _key(self, role: str) -> str:
        """The model key of a role, read when it is needed (the swapper's changes once its
        precision variant is made)."""
        ctx = self.ctx
        if role == SWAPPER:
            return ctx.swap_key
        if role == FP32_SWAPPER:
            return ctx.fp32_swap_key
        return ctx.keys[role]

    def per_frame_models(self, enhancer: EnhancerSpec | None) -> list[tuple[str, str, int, int, Warm]]:
        """(role, label, crop side, items a face, how to run it on crops) of every model that runs
        on every frame's faces, in the order they run."""
        ctx = self.ctx
        side = ctx.swap_spec.size * ctx.tile
        tiles = ctx.tile * ctx.tile
        models: list[tuple[str, str, int, int, Warm]] = [
            (SWAPPER, f"{ctx.swapper.name}@{ctx.precision}", side, tiles, self.swap)
        ]
        for role in ctx.occluders:
            models.append((role, ctx.masks[role].name, side, 1, partial(self.occluder, role)))
        if "region" in ctx.masks:
            models.append(("region", ctx.masks["region"].name, side, 1, self.regions))
        if enhancer is not None:
            restore = partial(self.enhance, spec=enhancer, blend=1.0, fidelity=0.5)
            models.append(("enhancer", ctx.keys["enhancer"], enhancer.size, 1, restore))
        return models

    def plan_batches(self, enhancer: EnhancerSpec | None) -> dict[str, int]:
        """The largest batch each per-frame model may take under the budget, from what the
        models measured so far (a batch never grows back once lowered): all resident together in
        batch order, each alone in segment order. The FP32 swapper of the quality check runs
        alone on its samples."""
        ctx = self.ctx
        together = ctx.order is None or ctx.order.order == "batch"
        per_frame = self.per_frame_models(enhancer)
        wanted = {self._key(role): self.cap * per_face for role, _, _, per_face, _ in per_frame}
        chosen = ctx.manager.choose_batches(wanted, together=together)
        if ctx.fp32_swap_key != ctx.swap_key:
            per_face = ctx.tile * ctx.tile
            alone = ctx.manager.choose_batches({ctx.fp32_swap_key: self.cap * per_face}, together=False)
            chosen.update(alone)
        for key, batch in chosen.items():
            self.caps[key] = min(self.caps.get(key, batch), batch)
        return dict(self.caps)

    def warm_up_steps(
        self, enhancer: EnhancerSpec | None
    ) -> list[tuple[Callable[[], str], Callable[[], object]]]:
        """(what, how) for the pixel operations (`warm_pixels`), then every per-frame model at
        every batch shape it may run at, smallest first: each run measured
        (`ResidencyManager.measure_batch`), and before each larger shape the batches chosen again
        from what was measured, so a shape the budget does not allow is skipped. Nothing is made
        on the device until a step runs."""
        ctx = self.ctx
        models = self.per_frame_models(enhancer)
        # the quality check's FP32 swapper: also where `--precision auto` has yet to choose (its
        # warm-ups run after the choice, and skip themselves where FP32 was chosen)
        if ctx.precision != "fp32" or ctx.job.precision == "auto":
            side = ctx.swap_spec.size * ctx.tile
            fp32 = partial(self.swap, key=ctx.fp32_swap_key)
            models.append((FP32_SWAPPER, ctx.fp32_swap_key, side, ctx.tile * ctx.tile, fp32))
        steps: list[tuple[Callable[[], str], Callable[[], object]]] = [
            (lambda: "the pixel path", self.warm_pixels)
        ]
        for n in buckets(self.cap):
            for role, label, side, per_face, run in models:
                step = partial(self._warm, role, n, per_face, side, run, enhancer)
                steps.append((partial(self._warm_label, role, label, n * per_face), step))
        return steps

    def _warm_label(self, role: str, label: str, items: int) -> str:
        """A warm-up step's name as it runs: the swapper's at the precision chosen by then (under
        `--precision auto`, after the step list was made), and the quality check's FP32 swapper
        said to be the swapper's own where FP32 was chosen (its steps then run nothing)."""
        ctx = self.ctx
        if role == SWAPPER:
            label = f"{ctx.swapper.name}@{ctx.precision}"
        elif role == "enhancer":
            label = ctx.keys["enhancer"]
        elif role == FP32_SWAPPER:
            label = f"{ctx.swapper.name} in fp32 (the quality check)"
            if ctx.fp32_swap_key == ctx.swap_key:
                return f"{label} at batch {items}: FP32 swaps the frames, its warm-up is the swapper's"
        return f"{label} at batch {items}"

    def warm_pixels(self) -> None:
        """Every pixel operation of the device path once, on a small black frame, before the
        first frame: an upload through a pinned buffer and its event, the warp, a softened box
        mask, its box, the paste and a download. A GPU library that fails at any of them fails
        here, where `--pixels auto` still gives way to the host, not mid-render; and the kernels
        they load are loaded. With counts of its own: the render's transfers are the frames'."""
        from ffdesk.runtime.device import DevicePixels

        size = WARM_FACE
        pixels = DevicePixels(self.pixels.device)
        ops = dev.DeviceOps(pixels)
        frame = pixels.upload(np.zeros((2 * size, 2 * size, 3), np.uint8), "frame")
        affine = np.array([[1.0, 0.0, -size / 2], [0.0, 1.0, -size / 2]])
        crops, matrices = ops.warp_frames([frame], [affine[None]], size)
        masks = ops.soften(ops.box_mask(size)[None])
        rect = ops.mask_rects(masks)[0]
        ops.paste(frame, crops[0], masks[0], affine, rect, matrices[0])
        pixels.download(frame, "frame")

    def _warm(
        self, role: str, n: int, per_face: int, side: int, run: Warm, enhancer: EnhancerSpec | None
    ) -> object:
        """Run the model once on `n` black faces, measured, unless the budget leaves it a
        smaller batch."""
        import torch

        if role == FP32_SWAPPER and self.ctx.fp32_swap_key == self.ctx.swap_key:
            return None  # FP32 runs the frames: no quality check, its warm-ups are the swapper's
        key = self._key(role)
        if n > 1:
            self.plan_batches(enhancer)
        if n * per_face > self.caps.get(key, self.cap * per_face):
            return None
        crops = torch.zeros((n, 3, side, side), device=self.pixels.device)
        return self.ctx.manager.measure_batch(key, n * per_face, partial(run, crops))
