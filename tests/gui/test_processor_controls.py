"""The Processors panel: FaceFusion's other processors reach the job with their options, are
greyed with the reason where they do not apply, take part in undo, and survive a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ffdesk.gui.history import SettingsHistory
from ffdesk.gui.models import ClipInfo, SessionModel, Settings
from ffdesk.gui.processors import picker_items, processor_choices, usable_processor_models

CATALOG = {
    "age_modifier": ("fran", "styleganex_age"),
    "face_editor": ("live_portrait",),
    "frame_enhancer": ("real_esrgan_x4", "span_kendata_x4"),
    "lip_syncer": ("wav2lip_96", "wav2lip_gan_96"),
    "background_remover": ("modnet", "rmbg_2.0"),
}
FOLDER = {
    "age_modifier": ["fran"],
    "face_editor": ["live_portrait"],
    "frame_enhancer": ["span_kendata_x4"],
    "lip_syncer": ["wav2lip_gan_96"],
    "background_remover": ["modnet"],
}


def _session(tmp_path: Path, *, audio: bool = True, image: bool = False) -> SessionModel:
    session = SessionModel()
    name = "still.png" if image else "clip.mp4"
    session.set_clip(ClipInfo(tmp_path / name, 320, 240, 25.0, 50, 2.0, is_image=image, has_audio=audio))
    session.processor_stages = frozenset(CATALOG) | {"deep_swapper", "expression_restorer"}
    session.set_folder_models(FOLDER)
    return session


def _panel(qtbot: Any, session: SessionModel, **kwargs: Any) -> Any:
    from ffdesk.gui.processor_controls import ProcessorControls

    panel = ProcessorControls(session, catalog=CATALOG, **kwargs)
    qtbot.addWidget(panel)
    panel.resize(380, 900)
    panel.show()
    return panel


def _note(panel: Any, kind: str) -> str:
    note = panel.boxes[kind].note
    return str(note.text()) if note.isVisibleTo(panel) else ""


def _job(session: SessionModel, tmp_path: Path) -> Any:
    return session.build_job(tmp_path / "out.mp4")


def test_the_age_modifier_turned_on_in_the_panel_reaches_the_job(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    session = _session(tmp_path)
    panel = _panel(qtbot, session)
    box = panel.boxes["age_modifier"]
    assert box.model.currentData() == "fran"  # FaceFusion's default, preselected
    assert not box.options.isVisibleTo(panel) and _job(session, tmp_path).age_modifier is None
    box.on.setChecked(True)
    assert box.options.isVisibleTo(panel)
    panel.age_direction.spin.setValue(40)
    assert panel.age_direction.slider.value() == 40
    job = _job(session, tmp_path)
    assert (job.age_modifier, job.age_modifier_direction) == ("fran", 40)
    panel.age_direction.slider.setValue(-65)  # the slider moves the number, and the job follows
    assert _job(session, tmp_path).age_modifier_direction == -65
    box.on.setChecked(False)
    assert _job(session, tmp_path).age_modifier is None


def test_a_face_editor_slider_moved_and_reset(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    session = _session(tmp_path)
    panel = _panel(qtbot, session)
    assert len(panel.face_sliders) == 14
    panel.boxes["face_editor"].on.setChecked(True)
    panel.face_sliders["mouth_smile"].slider.setValue(10)  # 10 steps of 0.05
    panel.face_sliders["head_yaw"].slider.setValue(-3)
    assert panel.face_sliders["mouth_smile"].readout.text() == "+0.50"
    job = _job(session, tmp_path)
    assert job.face_editor == "live_portrait"
    assert job.face_edits == (("mouth_smile", 0.5), ("head_yaw", -0.15))
    panel.face_reset.click()
    assert _job(session, tmp_path).face_edits == ()
    assert all(s.slider.value() == 0 for s in panel.face_sliders.values())
    panel.face_sliders["eye_open_ratio"].slider.setValue(20)
    panel.boxes["face_editor"].on.setChecked(False)  # off: no edits in the job (they need the editor)
    job = _job(session, tmp_path)
    assert job.face_editor is None and job.face_edits == ()
    assert session.settings.face_edits == "eye_open_ratio=1"  # kept for when it is on again


def test_a_model_missing_from_the_folder_is_marked_greyed_and_left_out(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    session = _session(tmp_path)
    panel = _panel(qtbot, session)
    box = panel.boxes["age_modifier"]
    assert box.model.itemText(box.model.findData("styleganex_age")) == "styleganex_age (not in folder)"
    box.on.setChecked(True)
    box.model.setCurrentIndex(box.model.findData("styleganex_age"))
    assert session.settings.age_modifier == "styleganex_age"
    assert (
        _note(panel, "age_modifier") == "styleganex_age is not in the models folder — File > Models folder…"
    )
    assert "color" in box.on.styleSheet() and not panel.age_direction.isEnabled()
    assert _job(session, tmp_path).age_modifier is None
    session.set_folder_models({**FOLDER, "age_modifier": ["fran", "styleganex_age"]})  # the file arrives
    assert _note(panel, "age_modifier") == "" and box.on.styleSheet() == ""
    assert panel.age_direction.isEnabled() and _job(session, tmp_path).age_modifier == "styleganex_age"


def test_the_frame_enhancer_is_greyed_in_preview_mode_with_its_reason(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    session = _session(tmp_path)
    panel = _panel(qtbot, session)
    box = panel.boxes["frame_enhancer"]
    assert box.model.currentData() == "span_kendata_x4"
    box.on.setChecked(True)
    assert session.settings.mode == "preview"
    assert _note(panel, "frame_enhancer") == "off in preview mode; final mode uses it"
    assert "color" in box.on.styleSheet()
    assert panel.frame_enhancer_blend.isEnabled()  # set now for the final render
    panel.frame_enhancer_blend.setValue(60)
    session.update_settings(mode="final")
    assert _note(panel, "frame_enhancer") == "" and box.on.styleSheet() == ""
    job = _job(session, tmp_path)
    assert (job.frame_enhancer, job.frame_enhancer_blend) == ("span_kendata_x4", 60)


def test_lip_sync_needs_a_voice(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    voice = tmp_path / "voice.wav"
    voice.write_bytes(b"RIFF")
    asked: list[str] = []

    def pick(start: str) -> str:
        asked.append(start)
        return str(voice)

    session = _session(tmp_path, audio=False)
    panel = _panel(qtbot, session, pick_file=pick)
    box = panel.boxes["lip_syncer"]
    assert box.model.currentData() == "wav2lip_gan_96"
    box.on.setChecked(True)
    assert _note(panel, "lip_syncer") == "the clip has no audio: choose an audio file"
    assert panel.lip_audio_row.isEnabled() and not panel.lip_weight.isEnabled()
    assert _job(session, tmp_path).lip_syncer is None
    panel.lip_audio_browse.click()
    assert asked == [str(tmp_path)] and session.settings.lip_sync_audio == str(voice)
    assert _note(panel, "lip_syncer") == "" and panel.lip_weight.isEnabled()
    panel.lip_weight.setValue(0.8)
    job = _job(session, tmp_path)
    assert (job.lip_syncer, job.lip_sync_audio, job.lip_sync_weight) == ("wav2lip_gan_96", voice, 0.8)
    panel.lip_audio.clear()  # the clear button: the clip's own audio again, which it lacks
    assert session.settings.lip_sync_audio == "" and _job(session, tmp_path).lip_syncer is None
    still = _session(tmp_path, image=True)
    still.update_settings(lip_syncer_on=True, lip_sync_audio=str(voice))
    assert still.processor_states()["lip_syncer"].reason == "lip sync needs a clip, not a still image"


def test_the_background_colours_and_the_matte_note(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    session = _session(tmp_path)
    panel = _panel(qtbot, session, pick_colour=lambda rgba, title: (0, 177, 64, 255))
    panel.boxes["background_remover"].on.setChecked(True)
    assert "the picture stays as it is" in _note(panel, "background_remover")
    panel.background_despill.click()
    assert panel.background_despill.text() == "0,177,64,255"
    session.update_settings(matte="clip", encoder="prores")
    assert "grey clip beside the output" in _note(panel, "background_remover")
    job = _job(session, tmp_path)
    assert (job.background_remover, job.background_despill) == ("modnet", (0, 177, 64, 255))
    assert job.background_fill == (0, 0, 0, 0) and job.matte == "clip"


def test_undo_and_redo_a_processor_setting(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    session = _session(tmp_path)
    history = SettingsHistory(session)
    panel = _panel(qtbot, session)
    panel.boxes["age_modifier"].on.setChecked(True)
    assert history.undo_text == "&Undo age modifier on"
    history.history.coalesce_s = 0.0  # the next change is a step of its own
    panel.age_direction.setValue(40)
    assert history.undo_text == "&Undo age modifier direction"
    history.undo()
    assert session.settings.age_modifier_direction == 0 and panel.age_direction.value() == 0
    history.undo()
    assert not panel.boxes["age_modifier"].on.isChecked() and _job(session, tmp_path).age_modifier is None
    history.redo()
    history.redo()
    assert _job(session, tmp_path).age_modifier_direction == 40 and panel.age_direction.slider.value() == 40


def test_processor_settings_survive_a_restart(open_window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    w = open_window()
    assert w.docks["Processors"] in w.tabifiedDockWidgets(w.docks["Controls"])
    p = w.processors
    p.boxes["age_modifier"].on.setChecked(True)
    p.age_direction.setValue(-30)
    p.boxes["face_editor"].on.setChecked(True)
    p.face_sliders["head_roll"].slider.setValue(5)
    p.colorizer_size.setCurrentText("512x512")
    w.shutdown()
    again = open_window()
    s = again.session.settings
    assert (s.age_modifier_on, s.age_modifier_direction, s.face_edits) == (True, -30, "head_roll=0.25")
    q = again.processors
    assert q.boxes["age_modifier"].on.isChecked() and q.age_direction.value() == -30
    assert q.face_sliders["head_roll"].value() == 0.25 and q.colorizer_size.currentText() == "512x512"


def test_damaged_saved_processor_values_are_brought_into_range(tmp_path: Path) -> None:
    settings, problem = Settings.checked({"age_modifier_direction": -40, "background_fill": [1, 2, 3, 4]})
    assert (
        problem is None
        and settings.age_modifier_direction == -40
        and settings.background_fill == (1, 2, 3, 4)
    )
    session = _session(tmp_path)
    session.settings = Settings(
        age_modifier_on=True, age_modifier_direction=900, face_editor_on=True,
        face_edits="mouth_smile=7,nose=0.5,head_yaw=nan,eye_gaze_vertical=-0.33",
        background_remover_on=True, background_fill=(300, -5, 0, 12), frame_colorizer_blend=-4,
    )  # fmt: skip
    job = _job(session, tmp_path)
    assert job.age_modifier_direction == 100 and job.background_fill == (255, 0, 0, 12)
    assert job.face_edits == (("eye_gaze_vertical", -0.35), ("mouth_smile", 1.0))
    assert job.frame_colorizer_blend == 0


def test_the_embedded_swaps_jobs_carry_the_mask_settings_its_face_processors_read(tmp_path: Path) -> None:
    from ffdesk.pipeline.plan import embedded_ignores

    session = _session(tmp_path)
    masks = {
        "mask_types": "box,occlusion,area",
        "parser": "bisenet_resnet_34",
        "mask_regions": "skin",
        "mask_blur": 0.7,
        "mask_padding": (10, 0, 0, 0),
        "mask_areas": "mouth",
    }
    session.settings = Settings(age_modifier_on=True, **masks)  # type: ignore[arg-type]
    job = _job(session, tmp_path)
    assert job.age_modifier is not None and job.swapper is None
    assert (job.masks, job.mask_regions, job.mask_blur) == (("box", "occlusion"), (), 0.7)
    assert (job.mask_padding, job.mask_areas) == ((0, 0, 0, 0), ())  # the age modifier reads neither
    assert embedded_ignores(job) == []
    session.set_folder_models({**FOLDER, "deep_swapper": ["iperov/elon_musk_224"]})
    session.settings = Settings(deep_swapper_on=True, deep_swapper="iperov/elon_musk_224", **masks)  # type: ignore[arg-type]
    job = _job(session, tmp_path)  # the deep swapper reads them all
    assert job.masks == ("box", "occlusion", "area", "region=bisenet_resnet_34") and job.mask_regions == (
        "skin",
    )
    assert (job.mask_blur, job.mask_padding, job.mask_areas) == (0.7, (10, 0, 0, 0), ("mouth",))
    assert embedded_ignores(job) == []


@pytest.mark.parametrize(
    ("usable", "texts"),
    [
        (None, ["fran", "styleganex_age"]),
        (("fran",), ["fran", "styleganex_age (not in folder)"]),
    ],
)
def test_picker_items_mark_the_missing_files(usable: tuple[str, ...] | None, texts: list[str]) -> None:
    assert [
        t for t, _v, _m in picker_items("age_modifier", ("fran", "styleganex_age"), usable, "fran")
    ] == texts
    # a catalog without FaceFusion's default still offers it, and a saved unknown value is kept
    values = [v for _t, v, _m in picker_items("age_modifier", (), usable, "my_age.onnx")]
    assert values == ["fran", "my_age.onnx"]


def test_the_pickers_offer_live_portrait_sets_and_deep_swapper_files(tmp_path: Path) -> None:
    from ffdesk.runtime.catalog import load_catalog

    catalog = load_catalog()
    choices = processor_choices(catalog)
    assert choices["expression_restorer"] == choices["face_editor"] == ("live_portrait",)
    assert "iperov/elon_musk_224" in choices["deep_swapper"] and "fran" in choices["age_modifier"]
    restorer_files = [m.name for m in catalog if m.kind == "expression_restorer"]
    (tmp_path / "iperov").mkdir()
    (tmp_path / "iperov" / "elon_musk_224.dfm").write_bytes(b"")
    (tmp_path / "custom").mkdir()
    (tmp_path / "custom" / "my_actor.dfm").write_bytes(b"")
    # the folder scan names the .dfm files it found at their places too
    found = {"expression_restorer": restorer_files, "deep_swapper": ["custom/my_actor", "dfl_amp"]}
    usable = usable_processor_models(catalog, found, tmp_path)
    # the restorer's three files are there, the editor's retargeters and stitcher are not
    assert usable["expression_restorer"] == ["live_portrait"] and usable["face_editor"] == []
    assert usable["deep_swapper"] == ["iperov/elon_musk_224", "custom/my_actor", "dfl_amp"]  # each once


def test_queueing_says_which_processors_are_left_out(window, tiny_clip: Path) -> None:  # type: ignore[no-untyped-def]
    assert window.open_clip(tiny_clip)
    window.session.set_folder_models({})  # the models folder holds no processor model
    window.processors.boxes["age_modifier"].on.setChecked(True)
    window.add_to_queue()
    said = (
        f"{tiny_clip.name}: age modifier left out: fran is not in the models folder — File > Models folder…"
    )
    assert said in [e.text for e in window.status.entries]
    (entry,) = window.queue.entries()
    assert entry.job.age_modifier is None and entry.job.age_modifier_direction == 0


def test_a_job_that_only_runs_a_processor_is_not_called_a_re_encode(window, tiny_clip: Path) -> None:  # type: ignore[no-untyped-def]
    assert window.open_clip(tiny_clip)
    window.session.set_folder_models({"age_modifier": ["fran"]})
    window.session.processor_stages = frozenset({"age_modifier"})
    window.processors.boxes["age_modifier"].on.setChecked(True)
    window.add_to_queue()
    assert not [e for e in window.status.entries if "only re-encodes" in e.text]
    window.processors.boxes["age_modifier"].on.setChecked(False)
    window.add_to_queue()
    assert [e for e in window.status.entries if "only re-encodes" in e.text]


def test_the_lip_syncers_voice_extractor_reaches_the_job(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    session = _session(tmp_path)
    panel = _panel(qtbot, session)
    panel.boxes["lip_syncer"].on.setChecked(True)
    assert _job(session, tmp_path).voice_extractor == "auto"  # FaceFusion's default when present
    panel.voice_extractor.setCurrentIndex(panel.voice_extractor.findData("none"))
    assert session.settings.voice_extractor == "none" and _job(session, tmp_path).voice_extractor == "none"
    session.update_settings(voice_extractor="uvr_mdxnet")  # the panel follows the settings (undo, restore)
    assert panel.voice_extractor.currentData() == "uvr_mdxnet"
