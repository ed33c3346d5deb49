"""A model pack's model calls on device tensors: swapper, occluders, parser, enhancer.

The device twin of the model calls in `ffdesk.pipeline.stages.models` (`ModelRender.swap_crops`,
`occlusion_masks`, the parser and the enhancer): the crops stay on the device from the warp to
the paste, and each call goes through the render's residency manager (loads, out-of-memory
recovery) in chunks of at most `cap` faces. Every chunk is padded to one of a few batch shapes
(`ffdesk.swap.device_ops.buckets`), and `warm_up` runs each model at every one of them before the
first frame, so the device never meets a new shape (cuDNN's algorithm search, 30-725 ms a shape
on an H200) in the middle of a render.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from ffdesk.faces.recognizer import Runner
from ffdesk.swap import device_ops as dev

if TYPE_CHECKING:
    import torch

    from ffdesk.pipeline.stages.device_redraw import DeviceFrames
    from ffdesk.pipeline.stages.models import ModelRender
    from ffdesk.swap.enhancer import EnhancerSpec

Feed = Callable[["torch.Tensor"], dict[str, "torch.Tensor"]]
"""Stacked crops (padded to a batch shape) -> the model's named inputs."""
Pick = Callable[[list["torch.Tensor"], list[str]], "torch.Tensor"]
"""The model's outputs and their names -> the one tensor read (one row per item)."""


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
        self._source: torch.Tensor | None = None

    def call(
        self, key: str, items: torch.Tensor, feed: Feed, pick: Pick, cap: int | None = None
    ) -> torch.Tensor:
        """One model over `items` (stacked along the first axis) in chunks of at most `cap`, each
        padded to its batch shape; the picked output's rows for the items, stacked."""
        import torch

        limit = cap or self.cap

        def run(session: Runner, chunk: Sequence[torch.Tensor]) -> list[torch.Tensor]:
            n = len(chunk)
            x = dev.pad_batch(torch.stack(list(chunk)), dev.bucket(n, limit))
            outputs = dev.run_model(session, feed(x), self.pixels)
            return list(pick(outputs, _names(session))[:n])

        rows = self.ctx.manager.run_with_recovery(
            self.ctx.keys.get(key, key), run, list(items), max_batch=limit
        )
        return torch.stack(rows)

    # ------------------------------------------------------------------ the models
    def box(self, size: int, n: int) -> torch.Tensor:
        """The box mask of `size` crops for `n` faces (one constant, not copied)."""
        return self.ops.box_mask(size).expand(n, size, size)

    def source(self) -> torch.Tensor:
        """The swapper's identity input on the device (uploaded once)."""
        if self._source is None:
            vector = self.ctx.source_vector
            assert vector is not None, "the source is embedded before any swap"
            self._source = self.pixels.constant(vector, "source")
        return self._source

    def swap(self, crops: torch.Tensor, key: str | None = None) -> torch.Tensor:
        """Swapped crops (the device `ModelRender.swap_crops`), sub-pixel tiles included."""
        ctx = self.ctx
        spec, k = ctx.swap_spec, ctx.tile
        one = self.source()
        one = one.reshape(1, -1) if one.ndim <= 2 else one[:1]

        def feed(x: torch.Tensor) -> dict[str, torch.Tensor]:
            src = one.expand(x.shape[0], *one.shape[1:]).contiguous()
            return {spec.target_input: dev.swapper_input(x, spec), spec.source_input: src}

        def pick(outputs: list[torch.Tensor], names: list[str]) -> torch.Tensor:
            return dev.swapper_output(dev.output(outputs, names, spec.output), spec)

        tiles = dev.split_tiles(crops, k)
        out = self.call(key or ctx.swap_key, tiles, feed, pick, self.cap * k * k)
        return dev.merge_tiles(out, k)

    def occlusion(self, crops: torch.Tensor) -> torch.Tensor:
        """Softened occlusion masks of the crops: the minimum of the chosen occluders'."""
        import torch

        size = int(crops.shape[-1])
        raws = []
        for role in self.ctx.occluders:
            side, name = self.ctx.mask_input(role, 256)

            def feed(x: torch.Tensor, side: int = side, name: str = name) -> dict[str, torch.Tensor]:
                return {name: dev.occlusion_input(x, side)}

            def pick(outputs: list[torch.Tensor], _names: list[str]) -> torch.Tensor:
                return dev.occlusion_output(outputs[0], size)

            raws.append(self.call(role, crops, feed, pick))
        raw = raws[0] if len(raws) == 1 else torch.stack(raws).amin(dim=0)
        return self.ops.soften(raw)

    def regions(self, crops: torch.Tensor) -> torch.Tensor:
        """Softened face-region masks of the crops (the parser's chosen classes)."""
        size = int(crops.shape[-1])
        side, name = self.ctx.mask_input("region", 512)
        classes = self.ctx.region_classes

        def feed(x: torch.Tensor) -> dict[str, torch.Tensor]:
            return {name: dev.region_input(x, side)}

        def pick(outputs: list[torch.Tensor], _names: list[str]) -> torch.Tensor:
            return dev.resize_masks(dev.region_from_logits(outputs[0], classes), size)

        return self.ops.soften(self.call("region", crops, feed, pick))

    def enhance(self, crops: torch.Tensor, spec: EnhancerSpec, blend: float, fidelity: float) -> torch.Tensor:
        """Restored crops mixed with the originals by `blend` (the device `FaceEnhancer`)."""
        import numpy as np

        weight = None
        if spec.weight_input:
            weight = self.ops.constant(("weight", fidelity), lambda: np.array([fidelity], np.float64))

        def feed(x: torch.Tensor) -> dict[str, torch.Tensor]:
            feeds = {spec.input_name: dev.enhancer_input(x)}
            if spec.weight_input and weight is not None:
                feeds[spec.weight_input] = weight
            return feeds

        def pick(outputs: list[torch.Tensor], names: list[str]) -> torch.Tensor:
            return dev.enhancer_output(dev.output(outputs, names, spec.output))

        restored = self.call("enhancer", crops, feed, pick)
        return dev.mix(restored, crops, min(max(blend, 0.0), 1.0))

    def psnr(self, a: torch.Tensor, b: torch.Tensor) -> list[float]:
        """Peak signal-to-noise ratio (dB) of each pair of crops; only the numbers come back."""
        mse = ((a - b) ** 2).flatten(1).mean(dim=1)
        return [
            math.inf if v == 0 else 10.0 * math.log10(255.0**2 / v)
            for v in self.pixels.numbers(mse, "quality")
        ]

    # ------------------------------------------------------------------ preparation
    def warm_up_steps(self, enhancer: EnhancerSpec | None) -> list[tuple[str, Callable[[], object]]]:
        """(what, how) for every per-frame model at every batch shape it will run at. Nothing is
        made on the device until a step runs."""
        ctx = self.ctx
        side = ctx.swap_spec.size * ctx.tile
        steps: list[tuple[str, Callable[[], object]]] = []
        # the swapper at the render's precision (its variant is made by then), and the FP32 one
        # the quality check compares it with
        swappers: dict[str | None, str] = {None: f"{ctx.swapper.name}@{ctx.precision}"}
        if ctx.precision != "fp32":
            swappers[ctx.fp32_swap_key] = ctx.fp32_swap_key
        for n in dev.buckets(self.cap):
            for key, label in swappers.items():
                steps.append((f"{label} at batch {n}", partial(self._on_zeros, n, side, self.swap, key)))
            if ctx.occluders:
                steps.append((f"occlusion at batch {n}", partial(self._on_zeros, n, side, self.occlusion)))
            if "region" in ctx.masks:
                name = ctx.masks["region"].name
                steps.append((f"{name} at batch {n}", partial(self._on_zeros, n, side, self.regions)))
            if enhancer is not None:
                size, label = enhancer.size, ctx.keys["enhancer"]
                restore = partial(self.enhance, spec=enhancer, blend=1.0, fidelity=0.5)
                steps.append((f"{label} at batch {n}", partial(self._on_zeros, n, size, restore)))
                if ctx.occluders:
                    what = f"occlusion at {size} px, batch {n}"
                    steps.append((what, partial(self._on_zeros, n, size, self.occlusion)))
        return steps

    def _on_zeros(self, n: int, side: int, call: Callable[..., object], *args: object) -> object:
        """`call` on `n` black crops of `side` pixels made on the device now."""
        import torch

        return call(torch.zeros((n, 3, side, side), device=self.pixels.device), *args)
