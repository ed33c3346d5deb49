"""What the README promises of the command line, checked as a new user meets it.

"Model packs": each processor option given without its processor is refused in one line (the
face enhancer's, the frame enhancer's and the lip syncer's settings, like the others'); a farm
render's last line counts its workers in plain English.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from ffdesk import cli
from ffdesk.commands.farm_render import farm_summary
from ffdesk.runtime.resources import resource_path

SAMPLE_FACE = resource_path("sample", "grace_hopper.jpg")
SETTINGS = [
    ("--enhancer-weight", "0.3", "--enhancer"),
    ("--enhancer-blend", "50", "--enhancer"),
    ("--frame-enhancer-blend", "50", "--frame-enhancer"),
    ("--lip-sync-weight", "0.9", "--lip-syncer"),
    ("--voice-extractor", "kim_vocal_1", "--lip-syncer"),
]


@pytest.mark.parametrize(("option", "value", "processor"), SETTINGS)
def test_a_setting_without_its_processor_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, processor: str
) -> None:
    out = tmp_path / "out.png"
    args = ["render", "-t", str(SAMPLE_FACE), "-o", str(out), "-q", option, value]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"ffdesk: error: {option} needs") and f"({processor} " in err[0], err
    assert not out.exists()


def test_a_setting_left_at_its_default_is_not_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.png"
    args = ["render", "-t", str(SAMPLE_FACE), "-o", str(out), "-q", "--lip-sync-weight", "0.5"]
    assert cli.main(args) == 0, capsys.readouterr().err
    assert out.exists()


def _report(workers: list[tuple[int, int]], rerun: int = 0) -> Any:
    rows = [SimpleNamespace(segments=s, model_loads=m) for s, m in workers]
    farm = SimpleNamespace(segments_rerun=rerun, workers=rows)
    return cast(Any, SimpleNamespace(farm=farm, output=Path("/o.mp4"), frames_out=75, fps=2.6))


def test_the_farm_summary_counts_in_plain_english() -> None:
    one = farm_summary(_report([(1, 1), (0, 0)], rerun=1))
    assert (
        one
        == "wrote /o.mp4 (75 frames, 2.6 frames/s on 1 farm worker, 1 segment rendered again, 1 model load)"
    )
    two = farm_summary(_report([(3, 2), (3, 2)], rerun=2))
    assert two.endswith("on 2 farm workers, 2 segments rendered again, 4 model loads)")


def test_models_list_keeps_its_columns_for_long_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = tmp_path / "pack"
    names = "2dfan4,arcface_converter_hififace,live_portrait_feature_extractor"
    assert cli.main(["models", "standins", "--out", str(pack), "--only", names]) == 0
    capsys.readouterr()
    assert cli.main(["models", "list", "--no-verify", "--models-dir", str(pack)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("file "))
    rows = [line for line in lines if line.split(" ", 1)[0].endswith(".onnx")]
    assert len(rows) == 3, lines
    for column in ("kind", "status"):  # every row's entry starts under its heading, after a space
        at = header.index(column)
        assert all(row[at - 1] == " " and row[at] != " " for row in rows), (column, header, rows)
