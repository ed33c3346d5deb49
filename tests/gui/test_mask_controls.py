"""The mask rows of the controls: FaceFusion's mask settings reach the job, are greyed with their
reason where the swap does not use them, and old saved settings still load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ffdesk.gui.models import ClipInfo, ResidencyModel, SessionModel, Settings

PACK = {"swapper": ["inswapper_128"], "enhancer": ["gfpgan_1.4"], "parser": ["bisenet_resnet_34"]}


def _view(qtbot: Any, session: SessionModel) -> Any:
    from ffdesk.gui.controls import ControlsView

    view = ControlsView(session, ResidencyModel(), memory_total_mb=8192, models=PACK)
    qtbot.addWidget(view)
    view.show()
    return view


def _note(view: Any, control: str) -> str:
    note = view.control_notes[control]
    return str(note.text()) if note.isVisibleTo(view) else ""


def _session(tmp_path: Path) -> SessionModel:
    session = SessionModel()
    session.set_clip(ClipInfo(tmp_path / "clip.mp4", 320, 240, 25.0, 50, 2.0))
    return session


def test_the_mask_controls_reach_the_job(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    session = _session(tmp_path)
    view = _view(qtbot, session)
    view.model_choice["swapper"].setCurrentText("inswapper_128")
    job = session.build_job(tmp_path / "out.mp4")
    assert (job.masks, job.mask_blur, job.mask_padding, job.mask_areas) == (("box",), 0.3, (0, 0, 0, 0), ())
    view.masks.types["occlusion"].setChecked(True)
    view.masks.types["area"].setChecked(True)
    view.masks.blur.setValue(0.55)
    view.masks.padding["top"].setValue(10)
    view.masks.padding["bottom"].setValue(25)
    view.masks.areas["upper-face"].setChecked(False)
    view.model_choice["parser"].setCurrentText("bisenet_resnet_34")
    job = session.build_job(tmp_path / "out.mp4")
    assert job.masks == ("box", "occlusion", "area", "region=bisenet_resnet_34")
    assert job.mask_blur == 0.55 and job.mask_padding == (10, 0, 25, 0)
    assert job.mask_areas == ("lower-face", "mouth")
    # the box left out: FaceFusion's minimum of what is left
    view.masks.types["box"].setChecked(False)
    assert session.build_job(tmp_path / "out.mp4").masks == ("occlusion", "area", "region=bisenet_resnet_34")
    # the settings show in the widgets again (a saved session reopened)
    other = SessionModel()
    other.settings = session.settings
    again = _view(qtbot, other)
    assert again.masks.settings_of() == view.masks.settings_of()
    assert again.masks.padding["bottom"].value() == 25 and not again.masks.areas["upper-face"].isChecked()


def test_masks_the_swap_does_not_use_are_greyed_with_the_reason(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    session = _session(tmp_path)
    view = _view(qtbot, session)
    rows = view.masks.rows()
    for name in ("mask_types", "mask_blur", "mask_padding", "mask_areas"):  # the embedded swap
        assert not rows[name].isEnabled() and "no face masks" in _note(view, name), name
    view.model_choice["swapper"].setCurrentText("inswapper_128")
    assert (
        rows["mask_types"].isEnabled() and rows["mask_padding"].isEnabled() and rows["mask_blur"].isEnabled()
    )
    assert not rows["mask_areas"].isEnabled() and _note(view, "mask_areas") == "needs the area mask"
    view.masks.types["area"].setChecked(True)
    assert rows["mask_areas"].isEnabled() and _note(view, "mask_areas") == ""
    view.masks.types["box"].setChecked(False)
    assert not rows["mask_padding"].isEnabled() and _note(view, "mask_padding") == "needs the box mask"
    assert not rows["mask_blur"].isEnabled()
    view.model_choice["enhancer"].setCurrentText("gfpgan_1.4")
    view.mode.setCurrentText("final")
    assert rows["mask_blur"].isEnabled() and _note(view, "mask_blur") == ""  # the enhancer's box


def test_with_the_embedded_swap_the_masks_a_face_processor_reads_come_back(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The age modifier after the embedded swap pastes under the occlusion mask and the box's
    blur: those controls come back, the others stay greyed, and the notes say who reads them."""
    session = _session(tmp_path)
    view = _view(qtbot, session)
    rows = view.masks.rows()
    session.update_settings(age_modifier_on=True)
    assert rows["mask_types"].isEnabled() and rows["mask_blur"].isEnabled()
    for name in ("mask_padding", "mask_areas"):
        assert not rows[name].isEnabled(), name
        assert (
            _note(view, name)
            == "the embedded swap has its own hull mask, and the age modifier does not use it"
        )
    assert "the masks apply to the age modifier" in view.notes.text()
    assert _note(view, "mask_types") == "the age modifier uses box and occlusion only"
    session.update_settings(lip_syncer_on=True)  # it reads the box's padding
    assert rows["mask_padding"].isEnabled() and not rows["mask_areas"].isEnabled()
    session.update_settings(age_modifier_on=False, lip_syncer_on=False)
    assert not rows["mask_types"].isEnabled() and "no face masks" in _note(view, "mask_types")


def test_the_embedded_swap_gets_no_mask_settings_it_would_not_use(tmp_path: Path) -> None:
    """Masks set for a model swap stay in the settings when the swap goes back to the embedded
    one (greyed), but its jobs carry the defaults: nothing for the render to warn about."""
    from ffdesk.pipeline.job import RenderJob
    from ffdesk.pipeline.plan import embedded_ignores

    session = _session(tmp_path)
    session.settings = Settings(
        swapper="",
        mask_types="box,occlusion,area",
        mask_blur=0.7,
        mask_padding=(10, 0, 0, 0),
        mask_areas="mouth",
    )
    job = session.build_job(tmp_path / "out.mp4")
    defaults = RenderJob(target=job.target, output=job.output)
    assert (job.masks, job.mask_blur, job.mask_padding, job.mask_areas) == (
        defaults.masks, defaults.mask_blur, defaults.mask_padding, defaults.mask_areas,
    )  # fmt: skip
    assert embedded_ignores(job) == []
    assert session.settings.mask_types == "box,occlusion,area"  # kept for when a model swaps again


def test_old_saved_settings_load_with_the_masks_they_had() -> None:
    old = {"swapper": "inswapper_128", "parser": "bisenet_resnet_34", "mask_regions": "skin"}
    settings, problem = Settings.checked(old)
    assert problem is None and settings.mask_types == "box" and settings.mask_padding == (0, 0, 0, 0)
    saved = {**old, "mask_padding": [5, 10, 15, 20], "mask_blur": 0.4, "mask_types": "box,area"}
    settings, problem = Settings.checked(saved)
    assert problem is None and settings.mask_padding == (5, 10, 15, 20) and settings.mask_blur == 0.4
    bad, problem = Settings.checked({**old, "mask_padding": [1, 2], "mask_blur": "soft"})
    assert problem == 'the saved mask_blur is "soft"' and (bad.mask_blur, bad.mask_padding) == (
        0.3,
        (0, 0, 0, 0),
    )


def test_damaged_mask_values_are_brought_into_range_in_the_job(tmp_path: Path) -> None:
    session = _session(tmp_path)
    session.settings = Settings(
        swapper="inswapper_128", mask_types="box,hat,area", mask_blur=3.0, mask_padding=(500, 0, 0, 0),
        mask_areas="mouth,nose",
    )  # fmt: skip
    job = session.build_job(tmp_path / "out.mp4")
    assert job.masks == ("box", "area") and job.mask_blur == 1.0
    assert job.mask_padding == (100, 0, 0, 0) and job.mask_areas == ("mouth",)
