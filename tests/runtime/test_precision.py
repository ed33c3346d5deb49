from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest

from ffdesk.errors import UserError
from ffdesk.runtime import precision as prec
from ffdesk.runtime.catalog import Catalog
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.sessions import create_session
from tests.runtime.conftest import made


def _face_crops(n: int, size: int) -> np.ndarray:
    """Crops around the astronaut's face (public domain), shifted a little: real inputs."""
    from skimage.data import astronaut

    img = astronaut()
    crops = []
    for i in range(n):
        dx, dy = (i % 3) * 6, (i // 3) * 6
        crop = img[40 + dy : 220 + dy, 140 + dx : 320 + dx]
        crops.append(cv2.resize(crop, (size, size), interpolation=cv2.INTER_AREA))
    return np.stack(crops).transpose(0, 3, 1, 2).astype(np.float32) / 255.0


def _swap_feeds(n: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    source = rng.standard_normal((1, 512)).astype(np.float32)
    source /= np.linalg.norm(source)
    return [{"target": c[None], "source": source} for c in _face_crops(n, 128)]


@pytest.fixture()
def swapper(standins_dir: Path) -> Path:
    return standins_dir / "inswapper_128.onnx"


def test_resolve_precision() -> None:
    assert prec.resolve_precision("auto", "preview", "cpu") == "int8"
    assert prec.resolve_precision("auto", "preview", "cuda") == "fp16"
    assert prec.resolve_precision("auto", "final", "cpu") == "fp32"
    assert prec.resolve_precision("auto", "final", "cuda") == "fp16"
    assert prec.resolve_precision("int8", "final", "cuda") == "int8"
    with pytest.raises(UserError):
        prec.resolve_precision("fp8", "final", "cpu")


def test_fp16_variant_is_cached_and_close(swapper: Path, run_env: RuntimeEnv) -> None:
    path = prec.ensure_variant(swapper, "fp16", cache_dir=run_env.variants_dir)
    assert path != swapper and path.is_file()
    mtime = path.stat().st_mtime_ns
    assert (
        prec.ensure_variant(swapper, "fp16", cache_dir=run_env.variants_dir) == path
        and path.stat().st_mtime_ns == mtime
    )
    assert prec.cached_variants(swapper, run_env.variants_dir) == ("fp16",)
    assert path.parent == run_env.variants_dir
    assert prec.cached_variants(swapper, None) == ()  # no variants folder: none listed
    model = onnx.load(str(path))
    assert {i.type.tensor_type.elem_type for i in model.graph.input} == {onnx.TensorProto.FLOAT}
    assert any(t.data_type == onnx.TensorProto.FLOAT16 for t in model.graph.initializer)
    feed = _swap_feeds(1)[0]
    ref = create_session(swapper).run(feed)
    out = create_session(path, precision="fp16").run(feed)
    for a, b in zip(ref.values(), out.values(), strict=True):
        assert b.dtype == np.float32
        assert np.abs(a - b).max() < 1e-2


def test_fp16_variant_of_a_file_with_external_weights(swapper: Path, tmp_path: Path) -> None:
    """The shapes are inferred from the file into the variants folder and the weights read from
    the file's own folder: a swapper saved with its weights in a side file gets the variant of the
    single file, and the folder keeps nothing but the variant and its sidecar."""
    folder = tmp_path / "models"
    folder.mkdir()
    onnx.save(
        onnx.load(str(swapper)),
        str(folder / "inswapper_128.onnx"),
        save_as_external_data=True,
        location="inswapper_128.onnx.data",
        size_threshold=1024,
    )
    assert (folder / "inswapper_128.onnx").stat().st_size < swapper.stat().st_size / 10
    single = prec.make_fp16(swapper, cache_dir=tmp_path / "a")
    split = prec.make_fp16(folder / "inswapper_128.onnx", cache_dir=tmp_path / "b")
    a, b = onnx.load(str(single)), onnx.load(str(split))
    for tensor in b.graph.initializer:  # read from the side file: its location set (to here)
        tensor.ClearField("data_location")
    assert a == b
    assert sorted(p.suffix for p in made(tmp_path / "b")) == [".hash", ".onnx"]


def test_a_disk_too_full_for_the_fp16_variant_is_one_line_and_leaves_nothing(
    swapper: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ONNX's shape inference writes its file without saying when the disk fills (it comes out
    short, and reading it failed as an internal error): the room is asked for first, and a file
    that still comes out short is one line. Neither leaves a file in the variants folder."""
    import shutil
    from collections import namedtuple

    from onnx import shape_inference

    usage = namedtuple("usage", "total used free")
    real_usage = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(1 << 30, (1 << 30) - 200_000, 200_000))
    with pytest.raises(UserError, match=r"^inswapper_128.onnx: its FP16 variant: not enough disk space in "):
        prec.make_fp16(swapper, cache_dir=tmp_path / "a")
    with pytest.raises(UserError, match=r"^inswapper_128.onnx: its INT8 variant: not enough disk space in "):
        prec.make_int8(swapper, _swap_feeds(2), cache_dir=tmp_path / "a")
    assert made(tmp_path / "a") == []
    monkeypatch.setattr(shutil, "disk_usage", real_usage)

    def short(src: str, dest: str) -> None:  # what a disk filling mid-write leaves
        Path(dest).write_bytes(Path(src).read_bytes()[:4000])

    monkeypatch.setattr(shape_inference, "infer_shapes_path", short)
    with pytest.raises(
        UserError, match=r"its FP16 variant: the shapes file in .* came out short \(it needs about"
    ):
        prec.make_fp16(swapper, cache_dir=tmp_path / "b")
    assert made(tmp_path / "b") == []


def test_a_damaged_cached_variant_is_made_again_not_loaded(swapper: Path, tmp_path: Path) -> None:
    """A cached variant cut off (a disk that failed or filled outside ffdesk) was returned as
    made: every render loading it failed ("ONNX Runtime cannot load this model"), and `models
    prepare` called it "already made". It is removed and made again; an INT8 one asked for
    without calibration inputs (the render thought it was there) is one line saying so."""
    folder = tmp_path / "v"
    fp16 = prec.make_fp16(swapper, cache_dir=folder)
    whole = fp16.read_bytes()
    fp16.write_bytes(whole[: len(whole) // 3])
    assert prec.make_fp16(swapper, cache_dir=folder) == fp16 and fp16.read_bytes() == whole
    int8 = prec.variant_path(swapper, "int8", cache_dir=folder)
    int8.write_bytes(b"\x08\x07" + b"\xff" * 64)  # a variant's name, not a model
    with pytest.raises(
        UserError, match=r"its cached INT8 variant .* was damaged; it is removed, and the next"
    ):
        prec.make_int8(swapper, None, cache_dir=folder)
    assert not int8.exists()


def test_a_shapes_file_that_could_not_be_written_is_one_line(
    swapper: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ONNX's shape inference writes nothing, without a word, where it cannot write its file:
    reading the file that is not there was an internal error (FileNotFoundError)."""
    from onnx import shape_inference

    monkeypatch.setattr(shape_inference, "infer_shapes_path", lambda src, dest: None)
    with pytest.raises(UserError, match=r"^inswapper_128.onnx: its FP16 variant: the shapes file could not"):
        prec.make_fp16(swapper, cache_dir=tmp_path / "v")
    assert made(tmp_path / "v") == []


def _without_write_rights(folder: Path) -> list[str]:
    """Make `folder` read-only for a command run with the returned prefix: root writes anywhere,
    so as root the command runs without the capability that lets it (`setpriv`)."""
    import os
    import shutil

    folder.chmod(0o555)
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        folder.chmod(0o755)
        pytest.skip("running as root without setpriv: no folder is read-only")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


@pytest.mark.parametrize("precision", ["fp16", "int8"])
def test_a_read_only_variants_folder_is_one_line_and_nothing_is_written(
    swapper: Path, tmp_path: Path, precision: str
) -> None:
    """The FP16 variant in a variants folder that cannot be written was an internal error (the
    shapes file was never written, then read), the INT8 one a bare "Permission denied" naming a
    folder of its own; both now say which variant cannot go where, before any work."""
    import subprocess
    import sys

    variants = tmp_path / "cache" / "ffdesk" / "variants"
    variants.mkdir(parents=True)
    prefix = _without_write_rights(variants)
    make = (
        "make_fp16(src, cache_dir=folder)"
        if precision == "fp16"
        else "make_int8(src, feeds, cache_dir=folder)"
    )
    code = (
        "import sys; from pathlib import Path; from ffdesk.errors import UserError; "
        "from ffdesk.runtime.precision import make_fp16, make_int8; "
        "src, folder = Path(sys.argv[1]), Path(sys.argv[2]); feeds = [{'x': [0]}]\n"
        f"try:\n    {make}\nexcept UserError as exc:\n    print(exc); sys.exit(2)\n"
    )
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-c", code, str(swapper), str(variants)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        variants.chmod(0o755)
    label = precision.upper()
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout.strip() == (
        f"inswapper_128.onnx: its {label} variant cannot be written in {variants} (Permission denied); "
        "make that folder writable, or render with --precision fp32"
    )
    assert made(variants) == []


def test_int8_variant_is_qdq_with_float_output_layers(swapper: Path, run_env: RuntimeEnv) -> None:
    with pytest.raises(UserError, match="calibration"):
        prec.make_int8(swapper, None, cache_dir=run_env.variants_dir)
    calib = _swap_feeds(6)
    path = prec.make_int8(swapper, calib, cache_dir=run_env.variants_dir)
    assert (
        prec.make_int8(swapper, None, cache_dir=run_env.variants_dir) == path
    )  # cached: no calibration needed again
    model = onnx.load(str(path))
    ops = [n.op_type for n in model.graph.node]
    assert "QuantizeLinear" in ops and "DequantizeLinear" in ops
    # The last Conv (the output layer) reads float weights, not dequantized int8 ones.
    producer = {o: n for n in model.graph.node for o in n.output}
    last_conv = [n for n in model.graph.node if n.op_type == "Conv"][-1]
    weight_src = producer.get(last_conv.input[1])
    assert weight_src is None or weight_src.op_type != "DequantizeLinear"
    feed = _swap_feeds(8)[7]  # not one of the calibration inputs
    ref = list(create_session(swapper).run(feed).values())
    cost, out = prec.variant_cost(path, "int8", feed, ref, runs=2)
    assert cost.mean_abs_err < 0.03, cost
    assert cost.psnr_db is not None and cost.psnr_db > 25, cost
    assert cost.file_bytes < swapper.stat().st_size  # int8 weights
    assert out[0].shape == (1, 3, 128, 128)


def test_int8_calibration_splits_batches() -> None:
    batch = {"x": np.zeros((4, 3, 8, 8), np.float32)}
    reader = prec.ArrayCalibrationReader([batch], fixed_batch=1)
    assert len(reader) == 4
    first = reader.get_next()
    assert first is not None and first["x"].shape == (1, 3, 8, 8)


def test_variant_keys_differ_by_settings(swapper: Path, catalog: Catalog, tmp_path: Path) -> None:
    a = prec.variant_path(swapper, "int8", cache_dir=tmp_path)
    b = prec.variant_path(swapper, "int8", cache_dir=tmp_path, calibration_tag="clip-2")
    c = prec.variant_path(swapper, "int8", cache_dir=tmp_path, per_channel=False)
    assert len({a, b, c}) == 3
    assert prec.variant_path(swapper, "fp32", cache_dir=tmp_path) == swapper


def test_auto_takes_the_fastest_variant_within_the_quality_guard(tmp_path: Path) -> None:
    from ffdesk.runtime.precision import PrecisionChoices, VariantSpeed, pick_fastest

    fp32 = VariantSpeed("fp32", 1.8)
    # the H200's figures: FP16 1.27x for inswapper, 0.68x for ArcFace
    assert pick_fastest([fp32, VariantSpeed("fp16", 1.8 / 1.27, 41.0)], 30.0).precision == "fp16"
    assert pick_fastest([fp32, VariantSpeed("fp16", 1.8 / 0.68, 41.0)], 30.0).precision == "fp32"
    blurred = pick_fastest([fp32, VariantSpeed("fp16", 1.0, 24.5)], 30.0)
    assert blurred.precision == "fp32" and "fp16 left out" in blurred.reason
    store = PrecisionChoices(tmp_path / "choices.json")
    model = tmp_path / "m.onnx"
    model.write_bytes(b"x" * 64)
    key = store.key(prec.file_fingerprint(model), "CUDAExecutionProvider@NVIDIA H200", 16)
    store.put(key, blurred)
    again = PrecisionChoices(tmp_path / "choices.json").get(key)
    assert again is not None and again.precision == "fp32" and again.speeds == blurred.speeds
    (tmp_path / "choices.json").write_text("[" * 100000)  # damaged: chosen again, no crash
    damaged = PrecisionChoices(tmp_path / "choices.json")
    assert damaged.get(key) is None
    damaged.put(key, blurred)  # and kept aside, not written over
    assert (tmp_path / "choices.json.corrupt").read_text() == "[" * 100000
    assert PrecisionChoices(tmp_path / "choices.json").get(key) == damaged.get(key)


def test_auto_choices_of_two_processes_are_both_kept(tmp_path: Path) -> None:
    from ffdesk.runtime.precision import PrecisionChoices, VariantSpeed, pick_fastest

    path = tmp_path / "choices.json"
    first, second = PrecisionChoices(path), PrecisionChoices(path)
    assert first.get("swapper") is None and second.get("enhancer") is None  # both read the empty file
    fp32 = VariantSpeed("fp32", 1.8)
    first.put("swapper", pick_fastest([fp32, VariantSpeed("fp16", 1.4, 41.0)], 30.0))
    second.put("enhancer", pick_fastest([fp32], 30.0))
    again = PrecisionChoices(path)
    swapper, enhancer = again.get("swapper"), again.get("enhancer")
    assert swapper is not None and swapper.precision == "fp16"
    assert enhancer is not None and enhancer.precision == "fp32"
    assert second.get("swapper") is not None  # learnt from the file as it wrote


class _DiesWhenUnpacked:
    """Ends the process that unpickles it at once, as the kernel's out-of-memory killer would."""

    def __reduce__(self) -> tuple[object, tuple[int]]:
        import os

        return os._exit, (9,)


def test_a_variant_process_that_is_killed_is_one_line() -> None:
    with pytest.raises(UserError, match=r"^w\.onnx: its INT8 variant: the process making it ended before"):
        prec._in_own_process("w.onnx: its INT8 variant", print, _DiesWhenUnpacked())


def test_an_error_in_the_variant_process_comes_back_as_it_is() -> None:
    with pytest.raises(ValueError, match="invalid literal for int"):
        prec._in_own_process("w.onnx: its INT8 variant", int, "not a number")
    prec._in_own_process("w.onnx: its INT8 variant", int, "12")  # done: nothing raised


def test_a_full_disk_in_the_variant_process_is_one_line(swapper: Path, tmp_path: Path) -> None:
    """The quantization's writes fail with ENOSPC, or (ONNX's own writers) leave a short file
    that fails to parse: each is one line naming the variant, not an internal error."""
    import onnx

    what = "w.onnx: its INT8 variant"
    with pytest.raises(
        UserError, match=r"^w\.onnx: its INT8 variant: disk full \(No space left on device\)$"
    ):
        prec._in_own_process(what, Path.write_bytes, Path("/dev/full"), b"x" * 100_000)
    short = tmp_path / "short.onnx"
    short.write_bytes(swapper.read_bytes()[:4000])
    with pytest.raises(UserError, match=r"^w\.onnx: its INT8 variant: a model file it wrote came out short"):
        prec._in_own_process(what, onnx.load, str(short))
