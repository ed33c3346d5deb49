"""`ffdesk bench precision` with small stand-ins: every variant's row, and a run stopped by a time
limit (the GPU check's) keeps the models it finished."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ffdesk import cli
from ffdesk.bench import precision

MODELS = ("xseg_1", "bisenet_resnet_34")
SWAP = ("inswapper_128", "arcface_w600k_r50")
"""A swapper and the recogniser that embeds its source photo."""


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ffdesk.runtime.standins import write_standins

    folder = tmp_path_factory.mktemp("precision-pack")
    write_standins(folder, list(MODELS), realistic=False)
    return folder


@pytest.fixture(scope="module")
def swap_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ffdesk.runtime.standins import write_standins

    folder = tmp_path_factory.mktemp("precision-swap-pack")
    write_standins(folder, list(SWAP), realistic=False)
    return folder


@pytest.fixture(scope="module")
def _bench_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("precision-bench-cache")


@pytest.fixture(autouse=True)
def _shared_clip(_bench_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's 720p face clip (6 s to make) is made once for the module, its cache shared as
    between a user's runs."""
    monkeypatch.setenv("FFDESK_BENCH_CACHE", str(_bench_cache))


def _figures(path: Path) -> dict[str, Any]:
    figures: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["figures"]
    return figures


def test_a_run_stopped_after_a_model_keeps_that_models_rows(
    small_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ffdesk.errors import Cancelled

    real = precision._feeds
    seen: list[str] = []

    def stopped_at_the_second(name: str, *args: Any) -> Any:
        seen.append(name)
        if len(seen) == 2:
            raise Cancelled("time is up")
        return real(name, *args)

    monkeypatch.setattr(precision, "_feeds", stopped_at_the_second)
    report = tmp_path / "p.json"
    args = ["bench", "precision", "--models", ",".join(MODELS), "--runs", "1",
            "--models-dir", str(small_pack), "--json", str(report)]  # fmt: skip
    assert cli.main(args) == 130
    figures = _figures(report)
    assert figures["partial"] is True and set(figures) == {"partial", MODELS[0]}
    rows = figures[MODELS[0]]
    assert set(rows) == {"fp32", "fp16", "int8"} and all(r["ms"] > 0 for r in rows.values())
    assert rows["fp16"]["speedup"] > 0 and rows["int8"]["speedup"] > 0


def test_asked_precisions_only_and_never_without_fp32(
    small_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--precisions fp16` times FP16 against FP32 and makes no INT8 variant (its calibration is
    the slow part, which the GPU check leaves out); an unknown one is one line."""
    from ffdesk.runtime import precision as prec

    made: list[str] = []
    real = prec.ensure_variant

    def ensure(src: Path, p: str, *args: Any, **kwargs: Any) -> Any:
        made.append(p)
        return real(src, p, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(prec, "ensure_variant", ensure)
    report = tmp_path / "p.json"
    args = ["bench", "precision", "--models", MODELS[0], "--runs", "1", "--models-dir", str(small_pack)]
    assert cli.main([*args, "--precisions", "fp16", "--json", str(report)]) == 0
    assert made == ["fp32", "fp16"]
    figures = _figures(report)
    assert set(figures[MODELS[0]]) == {"fp32", "fp16"} and figures[MODELS[0]]["fp16"]["speedup"] > 0
    assert "int8_swapper_speedup" not in figures
    assert cli.main([*args, "--precisions", "fp16,bf16"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith("--precisions: unknown bf16 (choose from fp32, fp16, int8)")
    )


@pytest.mark.parametrize(
    ("models", "more", "said"),
    [
        ("2dfan4", [], "--models: 2dfan4 is a landmarker; the bench times swapper, recognizer"),
        (" , ", [], "--models: no model named"),
        ("inswapper_128", [], "--models-dir: inswapper_128.onnx is not in "),
        ("xseg_1", [], "xseg_1.onnx: truncated or not an ONNX model"),
        ("xseg_1", ["--runs", "0"], "argument --runs: must be at least 1, not 0"),
        ("xseg_1", ["--threads", "-1"], "argument --threads: must be at least 0, not -1"),
    ],
    ids=["a landmarker", "none", "not in the folder", "cut off", "no runs", "negative threads"],
)
def test_models_it_cannot_time_are_one_line_before_any_work(
    small_pack: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    models: str,
    more: list[str],
    said: str,
) -> None:
    """A model of a kind the bench has no inputs for, or a file missing or damaged in
    `--models-dir`, was an internal error once the bench reached it (ValueError,
    FileNotFoundError, a parse error); no model at all wrote an empty report and said nothing."""
    import shutil

    pack = Path(shutil.copytree(small_pack, tmp_path / "pack"))
    (pack / "xseg_1.onnx").write_bytes((pack / "xseg_1.onnx").read_bytes()[:300])
    report = tmp_path / "p.json"
    args = ["bench", "precision", "--models", models, "--models-dir", str(pack), "--json", str(report)]
    assert cli.main([*args, *more]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
    assert not report.exists()


def test_a_swapper_is_fed_by_the_packs_own_recognizer_and_sizes_are_mib(
    swap_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pack holds arcface_w600k_r50: no realistic stand-in of it is written (154 MB on disk,
    620 MB at its peak) to embed the source photo; sizes are binary, as everywhere in ffdesk,
    and a file of a few KiB is not 0 in the lines or in the JSON."""

    def no_standins(*args: Any, **kwargs: Any) -> Path:
        raise AssertionError("a realistic stand-in was written though the pack has the model")

    monkeypatch.setattr(precision, "realistic_pack", no_standins)
    report = tmp_path / "p.json"
    args = ["bench", "precision", "--models", SWAP[0], "--runs", "1", "--precisions", "fp16",
            "--models-dir", str(swap_pack), "--json", str(report)]  # fmt: skip
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "stand-ins" not in out and " MB" not in out, out
    rows = _figures(report)[SWAP[0]]
    for row in rows.values():
        assert "mb" not in row and row["bytes"] > 0 and row["mib"] > 0
        assert row["mib"] == pytest.approx(row["bytes"] / 2**20, rel=0.01)
    fp32 = rows["fp32"]
    assert fp32["bytes"] == (swap_pack / f"{SWAP[0]}.onnx").stat().st_size
    assert f"{fp32['bytes'] / 2**20:.1f} MiB" in out  # as `models standins` prints it


def test_without_the_recognizer_in_the_pack_a_standin_embeds_the_source(
    swap_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ffdesk.runtime.env import RuntimeEnv

    env = RuntimeEnv.in_folder(tmp_path / "env")
    written: list[tuple[str, ...]] = []

    def standins(_env: Any, names: tuple[str, ...], **kwargs: Any) -> Path:
        written.append(names)
        return tmp_path / "standins"

    monkeypatch.setattr(precision, "realistic_pack", standins)
    assert precision.recognizer_file(swap_pack, env) == swap_pack / "arcface_w600k_r50.onnx"
    assert written == []
    (tmp_path / "cut").mkdir()
    cut = tmp_path / "cut" / "arcface_w600k_r50.onnx"
    cut.write_bytes((swap_pack / "arcface_w600k_r50.onnx").read_bytes()[:300])  # damaged: not used
    for pack in (tmp_path, tmp_path / "cut"):
        assert precision.recognizer_file(pack, env) == tmp_path / "standins" / "arcface_w600k_r50.onnx"
    assert written == [("arcface_w600k_r50",)] * 2


def test_a_kind_is_named_with_its_article() -> None:
    from ffdesk.bench.common import with_article

    assert [with_article(w) for w in ("landmarker", "age_modifier", "inswapper_128", "Enhancer")] == [
        "a landmarker", "an age_modifier", "an inswapper_128", "an Enhancer",
    ]  # fmt: skip
