"""What is wrong with a `--swapper` value that cannot name a swapper at all, told in one line
before anything else judges it.

A `--swapper` value is a catalog name, an .onnx file or a run folder of `ffdesk train`
(`stages.trained.model_path` reads it the same way: a relative path not found here is looked for
in the models folder). A value that is none of these (a typo'd folder, an empty one, a faceset)
would otherwise be told apart only by what follows from it: without a source photo it reads as
"a swapper that needs a photo", with one as "an unknown catalog name". Render, queue and live
call `check_swapper_path` where they resolve the swapper, so the user hears the real cause
whether or not a photo was given.
"""

from __future__ import annotations

import os
from pathlib import Path

from ffdesk.errors import UserError
from ffdesk.userpath import expand_user


def check_swapper_path(value: str | None, models_dir: Path | None) -> None:
    """`UserError` (one line) when the `--swapper` value names no swapper there can be: a folder
    or .onnx file that is not there, a folder that is not a training run (an empty one, a
    faceset, a run that has not exported its model yet), a file that is not a model, or a name
    that is neither a path nor a catalog model's. Nothing for a value that may be one: a
    catalog name, an .onnx file (its contents are judged where it is loaded), a run folder
    with its model."""
    if not value:
        return
    problem = swapper_path_problem(value, models_dir)
    if problem is not None:
        raise UserError(problem)


def swapper_path_problem(value: str, models_dir: Path | None) -> str | None:
    """The one line saying why `value` cannot be a swapper (`check_swapper_path`), or None."""
    found = _problem(value, models_dir)
    return None if found is None else f"--swapper {value}: {found}"


def _problem(value: str, models_dir: Path | None) -> str | None:
    """`swapper_path_problem` without the option's name."""
    path = _located(value, models_dir)
    if path.is_dir():
        problem = _folder_problem(path)
        if problem is not None and _catalog_knows(value):
            return None  # a folder that happens to bear a model's name: the name is the model's
        return problem
    if path.exists():
        if path.suffix.lower() == ".onnx" or _catalog_knows(value):
            return None
        return (
            "not a model (give a name from `ffdesk models list`, an .onnx file or a run folder of "
            "`ffdesk train`)"
        )
    if _catalog_knows(value):
        return None
    if path.suffix.lower() == ".onnx":
        return "no such file"
    if _looks_like_a_path(value):
        return "no such folder"
    from ffdesk.runtime.catalog import load_catalog

    try:  # a bare name: the catalog's own words (the names it is close to)
        load_catalog().get(value)
    except UserError as exc:
        return f"no such run folder or model file, and {exc}"
    return None


def _located(value: str, models_dir: Path | None) -> Path:
    """Where `value` is: as given, else (relative, and not here) in the models folder, as
    `stages.trained.model_path` looks for it."""
    path = expand_user(value)
    if models_dir is not None and not path.is_absolute() and not path.exists():
        inside = models_dir / path
        if inside.exists():
            return inside
    return path


def _folder_problem(folder: Path) -> str | None:
    """Why a folder is not a run folder with its model, or None (its model's contract is checked
    here too: a folder holding someone else's model.onnx is no run of ffdesk's)."""
    from ffdesk.pipeline.stages.trained import read_contract
    from ffdesk.training import control
    from ffdesk.training.store import INDEX_NAME

    model = folder / control.MODEL
    if model.is_file():
        if read_contract(model) is None:
            return f"not a run folder (its {control.MODEL} was not made by `ffdesk train`: no contract)"
        return None
    if (folder / INDEX_NAME).is_file():
        return (
            "not a run folder but a faceset (train a model on it: `ffdesk train --src FACESET "
            "--dst FACESET --run RUN`)"
        )
    if any((folder / name).exists() for name in (control.STATUS, control.CHECKPOINT, control.SETTINGS)):
        return (
            f"the training run has no {control.MODEL} yet (a run exports it when it ends; "
            f"`ffdesk train export --run {folder}` exports its last checkpoint now)"
        )
    return f"not a run folder (no {control.MODEL} in it; `ffdesk train` makes one)"


def _looks_like_a_path(value: str) -> bool:
    """Whether `value` is written as a path, not a name: a folder separator, `~` or a dot first
    (catalog names have none of these)."""
    return any(sep in value for sep in {"/", "\\", os.sep}) or value.startswith(("~", "."))


def _catalog_knows(value: str) -> bool:
    """Whether `value` is a catalog model's name."""
    from ffdesk.runtime.catalog import load_catalog

    return value in load_catalog()
