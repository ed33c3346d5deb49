"""`ffdesk bench processors`: each processor's render with stand-ins, figures that add up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ffdesk import cli


def test_the_bench_renders_each_processor_asked_and_writes_its_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FFDESK_BENCH_CACHE", str(tmp_path / "cache"))
    report = tmp_path / "figures.json"
    only = "background_remover,frame_colorizer,lip_syncer"
    argv = ["bench", "processors", "--seconds", "0.6", "--only", only, "--json", str(report)]
    assert cli.main(argv) == 0
    figures = json.loads(report.read_text())["figures"]
    assert set(figures) == {"plain_fps", "background_remover", "frame_colorizer", "lip_syncer"}
    removed = figures["background_remover"]
    assert removed["model"] == "modnet" and removed["frames"] == 15
    assert figures["lip_syncer"]["faces"] > 5  # the synthesized voice reaches most frames' face
    for name in ("background_remover", "frame_colorizer", "lip_syncer"):
        assert figures[name]["fps"] > 0 and figures[name]["stage_ms_per_frame"] > 0
    out = capsys.readouterr().out
    assert "plain re-encode:" in out and "frame_colorizer" in out
    assert cli.main(["bench", "processors", "--only", "upscaler"]) == 2


def test_a_run_stopped_between_processors_keeps_those_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU check stops a bench at its time limit: the processors done are in the JSON file."""
    from ffdesk.errors import Cancelled
    from ffdesk.pipeline import engine

    monkeypatch.setenv("FFDESK_BENCH_CACHE", str(tmp_path / "cache"))
    real = engine.run_render
    calls: list[str] = []

    def stopped_at_the_third(job: object, *args: object, **kwargs: object) -> object:
        calls.append(str(job))
        if len(calls) == 3:  # the plain re-encode, the first processor, then this
            raise Cancelled("time is up")
        return real(job, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "run_render", stopped_at_the_third)
    report = tmp_path / "figures.json"
    argv = ["bench", "processors", "--seconds", "0.6", "--only", "background_remover,frame_colorizer",
            "--json", str(report)]  # fmt: skip
    assert cli.main(argv) == 130
    figures = json.loads(report.read_text())["figures"]
    assert figures["partial"] is True and set(figures) == {"partial", "plain_fps", "background_remover"}
