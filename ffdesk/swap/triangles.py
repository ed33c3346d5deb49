"""Piecewise-affine warping over a triangulation of landmark points.

The warp is done as one `cv2.remap`: every target pixel gets the triangle it lies in (rasterised
once per face) and that triangle's affine map back into the source image, which is much faster
than warping hundreds of triangles one by one.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.types import Frame, Points

Triangles = npt.NDArray[np.int32]
"""T x 3 vertex indices."""


def delaunay(points: Points) -> Triangles:
    """Delaunay triangles of 2-D points, as indices into `points`."""
    p = np.asarray(points, np.float32)[:, :2]
    lo = p.min(0) - 2.0
    hi = p.max(0) + 2.0
    sub = cv2.Subdiv2D((int(lo[0]), int(lo[1]), int(hi[0] - lo[0]) + 2, int(hi[1] - lo[1]) + 2))
    sub.insert([(float(x), float(y)) for x, y in p])
    tris = np.asarray(sub.getTriangleList(), np.float32).reshape(-1, 3, 2)
    # Subdiv2D returns coordinates; map each vertex back to the nearest input point.
    d = ((tris.reshape(-1, 1, 2) - p[None]) ** 2).sum(-1)
    idx = d.argmin(1).reshape(-1, 3)
    ok = (d.min(1).reshape(-1, 3) < 1e-3).all(1)  # drops triangles touching the outer frame
    idx = idx[ok]
    idx = idx[(idx[:, 0] != idx[:, 1]) & (idx[:, 1] != idx[:, 2]) & (idx[:, 0] != idx[:, 2])]
    return idx.astype(np.int32)


def warp_points(points: Points, keep: Sequence[int], total: int) -> npt.NDArray[np.int32]:
    """Indices of about `total` points to triangulate: every index in `keep`, then the points
    farthest from those already chosen (an even spread). Fewer triangles make the warp cheaper;
    a piecewise-affine warp over ~200 well-spread mesh points looks the same as over all 468."""
    p = np.asarray(points, np.float64)[:, :2]
    chosen = list(dict.fromkeys(int(i) for i in keep))
    dist = np.full(len(p), np.inf)
    for i in chosen:
        dist = np.minimum(dist, ((p - p[i]) ** 2).sum(1))
    while len(chosen) < min(total, len(p)):
        i = int(dist.argmax())
        chosen.append(i)
        dist = np.minimum(dist, ((p - p[i]) ** 2).sum(1))
    return np.array(sorted(chosen), np.int32)


def triangle_affines(src: Points, dst: Points, tris: Triangles) -> npt.NDArray[np.float32]:
    """T x 2 x 3 affine maps taking each triangle in `dst` onto the same triangle in `src`.

    Closed form per triangle: with edge matrices E_d = [d1 - d0, d2 - d0] and E_s likewise, the
    linear part is E_s @ inv(E_d) and the offset s0 - linear @ d0.
    """
    s = np.asarray(src, np.float64)[:, :2][tris]  # T x 3 x 2
    d = np.asarray(dst, np.float64)[:, :2][tris]
    a, c = d[:, 1, 0] - d[:, 0, 0], d[:, 2, 0] - d[:, 0, 0]  # E_d = [[a, c], [b, e]]
    b, e = d[:, 1, 1] - d[:, 0, 1], d[:, 2, 1] - d[:, 0, 1]
    det = a * e - b * c
    flat = np.abs(det) < 1e-9  # degenerate triangles cover no pixel; any map will do
    det[flat] = 1.0
    inv = np.stack([np.stack([e, -c], -1), np.stack([-b, a], -1)], 1) / det[:, None, None]  # T x 2 x 2
    es = np.stack([s[:, 1] - s[:, 0], s[:, 2] - s[:, 0]], -1)  # T x 2 x 2, columns are edges
    lin = es @ inv
    lin[flat] = np.eye(2)
    off = s[:, 0] - np.einsum("tij,tj->ti", lin, d[:, 0])
    return np.concatenate([lin, off[:, :, None]], axis=2).astype(np.float32)


def affine_fit(src: Points, dst: Points) -> npt.NDArray[np.float32]:
    """The 2 x 3 least-squares affine map taking `src` points onto `dst` points (normal equations
    on centred points, solved in closed form; identity plus the mean shift when `src` is flat)."""
    s = np.asarray(src, np.float64)[:, :2]
    d = np.asarray(dst, np.float64)[:, :2]
    ms, md = s.mean(0), d.mean(0)
    sc, dc = s - ms, d - md
    sxx, syy, sxy = (
        float((sc[:, 0] ** 2).sum()),
        float((sc[:, 1] ** 2).sum()),
        float((sc[:, 0] * sc[:, 1]).sum()),
    )
    det = sxx * syy - sxy * sxy
    out = np.zeros((2, 3), np.float64)
    if det > 1e-9 * max(sxx * syy, 1e-300):
        cross = sc.T @ dc  # 2 x 2: rows x, y of src; columns x, y of dst
        inv = np.array([[syy, -sxy], [-sxy, sxx]]) / det
        out[:, :2] = (inv @ cross).T
    else:
        out[:, :2] = np.eye(2)
    out[:, 2] = md - out[:, :2] @ ms
    return out.astype(np.float32)


def rasterise(dst: Points, tris: Triangles, shape: tuple[int, int]) -> npt.NDArray[np.int32]:
    """An H x W map of 1 + the index of the triangle covering each pixel (0: none)."""
    out = np.zeros(shape, np.int32)
    pts = np.round(np.asarray(dst, np.float64)[:, :2] * 16.0).astype(np.int32)  # 4 bits sub-pixel
    fill = cv2.fillConvexPoly  # one call per triangle: positional arguments parse fastest
    for t, tri in enumerate(list(pts[tris]), 1):
        fill(out, tri, t, cv2.LINE_8, 4)  # 4 bits of sub-pixel precision
    return out


def warp_piecewise(
    src_image: Frame, src: Points, dst: Points, tris: Triangles, shape: tuple[int, int], step: int = 2
) -> tuple[Frame, npt.NDArray[np.bool_]]:
    """`src_image` warped so that `src` points land on `dst` points, in an image of `shape` (H, W),
    and the mask of pixels covered by a triangle.

    The sampling map is built every `step` pixels and scaled up linearly: it is affine inside each
    triangle, so only pixels next to a triangle edge move, by a fraction of a pixel. Outside the
    triangles it continues with the least-squares affine map of all points, so the scaled-up map
    stays smooth at the hull.
    """
    h, w = shape
    sh, sw = -(-h // step), -(-w // step)
    small_dst = np.asarray(dst, np.float32)[:, :2] / float(step)
    index = rasterise(small_dst, tris, (sh, sw))
    covered_small = index > 0
    aff = triangle_affines(src, small_dst, tris)
    glob = affine_fit(small_dst, src)
    table = np.concatenate([glob[None], aff], axis=0).reshape(len(aff) + 1, 6)
    coef = np.take(np.ascontiguousarray(table.T), index, axis=1)  # 6 x sh x sw
    xs = np.arange(sw, dtype=np.float32)[None, :]
    ys = np.arange(sh, dtype=np.float32)[:, None]
    maps = coef[0:4:3] * xs + coef[1:5:3] * ys + coef[2:6:3]  # x and y: 2 x sh x sw
    # one two-channel map: remap reads it without splitting it into two planes
    xy = cv2.merge([maps[0], maps[1]])
    if step > 1:
        # Small-map pixel i sits at full-res pixel i * step: align the grids when scaling up.
        m = np.array([[step, 0, 0], [0, step, 0]], np.float32)
        xy = cv2.warpAffine(xy, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        covered = cv2.resize(covered_small.view(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST) > 0
    else:
        covered = covered_small
    no_map2 = np.empty((0, 0), np.float32)  # the map holds both coordinates
    warped = cv2.remap(src_image, xy, no_map2, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return np.asarray(warped, np.uint8), covered
