"""A face map with a model pack: the pack's ArcFace (a stand-in here) matches the faces to the
people, and each person's own source embedding drives the swapper."""

from __future__ import annotations

import json
from pathlib import Path

from ffdesk.cli import main
from ffdesk.runtime.resources import resource_path
from tests.faces.two_shot import two_shot

ASTRONAUT = str(resource_path("sample", "astronaut.jpg"))
HOPPER = str(resource_path("sample", "grace_hopper.jpg"))


def test_a_pack_render_puts_each_mapped_persons_source_on_them(ff_pack: Path, tmp_path: Path) -> None:
    clip = two_shot(tmp_path / "two.mp4", frames=6)
    report = tmp_path / "r.json"
    args = ["render", "--target", str(clip), "--output", str(tmp_path / "out.mp4"), "--no-resume", "-q"]
    args += ["--models-dir", str(ff_pack), "--swapper", "inswapper_128", "--precision", "fp32"]
    args += ["--map", f"{ASTRONAUT}={HOPPER}", "--map", f"{HOPPER}={ASTRONAUT}", "--report", str(report)]
    assert main(args) == 0
    data = json.loads(report.read_text())
    people = {p["person"]: (p["sources"], p["faces"]) for p in data["people"]}
    assert set(people) == {"astronaut.jpg", "grace_hopper.jpg"}
    assert people["astronaut.jpg"][0] == ["grace_hopper.jpg"]
    assert sum(n for _, n in people.values()) == data["faces_swapped"] > 0


def test_a_map_by_index_with_a_batch_one_arcface_renders_two_people(tmp_path: Path) -> None:
    """FaceFusion's ArcFace file takes one face a run; the people pass and the front end fed it
    both faces of the two-shot at once: an internal error instead of a render."""
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.standins import write_standin

    pack = tmp_path / "pack"
    for name in ("inswapper_128", "arcface_w600k_r50"):
        write_standin(load_catalog().get(name), pack)  # batch fixed at 1, as published
    clip = two_shot(tmp_path / "two.mp4", frames=4)
    report = tmp_path / "r.json"
    args = ["render", "--target", str(clip), "--output", str(tmp_path / "out.mp4"), "--no-resume", "-q"]
    args += ["--models-dir", str(pack), "--swapper", "inswapper_128", "--precision", "fp32"]
    args += ["--map", f"0={HOPPER}", "--report", str(report)]
    assert main(args) == 0
    data = json.loads(report.read_text())
    assert data["people"][0]["person"] == "0" and data["faces_swapped"] > 0
