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


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ffdesk.runtime.standins import write_standins

    folder = tmp_path_factory.mktemp("precision-pack")
    write_standins(folder, list(MODELS), realistic=False)
    return folder


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
