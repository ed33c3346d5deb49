"""The model-pack pixel work on torch tensors: the device twin of the host (numpy/OpenCV) code.

Each function here does on a torch device what a host function does with numpy and OpenCV, with
the same conventions, so the two give the same pixels within a level of rounding (tested against
each other on the CPU):

| device | host |
|---|---|
| `DeviceOps.warp` | `ffdesk.faces.align.warp_face` (bilinear, replicated border, rounded) |
| `DeviceOps.paste` | `ffdesk.swap.blend.paste_face` (same frame box, bilinear un-warp, alpha blend) |
| `swapper_input` / `swapper_output`, `split_tiles` / `merge_tiles` | `ffdesk.swap.onnx_swapper` |
| `enhancer_input` / `enhancer_output` / `mix` | `ffdesk.swap.enhancer` |
| `occlusion_input`, `region_input`, `region_from_logits`, `DeviceOps.soften` | `ffdesk.swap.masks` |
| `DeviceOps.box_mask` (a constant) | `ffdesk.swap.masks.box_mask` |

Crops are N x 3 x S x S float32 tensors holding whole numbers 0..255 (the values a uint8 crop
would hold); masks are N x S x S float32 in [0, 1]. Nothing here moves pixels to the host: the
few numbers a paste needs (each mask's box) come back through `DevicePixels.numbers`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.recognizer import Runner
from ffdesk.runtime.device import DevicePixels
from ffdesk.swap.blend import paste_box
from ffdesk.swap.masks import DEFAULT_BLUR, IMAGENET_MEAN, IMAGENET_STD, NO_PADDING, Padding, box_mask

if TYPE_CHECKING:
    import torch

    from ffdesk.swap.onnx_swapper import Scale, SwapperSpec

SOFTEN_SIGMA = 5.0
"""`ffdesk.swap.masks.soften`'s Gaussian blur."""


def _channels(scale: Scale, like: torch.Tensor, ops: DeviceOps | None = None) -> torch.Tensor:
    """A spec's scale (one value or one per channel) as a 1 x C x 1 x 1 tensor beside `like`;
    with `ops`, its constant uploaded once (a copy from host memory waits for the device)."""
    import torch

    values = np.atleast_1d(np.asarray(scale, np.float32))
    if ops is not None:
        found = ops.constant(("channels", tuple(values.tolist())), lambda: values)
    else:
        found = torch.as_tensor(values, device=like.device)
    return found.reshape(1, -1, 1, 1)


def swapper_input(crops: torch.Tensor, spec: SwapperSpec, ops: DeviceOps | None = None) -> torch.Tensor:
    """Crops -> the swapper's input: (rgb - 255 mean) / (255 std), per channel."""
    return (crops - _channels(spec.mean, crops, ops) * 255.0) / (_channels(spec.std, crops, ops) * 255.0)


def swapper_output(y: torch.Tensor, spec: SwapperSpec, ops: DeviceOps | None = None) -> torch.Tensor:
    """The swapper's output (float32 or float16) -> crops, rounded as the host rounds."""
    std = spec.std if spec.out_std is None else spec.out_std
    mean = spec.mean if spec.out_mean is None else spec.out_mean
    x = y.float() * (_channels(std, y, ops) * 255.0) + (_channels(mean, y, ops) * 255.0 + 0.5)
    # an FP16 overflow's NaN would pass the clamp, and its conversion to bytes is undefined
    return x.nan_to_num_(0.0).clamp_(0.0, 255.0).floor_()


def split_tiles(crops: torch.Tensor, k: int) -> torch.Tensor:
    """N x C x kS x kS -> (N k k) x C x S x S; tile dy * k + dx holds pixels (dy::k, dx::k)."""
    if k == 1:
        return crops
    n, c, h, w = crops.shape
    t = crops.reshape(n, c, h // k, k, w // k, k).permute(0, 3, 5, 1, 2, 4)
    return t.reshape(n * k * k, c, h // k, w // k)


def merge_tiles(tiles: torch.Tensor, k: int) -> torch.Tensor:
    """The inverse of `split_tiles`."""
    if k == 1:
        return tiles
    nt, c, s, _ = tiles.shape
    t = tiles.reshape(nt // (k * k), k, k, c, s, s).permute(0, 3, 4, 1, 5, 2)
    return t.reshape(nt // (k * k), c, s * k, s * k)


def enhancer_input(crops: torch.Tensor) -> torch.Tensor:
    """Crops -> an enhancer's input in [-1, 1]."""
    return crops / 127.5 - 1.0


def enhancer_output(y: torch.Tensor) -> torch.Tensor:
    """An enhancer's output in [-1, 1] -> crops, rounded as the host rounds. A NaN (an FP16
    overflow: on CUDA FP16 runs in half precision, where ONNX Runtime's CPU provider computes
    it in float32) comes out as 0, as the host's conversion to bytes gives it on x86, and never
    reaches a conversion to bytes, which is undefined for it."""
    x = (y.float().nan_to_num(-1.0).clamp_(-1.0, 1.0) + 1.0) * 127.5
    return (x + 0.5).clamp_(0.0, 255.0).floor_()


def mix(restored: torch.Tensor, crops: torch.Tensor, blend: float) -> torch.Tensor:
    """`blend` of the restored crops over the originals, rounded (FaceFusion's enhancer blend)."""
    if blend >= 1.0:
        return restored
    return (restored * blend + crops * (1.0 - blend) + 0.5).clamp_(0.0, 255.0).floor_()


def resize_crops(crops: torch.Tensor, size: int) -> torch.Tensor:
    """Crops at `size` (bilinear, pixel centres as OpenCV's INTER_LINEAR), rounded as a uint8
    resize is."""
    import torch.nn.functional as F

    if crops.shape[-1] == size:
        return crops
    out = F.interpolate(crops, size=(size, size), mode="bilinear", align_corners=False)
    return out.round_().clamp_(0.0, 255.0)


def resize_masks(masks: torch.Tensor, size: int) -> torch.Tensor:
    """N x H x W float masks at `size` x `size` (bilinear, as `cv2.resize` on float)."""
    import torch.nn.functional as F

    if masks.shape[-1] == size and masks.shape[-2] == size:
        return masks
    return F.interpolate(masks[:, None], size=(size, size), mode="bilinear", align_corners=False)[:, 0]


def occlusion_input(crops: torch.Tensor, model_size: int = 256) -> torch.Tensor:
    """Crops -> XSeg's input: N x S x S x 3, BGR in [0, 1], channels last."""
    x = resize_crops(crops, model_size).flip(1) / 255.0
    return x.permute(0, 2, 3, 1).contiguous()


def occlusion_output(y: torch.Tensor, size: int) -> torch.Tensor:
    """XSeg's N x S x S x 1 output -> N x size x size masks in [0, 1], before softening. A NaN
    (an FP16 overflow on CUDA, see `enhancer_output`) counts as covered (0): left in, the blur
    would spread it over the face and `minimum` would carry it into the paste's weights."""
    n = y.shape[0]
    side = int(round((y.numel() // n) ** 0.5))
    return resize_masks(y.float().reshape(n, side, side).nan_to_num(0.0).clamp_(0.0, 1.0), size)


def region_input(crops: torch.Tensor, model_size: int = 512, ops: DeviceOps | None = None) -> torch.Tensor:
    """Crops -> BiSeNet's input: N x 3 x S x S with ImageNet's mean and standard deviation."""
    x = resize_crops(crops, model_size) / 255.0
    return (x - _channels(tuple(IMAGENET_MEAN), x, ops)) / _channels(tuple(IMAGENET_STD), x, ops)


def region_from_logits(
    logits: torch.Tensor, classes: Sequence[int], ops: DeviceOps | None = None
) -> torch.Tensor:
    """N x K x H x W class logits -> N x H x W float, 1 where the best class is one of `classes`
    (with `ops`, their ids uploaded once)."""
    import torch

    ids = np.asarray(list(classes), np.int64)
    if ops is not None:
        wanted = ops.constant(("classes", tuple(ids.tolist())), lambda: ids)
    else:
        wanted = torch.as_tensor(ids, device=logits.device)
    return torch.isin(logits.argmax(dim=1), wanted).float()


def pad_batch(x: torch.Tensor, size: int) -> torch.Tensor:
    """`x` with zero items added along its first axis up to `size` (a batch shape warmed up
    before the render, so the device never meets a new shape mid-render)."""
    import torch

    missing = size - int(x.shape[0])
    if missing <= 0:
        return x
    return torch.cat([x, x.new_zeros((missing, *x.shape[1:]))])


def take_rows(table: torch.Tensor, picks: Sequence[int]) -> torch.Tensor:
    """Rows `picks` of a small device `table`, stacked (len(picks) x a row's shape). Picked on
    the device: one view for each run of equal picks, joined, so no index goes up from the host
    (a host list used as an index would, past the transfer counts)."""
    import torch

    runs = [(pick, len(list(group))) for pick, group in itertools.groupby(picks)]
    parts = [table[pick : pick + 1].expand(n, *table.shape[1:]) for pick, n in runs]
    if not parts:
        return table[:0]
    return torch.cat(parts) if len(parts) > 1 else parts[0].contiguous()


def run_model(session: Runner, feeds: Mapping[str, torch.Tensor], pixels: DevicePixels) -> list[torch.Tensor]:
    """The model's outputs, in its order, for device tensors. A session that binds tensors where
    they are (`run_torch` on the same device) runs in place; any other runner is fed through host
    memory, counted as "model-io" transfers, but not a session ONNX Runtime put on the CPU when
    the GPU was asked for (`fell_back`): RuntimeError, where the device path gives way to the host
    path with a warning, rather than a render copying every model's input through host memory."""
    run_torch = getattr(session, "run_torch", None)
    if run_torch is not None and getattr(session, "device_type", None) == pixels.device.type:
        return list(run_torch(dict(feeds)).values())
    if getattr(session, "fell_back", False):
        name = getattr(session, "name", "a model")
        raise RuntimeError(f"ONNX Runtime runs {name} on the CPU: its CUDA provider did not load")
    host = {k: pixels.download(v, "model-io") for k, v in feeds.items()}
    out = session.run(host)
    return [pixels.upload(np.asarray(v), "model-io") for v in out.values()]


def output(outputs: Sequence[torch.Tensor], names: Sequence[str], name: str | None) -> torch.Tensor:
    """The output called `name` (by the session's output names), else the first."""
    if name is not None and name in names:
        return outputs[list(names).index(name)]
    return outputs[0]


def exact_convolutions() -> None:
    """cuDNN's float32 convolutions (the masks' blur) in full float32, as the CPU path computes
    them: cuDNN's default is TF32, whose 10-bit mantissa moved a softened mask's weight by up to
    1e-4 and a pasted pixel by a level. The blur is bound by memory, not arithmetic: it costs
    nothing. torch's setting for the process (the render's own, which runs no other convolution):
    it sets cuDNN's convolutions alone, so torch's legacy `torch.backends.cudnn.allow_tf32` (and
    `cudnn.flags()`) then raise, their convolution and RNN settings differing; training in the
    same process would lose TF32 convolutions."""
    import torch

    conv = getattr(torch.backends.cudnn, "conv", None)
    if conv is not None and hasattr(conv, "fp32_precision"):
        conv.fp32_precision = "ieee"
    else:  # torch before 2.9
        torch.backends.cudnn.allow_tf32 = False


class DeviceOps:
    """Warps, masks and pastes on `pixels.device`, with the constants they need uploaded once."""

    def __init__(self, pixels: DevicePixels) -> None:
        self.pixels = pixels
        self.device = pixels.device
        self._constants: dict[tuple[Any, ...], torch.Tensor] = {}
        if pixels.is_cuda:
            exact_convolutions()

    def constant(self, key: tuple[Any, ...], make: Any) -> torch.Tensor:
        """The device copy of `make()` (a host array), uploaded the first time `key` is asked."""
        found = self._constants.get(key)
        if found is None:
            found = self._constants[key] = self.pixels.constant(np.asarray(make()))
        return found

    def box_mask(self, size: int, blur: float = DEFAULT_BLUR, padding: Padding = NO_PADDING) -> torch.Tensor:
        """`ffdesk.swap.masks.box_mask` on the device (uploaded once per setting)."""
        return self.constant(("box", size, blur, padding), lambda: box_mask(size, blur, padding))

    def _gaussian(self, sigma: float) -> torch.Tensor:
        # OpenCV's own kernel for a float image: size round(8 sigma + 1), odd
        size = int(round(sigma * 4 * 2 + 1)) | 1
        return self.constant(("gauss", sigma), lambda: cv2.getGaussianKernel(size, sigma, cv2.CV_32F).ravel())

    def blur(self, masks: torch.Tensor, sigma: float) -> torch.Tensor:
        """Gaussian blur of N x H x W masks with OpenCV's kernel and border (reflect-101)."""
        import torch.nn.functional as F

        k = self._gaussian(sigma)
        r = (k.numel() - 1) // 2
        x = F.pad(masks[:, None], (r, r, r, r), mode="reflect")
        x = F.conv2d(x, k.reshape(1, 1, 1, -1))
        x = F.conv2d(x, k.reshape(1, 1, -1, 1))
        return x[:, 0]

    def soften(self, masks: torch.Tensor) -> torch.Tensor:
        """`ffdesk.swap.masks.soften`: blur, then stretch the upper half to [0, 1]."""
        blurred = self.blur(masks.clamp(0.0, 1.0), SOFTEN_SIGMA)
        return (blurred.clamp(0.5, 1.0) - 0.5) * 2.0

    def _matrices(self, affines: npt.NDArray[np.float64]) -> torch.Tensor:
        """2 x 3 matrices on the device (a few numbers per face, counted as "affines"), through a
        pinned buffer: a copy from ordinary memory would stall the host on the device's queue.
        Sent as rows padded to a power of two, so a render meets few shapes and keeps few
        staging buffers (pinned host memory is slow to allocate)."""
        rows = np.asarray(affines, np.float32).reshape(-1, 2, 3)
        n = len(rows)
        padded = np.zeros((1 << max(0, n - 1).bit_length(), 2, 3), np.float32)
        padded[:n] = rows
        return self.pixels.upload(padded, "affines")[:n]

    @staticmethod
    def _warp_plan(
        frame: torch.Tensor, affines: npt.NDArray[np.float64], size: int
    ) -> tuple[tuple[int, int, int, int], npt.NDArray[np.float64]]:
        """The part of `frame` (x0, y0, x1, y1) that the `size` crops of `affines` (frame ->
        crop) sample, and the crop -> part matrices: numbers worked out on the host."""
        h, w = int(frame.shape[0]), int(frame.shape[1])
        inverse = np.stack([cv2.invertAffineTransform(np.asarray(m, np.float64)) for m in affines]).astype(
            np.float64
        )
        corners = np.array([[0, 0, 1], [size, 0, 1], [0, size, 1], [size, size, 1]], np.float64)
        mapped = np.concatenate([corners @ inv.T for inv in inverse])
        x0, y0 = (max(0, int(v) - 2) for v in np.floor(mapped.min(0)))
        x1, y1 = (min(lim, int(v) + 3) for v, lim in zip(np.ceil(mapped.max(0)), (w, h), strict=True))
        if x1 - x0 < 2 or y1 - y0 < 2:  # the crops sample nothing but the frame's edge
            x0, y0, x1, y1 = 0, 0, w, h
        inverse[:, :, 2] -= (x0, y0)
        return (x0, y0, x1, y1), inverse

    def _warp_part(
        self, frame: torch.Tensor, part: tuple[int, int, int, int], inverse: torch.Tensor, size: int
    ) -> torch.Tensor:
        """The crops of `inverse` (k crop -> part matrices on the device) out of `part` of `frame`."""
        import torch
        import torch.nn.functional as F

        x0, y0, x1, y1 = part
        k = int(inverse.shape[0])
        region = frame[y0:y1, x0:x1].permute(2, 0, 1)[None].float()
        grid = self._grid(inverse, size, size, (x1 - x0, y1 - y0))
        out = F.grid_sample(
            region,
            grid.reshape(1, k * size, size, 2),
            mode="bilinear",
            padding_mode="border",
            align_corners=True,
        )
        crops = out.reshape(3, k, size, size).transpose(0, 1)
        return torch.round(crops).clamp_(0.0, 255.0)

    def warp(self, frame: torch.Tensor, affines: npt.NDArray[np.float64], size: int) -> torch.Tensor:
        """The aligned `size` crops of one H x W x 3 uint8 frame for each 2 x 3 matrix (frame ->
        crop): k x 3 x S x S, bilinear with the frame's edge replicated, rounded.

        Only the part of the frame the crops sample is made float, and every crop comes out of one
        `grid_sample` call (the crops' grids stacked along the height)."""
        part, inverse = self._warp_plan(frame, affines, size)
        return self._warp_part(frame, part, self._matrices(inverse), size)

    def warp_frames(
        self, frames: Sequence[torch.Tensor], affines: Sequence[npt.NDArray[np.float64]], size: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`warp` of each frame with its matrices, the crops stacked in order, and every frame ->
        crop matrix on the device (N x 2 x 3, for `paste`). The matrices of the warps and of the
        pastes go up in one copy: a copy a face would reuse the staging buffers, and each reuse
        may wait for the device."""
        import torch

        plans = [self._warp_plan(f, a, size) for f, a in zip(frames, affines, strict=True)]
        forward = np.concatenate([np.asarray(a, np.float64).reshape(-1, 2, 3) for a in affines])
        both = self._matrices(np.concatenate([*(inverse for _, inverse in plans), forward]))
        n = len(forward)
        crops, start = [], 0
        for frame, (part, inverse) in zip(frames, plans, strict=True):
            crops.append(self._warp_part(frame, part, both[start : start + len(inverse)], size))
            start += len(inverse)
        return torch.cat(crops), both[n : 2 * n]

    def _grid(
        self,
        matrices: torch.Tensor,
        height: int,
        width: int,
        source: tuple[int, int],
        origin: tuple[int, int] = (0, 0),
    ) -> torch.Tensor:
        """grid_sample's grid (k x height x width x 2, align_corners=True) of the points that
        `matrices` (output pixel -> source pixel) give for an output whose top-left pixel is
        `origin`, in a source of `source` (width, height) pixels."""
        import torch

        ys = torch.arange(origin[1], origin[1] + height, device=self.device, dtype=torch.float32)
        xs = torch.arange(origin[0], origin[0] + width, device=self.device, dtype=torch.float32)
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        points = torch.stack([gx, gy, torch.ones_like(gx)], dim=-1)  # H x W x 3
        mapped = torch.einsum("hwc,kdc->khwd", points, matrices)
        mapped[..., 0].mul_(2.0 / max(source[0] - 1, 1))  # plain numbers: nothing to upload
        mapped[..., 1].mul_(2.0 / max(source[1] - 1, 1))
        return mapped.sub_(1.0)

    def mask_rects(self, masks: torch.Tensor) -> list[tuple[int, int, int, int]]:
        """The box (x, y, w, h) of each mask's nonzero part, as `cv2.boundingRect` gives it: the
        only thing about a mask that comes to the host (one small copy for all of them)."""
        import torch

        nz = masks > 0
        rows, cols = nz.any(dim=2), nz.any(dim=1)  # N x S each
        s = masks.shape[-1]
        first_row = rows.int().argmax(dim=1)
        last_row = s - 1 - rows.flip(1).int().argmax(dim=1)
        first_col = cols.int().argmax(dim=1)
        last_col = s - 1 - cols.flip(1).int().argmax(dim=1)
        any_px = rows.any(dim=1)
        packed = torch.stack([first_col, first_row, last_col - first_col + 1, last_row - first_row + 1], 1)
        packed = packed * any_px[:, None]
        values = self.pixels.numbers(packed, "mask-boxes")
        return [tuple(int(v) for v in values[i * 4 : i * 4 + 4]) for i in range(len(masks))]  # type: ignore[misc]

    def paste(
        self,
        frame: torch.Tensor,
        crop: torch.Tensor,
        mask: torch.Tensor,
        m: npt.NDArray[np.float64],
        rect: tuple[int, int, int, int],
        matrix: torch.Tensor | None = None,
    ) -> tuple[tuple[int, int, int, int], torch.Tensor] | None:
        """`ffdesk.swap.blend.paste_face` on the device: un-warp `crop` (3 x S x S, made by `m`)
        into the H x W x 3 uint8 `frame` in place under `mask` (S x S, whose box is `rect`);
        `matrix`: `m` already on the device (2 x 3, from `warp_frames`), else it goes up here.
        Returns the frame box changed and its blend weight there as 0-255 (h x w uint8, rounded
        up as `ffdesk.media.matte.weight_levels` does: nonzero exactly where the weight is above
        zero, so it says which pixels changed and is the render's matte); None when nothing
        lands in the frame."""
        import torch
        import torch.nn.functional as F

        h, w = int(frame.shape[0]), int(frame.shape[1])
        box = paste_box(rect, m, (w, h))
        if box is None:
            return None
        x1, y1, x2, y2 = box
        s = int(crop.shape[-1])
        on_device = self._matrices(np.asarray(m)[None]) if matrix is None else matrix.reshape(1, 2, 3)
        grid = self._grid(on_device, y2 - y1, x2 - x1, (s, s), (x1, y1))
        warped = F.grid_sample(crop[None], grid, mode="bilinear", padding_mode="border", align_corners=True)
        alpha = F.grid_sample(
            mask[None, None], grid, mode="bilinear", padding_mode="zeros", align_corners=True
        )
        warped = torch.round(warped[0]).clamp_(0.0, 255.0)
        a = alpha[0]
        roi = frame[y1:y2, x1:x2].permute(2, 0, 1).float()
        blended = torch.round(warped * a + roi * (1.0 - a)).clamp_(0.0, 255.0)
        frame[y1:y2, x1:x2] = blended.to(torch.uint8).permute(1, 2, 0)
        weights = torch.ceil(a[0] * 255.0).clamp_(0.0, 255.0).to(torch.uint8)
        return box, weights
