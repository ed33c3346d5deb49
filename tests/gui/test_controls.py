"""The controls say what the chosen swap reads; the budget typed and drawn; File > Models folder…
and File > Use trained model…."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt

from ffdesk.faces.types import Face
from ffdesk.gui.models import ClipInfo, ResidencyModel, SessionModel

PACK = {
    "swapper": ["inswapper_128"],
    "enhancer": ["codeformer", "gfpgan_1.4"],
    "parser": ["bisenet_resnet_34"],
}


def _view(qtbot: Any, session: SessionModel, models: dict[str, list[str]] | None = None) -> Any:
    from ffdesk.gui.controls import ControlsView

    view = ControlsView(
        session, ResidencyModel(), memory_total_mb=8192, models=PACK if models is None else models
    )
    qtbot.addWidget(view)
    view.show()
    return view


def _face() -> Face:
    kps = np.array([[30, 30], [50, 30], [40, 40], [32, 50], [48, 50]], np.float32)
    return Face(bbox=(20.0, 20.0, 60.0, 60.0), score=0.9, kps=kps)


def _note(view: Any, control: str) -> str:
    note = view.control_notes[control]
    return str(note.text()) if note.isVisibleTo(view) else ""


def test_the_embedded_swap_greys_what_it_ignores_with_a_visible_reason(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    session = SessionModel()
    view = _view(qtbot, session)
    assert not view.precision.isEnabled()
    assert _note(view, "precision") == "the embedded swap runs at its own precision"
    assert not view.mask_regions.isEnabled() and "region mask" in _note(view, "mask_regions")
    assert not view.enhancer_weight.isEnabled() and _note(view, "enhancer_weight") == "needs an enhancer"
    assert view.model_choice["swapper"].isEnabled() and _note(view, "swapper") == ""
    assert not view.notes.isVisibleTo(view)
    for name in ("a.jpg", "b.jpg"):
        session.add_source(tmp_path / name)
        session.update_source(tmp_path / name, faces=(_face(),), pending=False)
    assert view.notes.isVisibleTo(view)
    assert view.notes.text() == "the embedded swap uses the first photo's face; 1 more photo ignored"
    # a model pack reads them all
    view.model_choice["swapper"].setCurrentText("inswapper_128")
    assert session.settings.swapper == "inswapper_128"
    assert view.precision.isEnabled() and _note(view, "precision") == ""
    assert not view.notes.isVisibleTo(view)


def test_the_enhancer_controls_follow_the_enhancer_and_the_mode(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    session = SessionModel()
    session.update_settings(swapper="inswapper_128", mode="final")
    view = _view(qtbot, session)
    assert not view.enhancer_blend.isEnabled()
    view.model_choice["enhancer"].setCurrentText("gfpgan_1.4")
    assert view.enhancer_blend.isEnabled() and _note(view, "enhancer_blend") == ""
    assert not view.enhancer_weight.isEnabled() and _note(view, "enhancer_weight") == "only for codeformer"
    view.model_choice["enhancer"].setCurrentText("codeformer")
    assert view.enhancer_weight.isEnabled() and _note(view, "enhancer_weight") == ""
    view.mode.setCurrentText("preview")  # off in preview, still editable for the final render
    assert view.enhancer_weight.isEnabled() and "preview" in _note(view, "enhancer_weight")
    # the region mask: mask regions need its face parser, which reaches the job
    assert not view.mask_regions.isEnabled()
    view.model_choice["parser"].setCurrentText("bisenet_resnet_34")
    assert view.mask_regions.isEnabled() and _note(view, "mask_regions") == ""
    session.set_clip(ClipInfo(tmp_path / "clip.mp4", 320, 180, 25.0, 25, 1.0))
    assert session.build_job(tmp_path / "out.mp4").masks == ("box", "region=bisenet_resnet_34")


def test_a_picker_with_nothing_to_offer_says_so_visibly(qtbot) -> None:  # type: ignore[no-untyped-def]
    view = _view(qtbot, SessionModel(), models={"swapper": ["inswapper_128"]})
    assert view.model_choice["swapper"].isEnabled() and _note(view, "swapper") == ""
    assert not view.model_choice["parser"].isEnabled()
    assert _note(view, "parser") == "no region mask in the models folder — File > Models folder…"
    # a folder with nothing at all: said once above the form, each picker says it has nothing
    view = _view(qtbot, SessionModel(), models={})
    assert not view.model_choice["swapper"].isEnabled()
    assert _note(view, "swapper") == _note(view, "parser") == "none in the models folder"
    assert view.notes.text().startswith("no usable model in the models folder: the embedded swap runs")
    assert not view.notes.isHidden()


def test_a_models_folder_that_is_a_file_is_named(qtbot: Any, tmp_path: Path) -> None:
    """A saved models folder that is a file (an older `models set-dir` took one): the note above
    the form names it, where it said only that the folder had no usable model."""
    from ffdesk.gui.controls import ControlsView

    file = tmp_path / "clip.mp4"
    file.write_bytes(b"a clip")
    view = ControlsView(SessionModel(), ResidencyModel(), memory_total_mb=8192, models_dir=file)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitUntil(lambda: "is a file" in view.notes.text(), timeout=30000)
    assert view.notes.text().startswith(
        f"the models folder {file} is a file, not a folder: the embedded swap"
    )


def test_the_budget_is_typed_and_dragged_into_one_setting(qtbot) -> None:  # type: ignore[no-untyped-def]
    session = SessionModel()
    view = _view(qtbot, session)
    box = view.budget_input
    assert box.text() == "no limit"
    box.lineEdit().selectAll()
    qtbot.keyClicks(box, "2 GiB")
    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert session.settings.memory_budget_mb == 2048 and view.budget.value_mb == 2048
    view.budget.resize(402, 30)
    qtbot.mouseClick(view.budget, Qt.MouseButton.LeftButton, pos=QPoint(101, 15))  # a quarter of 8 GiB
    assert session.settings.memory_budget_mb == 2048 and box.value() == 2048
    qtbot.mouseClick(view.budget, Qt.MouseButton.LeftButton, pos=QPoint(201, 15))
    assert session.settings.memory_budget_mb == 4096 and box.text() == "4096 MiB"
    box.setValue(0)
    assert session.settings.memory_budget_mb == 0 and box.text() == "no limit"


def test_typed_budgets_read_mib_gib_and_no_limit() -> None:
    from ffdesk.gui.controls import parse_budget_mb

    assert parse_budget_mb("2048") == 2048 and parse_budget_mb("512 MiB") == 512
    assert parse_budget_mb("1.5G") == 1536 and parse_budget_mb("2 GiB") == 2048
    assert parse_budget_mb("no limit") == 0 and parse_budget_mb("lots") is None


def test_the_memory_graph_draws_the_budget_setting(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    line = window.graphs.budget_line
    assert not line.isVisible()
    window.session.update_settings(memory_budget_mb=3072)
    assert line.isVisible() and line.value() == 3072.0 and line.label.format == "budget"
    assert window.graphs.plots[0].viewRange()[1][1] >= 3072
    window.session.update_settings(memory_budget_mb=0)
    assert not line.isVisible()


def test_the_models_folder_menu_saves_it_for_the_command_line_and_the_jobs_use_it(  # type: ignore[no-untyped-def]
    qtbot, window, tmp_path: Path
) -> None:
    from ffdesk.gui.model_menu import use_models_folder
    from ffdesk.runtime.env import RuntimeEnv, saved_models_dir
    from ffdesk.runtime.standins import write_standins

    file_menu = window.menuBar().actions()[0].menu()
    texts = [a.text() for a in file_menu.actions()]
    assert "&Models folder…" in texts and "Use &trained model…" in texts
    assert texts.index("Use &trained model…") < texts.index("&Quit")
    folder = tmp_path / "pack"
    write_standins(folder, ["inswapper_128"])
    assert use_models_folder(window, folder)
    assert saved_models_dir(window.env.settings_path) == folder.resolve()
    assert RuntimeEnv.in_folder(tmp_path).with_models_dir(folder).models_dir == folder.resolve()
    combo = window.controls.model_choice["swapper"]
    qtbot.waitUntil(lambda: combo.findText("inswapper_128") > 0, timeout=30_000)
    window.session.set_clip(ClipInfo(tmp_path / "clip.mp4", 320, 180, 25.0, 25, 1.0))
    assert window.session.build_job(tmp_path / "out.mp4").models_dir == folder.resolve()
    # a folder that cannot be used is one Status line; the saved one stays
    assert not use_models_folder(window, tmp_path / "missing")
    assert window.status.entries[-1].level == "error" and "no such folder" in window.status.entries[-1].text
    (tmp_path / "file.onnx").write_bytes(b"x")
    assert not use_models_folder(window, tmp_path / "file.onnx")
    assert "not a folder" in window.status.entries[-1].text
    assert saved_models_dir(window.env.settings_path) == folder.resolve()


def _trained_run(folder: Path) -> Path:
    from ffdesk.training.contract import contract_document

    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"onnx")
    document = contract_document(64, {"template": "arcface_128"}, 10, {}, {})
    (folder / "model.json").write_text(json.dumps(document))
    return folder


def test_a_trained_run_becomes_the_swapper(qtbot, window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.model_menu import use_trained_model

    run = _trained_run(tmp_path / "alice")
    assert use_trained_model(window, run)
    assert window.session.settings.swapper == str(run.resolve())
    combo = window.controls.model_choice["swapper"]
    assert combo.currentText() == "trained: alice" and combo.isEnabled()
    assert window.controls.precision.isEnabled()
    assert window.controls.applicability.swap == "trained"
    assert not window.controls.mask_regions.isEnabled()
    combo.setCurrentIndex(0)  # back to the embedded swap
    assert window.session.settings.swapper == ""


@pytest.mark.parametrize(
    ("files", "says"),
    [
        (("checkpoint.pt",), "no exported model yet; export it with `ffdesk train export --run"),
        ((), "not a training run (no model.onnx)"),
    ],
)
def test_a_run_without_an_exported_model_says_what_to_do(  # type: ignore[no-untyped-def]
    qtbot, window, tmp_path: Path, files: tuple[str, ...], says: str
) -> None:
    from ffdesk.gui.model_menu import use_trained_model

    run = tmp_path / "bob"
    run.mkdir()
    for name in files:
        (run / name).write_bytes(b"")
    assert not use_trained_model(window, run)
    assert says in window.status.entries[-1].text and window.session.settings.swapper == ""
    (tmp_path / "other.onnx").write_bytes(b"onnx")
    assert not use_trained_model(window, tmp_path / "other.onnx")
    assert "not a model exported by `ffdesk train`" in window.status.entries[-1].text
