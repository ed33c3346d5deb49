"""`ffdesk bench pipeline`'s own lines, without its renders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ffdesk.bench import pipeline
from ffdesk.runtime.env import RuntimeEnv


def test_the_cost_stand_ins_are_named_with_the_right_article(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each stand-in is named after "an" where its name starts with a vowel ("an inswapper_128
    stand-in", once "a inswapper_128"); made once, then reused."""
    from ffdesk.runtime import standins

    def write_standin(spec: Any, folder: Path, **kwargs: Any) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / spec.file
        path.write_bytes(b"")
        return path

    monkeypatch.setattr(standins, "write_standin", write_standin)
    env = RuntimeEnv.in_folder(tmp_path / "env")
    folder = pipeline.cost_pack(4.0, env)
    assert capsys.readouterr().out.splitlines() == [
        "writing an inswapper_128 stand-in of about 4 ms per face ...",
        "writing an arcface_w600k_r50 stand-in of about 2 ms per face ...",
    ]
    assert pipeline.cost_pack(4.0, env) == folder and capsys.readouterr().out == ""
