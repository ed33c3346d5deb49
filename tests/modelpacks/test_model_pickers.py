"""The desktop app's model pickers offer exactly the supported files that pass verification."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("pytestqt")


@pytest.fixture()
def user_folder(ff_pack: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("inswapper_128", "hyperswap_1a_256"):  # two good swappers with their .hash
        for suffix in (".onnx", ".hash"):
            shutil.copy(ff_pack / f"{name}{suffix}", folder)
    shutil.copy(ff_pack / "arcface_w600k_r50.onnx", folder)  # damaged: its .hash does not match
    (folder / "arcface_w600k_r50.hash").write_text("deadbeef")
    data = (ff_pack / "gfpgan_1.4.onnx").read_bytes()  # half-downloaded
    (folder / "gfpgan_1.4.onnx").write_bytes(data[: len(data) // 2])
    shutil.copy(ff_pack / "gfpgan_1.4.hash", folder)
    shutil.copy(ff_pack / "codeformer.onnx", folder / "gpen_bfr_512.onnx")  # another model's file
    shutil.copy(ff_pack / "yunet_2023_mar.onnx", folder)  # good, without a .hash
    shutil.copy(ff_pack / "yoloface_8n.onnx", folder / "nsfw_1.onnx")  # not a model ffdesk runs
    return folder


def _choices(view, kind: str) -> list[str]:  # type: ignore[no-untyped-def]
    combo = view.model_choice[kind]
    return [combo.itemText(i) for i in range(combo.count())]


def test_pickers_offer_only_the_verified_files(qtbot, user_folder: Path) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.controls import EMBEDDED, ControlsView
    from ffdesk.gui.models import ResidencyModel, SessionModel

    session = SessionModel()
    session.update_settings(swapper="hyperswap_1a_256", recognizer="arcface_w600k_r50")
    view = ControlsView(session, ResidencyModel(), memory_total_mb=4096, models_dir=user_folder)
    qtbot.addWidget(view)
    # While the folder is being checked nothing but the embedded models is offered, and the saved
    # choices are not lost by an edit made meanwhile.
    view.quality.setValue(view.quality.value() + 1)
    assert session.settings.swapper == "hyperswap_1a_256"
    qtbot.waitUntil(lambda: view.model_choice["swapper"].count() > 1, timeout=60_000)
    view.stop()
    assert _choices(view, "swapper") == [EMBEDDED, "hyperswap_1a_256", "inswapper_128"]
    assert _choices(view, "detector") == [EMBEDDED, "yunet_2023_mar"]
    assert _choices(view, "recognizer") == [EMBEDDED]  # its only file fails its .hash
    assert _choices(view, "enhancer") == ["none"]  # half-downloaded, and a file of another model
    assert not view.model_choice["recognizer"].isEnabled()
    assert view.model_choice["swapper"].currentText() == "hyperswap_1a_256"
    # A saved model that did not pass is not kept as the choice.
    assert session.settings.swapper == "hyperswap_1a_256"
    assert session.settings.recognizer == ""
