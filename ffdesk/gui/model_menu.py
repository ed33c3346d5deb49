"""File > Models folder… and File > Use trained model…: where the models come from.

The models folder is saved where `ffdesk models dir` saves it (the runtime environment's settings
file), so `ffdesk render` uses the same folder; the window's jobs carry it (`RenderJob.models_dir`
through `SessionModel.models_dir`), so the preview and queued renders use it at once, and the
pickers offer what it holds. A trained model (a run folder of `ffdesk train`, or its exported
.onnx) becomes the swapper. A choice that cannot be used is one line in the Status.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDialog, QFileDialog, QMenu, QWidget

from ffdesk.errors import UserError
from ffdesk.userpath import expand_user

if TYPE_CHECKING:
    from ffdesk.gui.main_window import MainWindow

TRAINED_FILTER = "Exported models (*.onnx);;All files (*)"


@dataclass(frozen=True)
class ModelMenuActions:
    """The two File menu actions."""

    models_folder: QAction
    trained_model: QAction


def add_model_actions(window: MainWindow) -> ModelMenuActions:
    """Add "Models folder…" and "Use trained model…" to the window's File menu (before its
    last separator and Quit)."""
    menu = _file_menu(window)
    quit_separator = next((a for a in reversed(menu.actions()) if a.isSeparator()), None)
    folder = QAction("&Models folder…", menu)
    folder.setStatusTip("Choose the folder of model files (also used by `ffdesk render`)")
    folder.triggered.connect(lambda: choose_models_folder(window))
    trained = QAction("Use &trained model…", menu)
    trained.setStatusTip("Use a model made by `ffdesk train` (its run folder or model.onnx) as the swapper")
    trained.triggered.connect(lambda: choose_trained_model(window))
    if quit_separator is not None:
        menu.insertActions(quit_separator, [folder, trained])
        menu.insertSeparator(folder)
    else:
        menu.addActions([folder, trained])
    return ModelMenuActions(folder, trained)


def _file_menu(window: MainWindow) -> QMenu:
    """The window's File menu: the first menu of its menu bar."""
    for action in window.menuBar().actions():
        menu = action.menu()
        if isinstance(menu, QMenu):
            return menu
    return window.menuBar().addMenu("&File")


def current_models_dir(window: MainWindow) -> Path:
    """The folder the window's jobs use now."""
    return window.session.models_dir or window.env.models_dir


def choose_models_folder(window: MainWindow) -> None:
    name = QFileDialog.getExistingDirectory(window, "Models folder", str(current_models_dir(window)))
    if name:
        use_models_folder(window, Path(name))


def choose_trained_model(window: MainWindow) -> None:
    dialog = RunOrModelDialog(window, current_models_dir(window))
    if dialog.exec() == QDialog.DialogCode.Accepted and dialog.selectedFiles():
        use_trained_model(window, Path(dialog.selectedFiles()[0]))


def is_training_run(folder: Path) -> bool:
    """Whether `folder` looks like a run folder of `ffdesk train` (its settings, checkpoint or model)."""
    from ffdesk.training import control

    return any((folder / name).is_file() for name in (control.SETTINGS, control.CHECKPOINT, control.MODEL))


class RunOrModelDialog(QFileDialog):
    """Choose an exported .onnx, or a training run folder itself (Use on a run folder takes it
    instead of opening it)."""

    def __init__(self, parent: QWidget | None, start: Path) -> None:
        super().__init__(
            parent, "Use trained model: a run folder or its model.onnx", str(start), TRAINED_FILTER
        )
        self.setOption(QFileDialog.Option.DontUseNativeDialog)
        self.setFileMode(QFileDialog.FileMode.ExistingFile)
        self.setLabelText(QFileDialog.DialogLabel.Accept, "Use")

    def accept(self) -> None:
        chosen = self.selectedFiles()
        if chosen and Path(chosen[0]).is_dir() and is_training_run(Path(chosen[0])):
            QDialog.accept(self)
        else:
            super().accept()


def unreadable_folder(folder: Path) -> str | None:
    """Why `folder` cannot serve as the models folder, or None when it can be listed."""
    if not folder.exists():
        return "no such folder"
    if not folder.is_dir():
        return "not a folder"
    try:
        with os.scandir(folder) as entries:
            next(entries, None)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return None


def use_models_folder(window: MainWindow, folder: Path) -> bool:
    """Make `folder` the models folder: saved for the command line, used by the window's jobs,
    offered by the pickers. False (and one Status line) when it cannot be read or saved."""
    from ffdesk.runtime.files import save_models_dir

    folder = expand_user(folder).resolve()
    problem = unreadable_folder(folder)
    if problem is not None:
        window.status.post("error", f"models folder {folder}: {problem}")
        return False
    try:
        save_models_dir(folder, window.env)
    except (UserError, OSError) as exc:
        window.status.post("error", f"models folder {folder}: not saved ({exc})")
        return False
    window.session.set_models_dir(folder)
    window.controls.rescan(folder)
    window.status.post("info", f"models folder: {folder} (ffdesk render uses it too)")
    return True


def trained_model_problem(path: Path) -> str | None:
    """Why `path` (a run folder or an .onnx) is not a model made by `ffdesk train` that can be
    used, saying what to do; None when it is one."""
    from ffdesk.pipeline.stages.trained import read_contract
    from ffdesk.training import control

    if path.is_dir():
        model = path / control.MODEL
        if not model.is_file():
            if (path / control.CHECKPOINT).is_file():
                return (
                    f"{path.name}: no exported model yet; export it with "
                    f"`ffdesk train export --run {path}` (or Export model in the Training monitor)"
                )
            return (
                f"{path.name}: not a training run (no {control.MODEL}); choose a run folder of `ffdesk train`"
            )
        path = model
    try:
        contract = read_contract(path)
    except UserError as exc:
        return str(exc)
    if contract is None:
        return f"{path.name}: not a model exported by `ffdesk train`"
    return None


def use_trained_model(window: MainWindow, path: Path) -> bool:
    """Make the trained model at `path` (its run folder or exported .onnx) the swapper. False
    (and one Status line) when it is not one."""
    path = expand_user(path).resolve()
    problem = trained_model_problem(path)
    if problem is not None:
        window.status.post("warning", problem)
        return False
    value = str(path)
    window.controls.offer_trained(value)
    window.session.update_settings(swapper=value)
    window.status.post("info", f"swapper: the trained model {path}")
    return True
