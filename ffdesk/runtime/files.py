"""The user's models folder: where it is, what is in it, and whether each file is what it claims.

Integrity rules (`verify`):
- a file that does not parse as ONNX -> "truncated or not an ONNX model";
- what the file declares, read without its external data (`integrity.model_problems`):
  external data outside the model's folder (absolute, `..`, a link pointing out), missing or
  too short for its offsets and lengths; a tensor or constant shape above
  `integrity.MAX_TENSOR_ELEMENTS` elements, or holding fewer bytes than its dims say;
- a `<stem>.hash` sidecar (FaceFusion: zlib CRC32 in hex) that does not match -> "hash mismatch";
  a catalog `sha256` that does not match -> "hash mismatch (sha256)"; a sidecar that cannot be
  one (larger than `SIDECAR_MAX_BYTES`, a FIFO or a device, unreadable) is not read, and is named:
  "its sidecar NAME.hash is ..." (`read_sidecar`);
- inputs/outputs that break the catalog contract (names, ranks, fixed dims, dtypes).
A missing sidecar is *not* a problem: the file is reported as "unverified" (`hash_status`), since
users often copy files without them; `ffdesk models verify --strict` treats it as an error.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ffdesk.errors import UserError
from ffdesk.runtime.catalog import Catalog, Dim, ModelSpec, TensorSpec, is_dynamic
from ffdesk.runtime.env import RuntimeEnv, write_setting
from ffdesk.runtime.integrity import (
    CHUNK,
    crc32_hex,
    external_locations,
    file_fingerprint,
    model_problems,
    read_sidecar,
    save_onnx_atomic,
    sha256_hex,
    sidecar_path,
    write_atomic,
    write_sidecar,
)
from ffdesk.runtime.onnx_read import Structure, read_structure
from ffdesk.runtime.precision import cached_variants
from ffdesk.units import format_bytes
from ffdesk.userpath import expand_user, not_a_file

__all__ = [
    "CHUNK",
    "crc32_hex",
    "file_fingerprint",
    "save_onnx_atomic",
    "sha256_hex",
    "sidecar_path",
    "write_atomic",
    "write_sidecar",
]

HashStatus = Literal["ok", "mismatch", "unverified"]

_ONNX_DTYPES = {1: "float32", 10: "float16", 11: "float64", 7: "int64", 6: "int32", 2: "uint8", 9: "bool"}


# ---- the models folder --------------------------------------------------------------------


def default_models_dir(env: RuntimeEnv) -> Path:
    """`<user data dir>/ffdesk/models`."""
    return env.default_models_dir


def resolve_models_dir(explicit: Path | str | None, env: RuntimeEnv) -> Path:
    """`--models-dir` if given, else the environment's (the saved setting, else the default);
    `UserError` (one line) when the folder named is a file or cannot be read (a missing one is
    not refused here: some callers make it, the others name the files they look for in it)."""
    folder = expand_user(explicit).resolve() if explicit else env.models_dir
    not_a_file(folder, "the models folder")
    try:
        with os.scandir(folder):
            pass
    except FileNotFoundError:
        pass
    except OSError as exc:  # the folder named, not each model in it "cannot be read" later
        raise UserError(f"the models folder {folder} cannot be read ({exc.strerror or exc})") from None
    return folder


def save_models_dir(path: Path | str, env: RuntimeEnv) -> Path:
    """Remember `path` as the models folder for later runs (in the environment's settings file);
    `UserError` for a file, which would stay the models folder of every later run."""
    resolved = expand_user(path).resolve()
    not_a_file(resolved, "the models folder")
    write_setting(env.settings_path, "models_dir", str(resolved))
    return resolved


def model_path(spec: ModelSpec, models_dir: Path | str) -> Path:
    """Where `spec`'s file lives in the models folder `models_dir` (it may not exist)."""
    return expand_user(models_dir).resolve() / spec.file


def find_model(spec: ModelSpec, models_dir: Path | str) -> Path:
    """`spec`'s file, or a `UserError` saying where it was looked for."""
    path = model_path(spec, models_dir)
    folder = expand_user(models_dir).resolve()
    if not path.is_file() and not folder.exists():
        raise UserError(
            f"model {spec.name} not found: the models folder {folder} does not exist (give "
            "--models-dir, save one with `ffdesk models set-dir`, or `ffdesk models import` the file)"
        )
    if not path.is_file():
        raise UserError(
            f"{path}: model {spec.name} not found (put the file there, or use --models-dir / "
            f"`ffdesk models import`)"
        )
    return path


# ---- hashes -------------------------------------------------------------------------------


def hash_status(spec: ModelSpec | None, path: Path) -> HashStatus:
    """ "ok", "mismatch" or "unverified" (no sidecar and no catalog sha256). A damaged sidecar
    (`read_sidecar`) checks nothing: "unverified" unless the sha256 was checked (`verify` names
    the damage)."""
    checked = False
    if spec is not None and spec.sha256:
        if sha256_hex(path) != spec.sha256.lower():
            return "mismatch"
        checked = True
    side = read_sidecar(path)
    if side.crc32 is not None:
        if crc32_hex(path) != side.crc32:
            return "mismatch"
        checked = True
    return "ok" if checked else "unverified"


# ---- contracts ----------------------------------------------------------------------------


def _dims(value_info: Any) -> tuple[Dim, ...]:
    dims: list[Dim] = []
    for d in value_info.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or -1)
    return tuple(dims)


def _fmt(shape: Iterable[Dim]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _accepted_dtypes(role: str, want: str) -> tuple[str, ...]:
    """The element types a tensor may have: the catalog's, and for a float32 output also float16
    (a half-precision build; every processor converts outputs to float32 as it reads them)."""
    if role == "output" and want == "float32":
        return ("float32", "float16")
    return (want,)


def _check_tensor(file: str, role: str, label: str, want: TensorSpec, got: Any) -> list[str]:
    problems: list[str] = []
    dims = _dims(got)
    elem = _ONNX_DTYPES.get(got.type.tensor_type.elem_type, str(got.type.tensor_type.elem_type))
    if len(dims) != want.rank:
        return [f"{file}: {role} {label} is {_fmt(dims)}, expected {_fmt(want.shape)}"]
    for axis, (g, w) in enumerate(zip(dims, want.shape, strict=True)):
        if is_dynamic(w):
            continue
        if is_dynamic(g):
            if axis == 0:  # a batchable re-export of a batch-1 file is fine
                continue
            problems.append(f"{file}: {role} {label} is {_fmt(dims)}, expected {_fmt(want.shape)}")
            break
        if int(g) != int(w):
            problems.append(f"{file}: {role} {label} is {_fmt(dims)}, expected {_fmt(want.shape)}")
            break
    if elem not in _accepted_dtypes(role, want.dtype):
        problems.append(f"{file}: {role} {label} is {elem}, expected {want.dtype}")
    return problems


def _graph_inputs(model: Any) -> list[Any]:
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def input_signature(model: Any) -> str:
    """A loaded model's inputs as `'name' [dims]`, comma-separated (for messages)."""
    return ", ".join(f"{i.name!r} {_fmt(_dims(i))}" for i in _graph_inputs(model)) or "none"


def check_contract(spec: ModelSpec, model: Any, file: str | None = None) -> list[str]:
    """Problems with a loaded `onnx.ModelProto` against `spec`'s inputs and outputs.

    Outputs are compared by position. A file may have more outputs than the catalog lists where
    the processor reads fixed positions (`spec.extra_outputs`): the extra ones are never read.
    """
    file = file or spec.file
    graph = model.graph
    inputs = _graph_inputs(model)
    problems: list[str] = []
    by_name = {i.name: i for i in inputs}
    named = [w for w in spec.inputs if w.name]
    if named:
        for w in spec.inputs:
            if w.name not in by_name:
                have = ", ".join(repr(i.name) for i in inputs) or "none"
                problems.append(f"{file}: missing input {w.name!r} (has {have})")
                continue
            problems += _check_tensor(file, "input", repr(w.name), w, by_name[w.name])
    if len(inputs) != len(spec.inputs):
        problems.append(f"{file}: has {len(inputs)} inputs, expected {len(spec.inputs)}")
    elif not named:
        for idx, (w, g) in enumerate(zip(spec.inputs, inputs, strict=True)):
            problems += _check_tensor(file, "input", f"{idx} ({g.name!r})", w, g)
    outputs = list(graph.output)
    required = [w for w in spec.outputs if not w.optional]
    most = None if spec.extra_outputs else len(spec.outputs)
    if len(outputs) < len(required) or (most is not None and len(outputs) > most):
        want = f"at least {len(required)}" if most is None else str(len(spec.outputs))
        problems.append(f"{file}: has {len(outputs)} outputs, expected {want}")
    else:
        for idx, (w, g) in enumerate(zip(spec.outputs, outputs, strict=False)):
            label = repr(w.name) if w.name else f"{idx} ({g.name!r})"
            if w.name and g.name != w.name:
                problems.append(f"{file}: output {idx} is {g.name!r}, expected {w.name!r}")
                continue
            problems += _check_tensor(file, "output", label, w, g)
    if spec.option("projection") == "last_initializer":
        shape = tuple(spec.option("projection_shape", (512, 512)))
        last = graph.initializer[-1] if graph.initializer else None
        if last is None or tuple(last.dims) != shape:
            got = _fmt(last.dims) if last is not None else "absent"
            problems.append(
                f"{file}: last initializer (identity projection) is {got}, expected {_fmt(shape)}"
            )
    return problems


def describe_reads(spec: ModelSpec, model: Any) -> str:
    """What ffdesk reads of a (verified) file's outputs, e.g. "reads output 0 of 3 (1-2 unused)"."""
    outputs = list(model.graph.output)
    used = min(len(spec.outputs), len(outputs))
    half = [
        str(i)
        for i, (w, g) in enumerate(zip(spec.outputs, outputs, strict=False))
        if w.dtype == "float32" and g.type.tensor_type.elem_type == 10
    ]
    which = "output 0" if used == 1 else f"outputs 0-{used - 1}"
    text = f"reads {which} of {len(outputs)}"
    if len(outputs) > used:
        rest = str(used) if len(outputs) == used + 1 else f"{used}-{len(outputs) - 1}"
        text += f" by position ({rest} not used)"
    if half:
        text += f"; float16 output {','.join(half)} read as float32"
    return text


def load_onnx(path: Path) -> Any:
    """`onnx.ModelProto` of `path` without its large initializers' data (the structure, inputs,
    outputs and every tensor's type and dims: `load_structure`); `UserError` "truncated or not
    an ONNX model" otherwise."""
    return load_structure(path).model


def refuse_unsafe(path: Path) -> Structure:
    """`load_structure(path)` for a model file no catalog entry verifies (a trained swapper, a
    model given by a path the catalog does not know): `UserError` naming what `model_problems`
    finds unsafe in it (a constant shape of billions of elements, external data outside its
    folder), as `verify` refuses it in a catalog model."""
    structure = load_structure(path)
    problems = model_problems(structure.model, path, structure.dropped)
    if problems:
        raise UserError("; ".join(problems))
    return structure


def load_structure(path: Path) -> Structure:
    """`path` read without its weights' bytes (`ffdesk.runtime.onnx_read`: a 527 MiB model
    takes a few MiB, where `onnx.load` took twice the file); `UserError` "truncated or not an
    ONNX model" when it does not parse or has no graph."""
    try:
        structure = read_structure(path)
    except Exception as exc:  # noqa: BLE001 - framing, protobuf and OS errors alike
        raise UserError(f"{path.name}: truncated or not an ONNX model") from exc
    model = structure.model
    if not model.graph.node or not model.graph.output:
        raise UserError(f"{path.name}: truncated or not an ONNX model")
    return structure


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else ""


def verify(spec: ModelSpec, path: Path, *, strict: bool = False) -> list[str]:
    """Every problem with `path` as the file for `spec` (empty when it is good), one line each
    naming the file: what it declares (`integrity.model_problems`), its contract, its hash. With
    `strict`, a missing hash sidecar is a problem too. Never raises for what a file holds."""
    return _check(spec, Path(path), strict=strict).problems


@dataclass(frozen=True)
class _Checked:
    """What one read of a model file found: `verify`'s problems, its `hash_status` (None when
    the file is missing or does not parse) and the external data files it names."""

    problems: list[str]
    hash: HashStatus | None = None
    data: tuple[str, ...] = ()


def _check(spec: ModelSpec, path: Path, *, strict: bool = False) -> _Checked:
    name = path.name
    if not path.is_file():
        return _Checked([f"{name}: missing"])
    if path.stat().st_size == 0:
        return _Checked([f"{name}: empty file"])
    data: tuple[str, ...] = ()
    if spec.framework == "torch":
        problems = []
        try:
            load_torch_weights(path)
        except UserError as exc:
            problems.append(str(exc))
    else:
        try:
            structure = load_structure(path)
        except UserError as exc:
            return _Checked([str(exc)])
        model = structure.model
        try:
            problems = model_problems(model, path, structure.dropped) + check_contract(spec, model, name)
            data = tuple(external_locations(model))
        except Exception as exc:  # noqa: BLE001 - a hostile file must never stop a check of the folder
            problems = [f"{name}: cannot be checked ({type(exc).__name__}: {_first_line(exc)})"]
        del model
    status = hash_status(spec, path)
    damage = read_sidecar(path).damage
    if status == "mismatch":
        problems.insert(0, f"{name}: hash mismatch (file damaged or a different build)")
    elif damage is not None:
        problems.insert(0, f"{name}: its sidecar {sidecar_path(path).name} {damage}")
    elif status == "unverified" and strict:
        problems.insert(0, f"{name}: no {sidecar_path(path).name} sidecar to check the file against")
    return _Checked(problems, status, data)


def reads_of(spec: ModelSpec, path: Path) -> str:
    """`describe_reads` of a file on disk ("" for torch weights or a file that does not load)."""
    if spec.framework != "onnx":
        return ""
    try:
        return describe_reads(spec, load_onnx(Path(path)))
    except UserError:
        return ""


def load_torch_weights(path: Path) -> dict[str, Any]:
    """A state dict from `.safetensors`, or `.pt`/`.pth` with `torch.load(weights_only=True)`:
    no pickled code from a model file ever runs."""
    path = Path(path)
    if path.suffix == ".safetensors":
        try:
            from safetensors.torch import load_file
        except ImportError as exc:
            raise UserError(f"{path.name}: reading .safetensors needs the safetensors package") from exc
        return dict(load_file(str(path)))
    import pickle

    import torch

    try:
        data = torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise UserError(f"{path.name}: refused (not plain weights: {str(exc).splitlines()[0]})") from exc
    except (RuntimeError, EOFError, OSError, ValueError) as exc:
        raise UserError(f"{path.name}: truncated or not a torch weights file") from exc
    if isinstance(data, dict) and "state_dict" in data and isinstance(data["state_dict"], dict):
        data = data["state_dict"]
    if not isinstance(data, dict):
        raise UserError(f"{path.name}: not a state dict ({type(data).__name__})")
    return dict(data)


# ---- listing and importing ----------------------------------------------------------------


@dataclass(frozen=True)
class ModelStatus:
    """One catalog model as found in the models folder."""

    name: str
    kind: str
    file: str
    present: bool
    size_bytes: int
    expected_bytes: int
    hash: HashStatus | None
    problems: tuple[str, ...]
    variants: tuple[str, ...]

    @property
    def verified(self) -> bool:
        return self.present and not self.problems and self.hash == "ok"


def model_status(
    spec: ModelSpec, models_dir: Path, *, check: bool = True, variants_dir: Path | None = None
) -> ModelStatus:
    """`spec`'s file in `models_dir`; `variants_dir` is where its precision variants are cached
    (default: the environment's)."""
    path = models_dir / spec.file
    if not path.is_file():
        return ModelStatus(spec.name, spec.kind, spec.file, False, 0, spec.size_bytes, None, (), ())
    problems = tuple(verify(spec, path)) if check else ()
    status = hash_status(spec, path) if check else None
    return ModelStatus(
        spec.name,
        spec.kind,
        spec.file,
        True,
        path.stat().st_size,
        spec.size_bytes,
        status,
        problems,
        cached_variants(path, variants_dir),
    )


def _atomic_copy(src: Path, dest: Path) -> None:
    write_atomic(dest, lambda tmp: shutil.copyfile(src, tmp))


@dataclass(frozen=True)
class ImportResult:
    source: Path
    name: str
    dest: Path
    problems: tuple[str, ...]
    hash: HashStatus
    data: tuple[tuple[Path, Path], ...] = ()
    """The external data files copied with the model: (from, to) each."""


DESCRIPTION_SUFFIXES = (".hash", ".toml", ".json")
"""What ffdesk reads beside a model file as part of it: its `.hash` sidecar, a `<stem>.toml`
description (its contract) and a trained model's `<stem>.json` contract."""


def external_data_problems(file: str, data: Iterable[str], catalog: Catalog) -> list[str]:
    """What `models import` refuses of the external data files a model names (`data`, relative to
    its folder), one line each naming the model `file`: a file that is not plain data, which its
    copy would install in the models folder as something else: a model file (`MODEL_SUFFIXES`),
    one named as a catalog model's file, name or sidecar, or what ffdesk reads beside a model as
    part of it (`DESCRIPTION_SUFFIXES`). Real external data (`model.onnx.data`, `weights.bin`)
    is none of these."""
    taken: dict[str, str] = {}
    for m in catalog.models:
        for name, what in ((m.file, "file"), (m.hash_file, "sidecar"), (m.name, "name")):
            taken.setdefault(name.casefold(), f"named as catalog model {m.name}'s {what}")
    problems = []
    for loc in data:
        name = loc.replace("\\", "/").rsplit("/", 1)[-1]
        suffix = Path(name).suffix.lower()
        if name.casefold() in taken:
            what = taken[name.casefold()]
        elif suffix in MODEL_SUFFIXES:
            what = f"a model file ({suffix})"
        elif suffix in DESCRIPTION_SUFFIXES:
            what = f"a model's {suffix} (read beside a model as part of it)"
        else:
            continue
        problems.append(
            f"{file}: external data {loc!r} is {what}, not plain data: refused (importing the model "
            "would install it in the models folder too)"
        )
    return problems


def import_model(
    src: Path, catalog: Catalog, models_dir: Path, *, as_name: str | None = None, replace: bool = False
) -> ImportResult:
    """Verify `src` against its catalog entry (by file name, or `as_name`), then copy it, the
    external data files it names (to the same places relative to it; each plain data, not a
    model or a file read beside one: `external_data_problems`) and its sidecar into
    `models_dir`, each atomically, the model last (`ImportResult.data`: the data files copied).
    A DeepFaceLab `.dfm` the catalog does not know by file name goes to `<scope>/<name>.dfm`
    there, as FaceFusion keeps it and as `models list` and `--deep-swapper SCOPE/NAME` read it
    (`import_target`). A file with problems is not copied, and neither is one whose name (or one
    of whose data files' names) another file already has there unless `replace` (the same file
    again is fine)."""
    src = Path(src)
    if not src.is_file():
        raise UserError(f"{src}: no such file")
    target = import_target(src, catalog, models_dir, as_name)
    spec, dest = target.spec, target.dest
    checked = _check(spec, src) if spec is not None else _Checked([f"{src.name}: {target.why}"])
    problems, status, data = checked.problems, checked.hash or "unverified", checked.data
    if not problems:
        problems = external_data_problems(src.name, data, catalog)
    if target.scoped:  # a scope folder's file, named with its folder as FaceFusion keeps it
        shown = f"{Path(os.path.abspath(src)).parent.name}/{src.name}"
        problems = [_renamed(line, src.name, shown) for line in problems]
    if not problems and not replace and _another_file_there(src, dest):
        problems = [
            f"{dest.name}: {dest.parent} already has a different {target.name}; "
            "add --replace to put this one in its place"
        ]
    if not problems and not replace and dest.resolve() != src.resolve():
        taken = [loc for loc in data if _another_file_there(src.parent / loc, dest.parent / loc)]
        if taken:
            problems = [
                f"{src.name}: {dest.parent} already has a different {taken[0]} (this model's external "
                "data; another model's?); add --replace to put this one in its place"
            ]
    if problems:
        return ImportResult(src, target.name, dest, tuple(problems), status)
    dest.parent.mkdir(parents=True, exist_ok=True)
    copied: list[tuple[Path, Path]] = []
    if dest.resolve() != src.resolve():
        for loc in data:  # verified above: inside the source's folder, present and long enough
            (dest.parent / loc).parent.mkdir(parents=True, exist_ok=True)
            _atomic_copy(src.parent / loc, dest.parent / loc)
            copied.append((src.parent / loc, dest.parent / loc))
        _atomic_copy(src, dest)
        kept = read_sidecar(src)  # read as `hash_status` read it: never more than a CRC32's bytes
        if kept.crc32 is not None:
            write_atomic(sidecar_path(dest), lambda tmp: Path(tmp).write_bytes(kept.raw))
        else:
            # Record the CRC32 now so later damage to the copy is caught.
            write_sidecar(dest)
    return ImportResult(src, target.name, dest, (), status, tuple(copied))


@dataclass(frozen=True)
class ImportTarget:
    """What a file is imported as: the model's name, where it goes, and the contract it is
    checked against (None for a family file that is no such model: `why` says what it is)."""

    name: str
    dest: Path
    spec: ModelSpec | None
    why: str = ""

    @property
    def scoped(self) -> bool:
        """Whether it goes to a scope folder (`<scope>/<name>.dfm`)."""
        return "/" in self.name


def import_target(src: Path, catalog: Catalog, models_dir: Path, as_name: str | None = None) -> ImportTarget:
    """What `src` is imported as into `models_dir`: the catalog entry `as_name` or the one that
    knows its file name, at `<models_dir>/<its file>`; a DeepFaceLab `.dfm` otherwise as
    `<scope>/<name>` at `<models_dir>/<scope>/<name>.dfm`, checked against its family's contract
    (`family_spec`), the scope and name from `as_name` (`SCOPE/NAME`) or its folder's name and
    its stem (`scoped_name`, as FaceFusion scopes them). `UserError` (one line) for a name the
    catalog does not know, a `SCOPE/NAME` for another kind of file or with a path trick in it,
    or a `.dfm` whose folder's name cannot be a scope."""
    from dataclasses import replace

    family = src.suffix.lower() in FAMILY_SUFFIXES
    if as_name is not None and "/" not in as_name:
        spec = catalog.get(as_name)
        return ImportTarget(spec.name, models_dir / spec.file, spec)
    if as_name is None and (known := catalog.by_file(src.name)) is not None:
        return ImportTarget(known.name, models_dir / known.file, known)
    if not family and as_name is not None:
        raise UserError(
            f"--as {as_name!r}: SCOPE/NAME is for a DeepFaceLab .dfm file; {src.name} takes a "
            "catalog model name"
        )
    if not family:
        raise UserError(
            f"{src.name}: not a model the catalog knows (use --as NAME; known: {', '.join(catalog.names)})"
        )
    name = as_name if as_name is not None else scoped_name(src)
    parts = split_scoped(name) if name is not None else None
    if parts is None and as_name is not None:
        raise UserError(
            f"--as {as_name!r}: a model name or SCOPE/NAME, not a path (one '/', no '\\', '..' "
            "or leading '.')"
        )
    if parts is None:
        raise UserError(
            f"{src}: its folder's name cannot be a scope (FaceFusion keeps a .dfm at "
            "<scope>/<name>.dfm); use --as SCOPE/NAME"
        )
    scope, stem = parts
    scoped = f"{scope}/{stem}"
    dest = models_dir / scope / f"{stem}.dfm"
    found = family_spec(catalog, src)
    if isinstance(found, str):
        return ImportTarget(scoped, dest, None, found)
    return ImportTarget(scoped, dest, replace(found, name=scoped))


def is_plain_name(text: str) -> bool:
    """Whether `text` is one plain file name: not empty, no path separator, no `..`, no leading
    dot, printable (what a model name or a scope may be, so it never leads out of a folder)."""
    return bool(text) and not (
        "/" in text
        or "\\" in text
        or (os.altsep is not None and os.altsep in text)
        or ".." in text
        or text.startswith(".")
        or not text.isprintable()
    )


def split_scoped(name: str) -> tuple[str, str] | None:
    """`(scope, name)` of a `SCOPE/NAME` (exactly one `/`, both parts `is_plain_name`), else None."""
    scope, slash, stem = name.partition("/")
    if not slash or not is_plain_name(scope) or not is_plain_name(stem):
        return None
    return scope, stem


def scoped_name(path: Path) -> str | None:
    """`<scope>/<name>` of a family file as FaceFusion scopes it: its folder's name and its stem
    (`iperov/elon_musk_224.dfm`: `iperov/elon_musk_224`); None when either is no plain name."""
    absolute = Path(os.path.abspath(path))
    name = f"{absolute.parent.name}/{absolute.stem}"
    return name if split_scoped(name) is not None else None


def _another_file_there(src: Path, dest: Path) -> bool:
    """Whether `dest` exists and holds other bytes than `src` (a link there counts as another)."""
    import filecmp

    if dest.is_symlink():
        return True
    if not dest.exists():
        return False
    try:
        return dest.resolve() != src.resolve() and not filecmp.cmp(src, dest, shallow=False)
    except OSError:
        return True


# ---- a whole folder, as FaceFusion leaves it ------------------------------------------------

FileStatus = Literal["verified", "unverified", "present", "bad", "partial", "unused"]
MODEL_SUFFIXES = (".onnx", ".pth", ".pt", ".safetensors", ".dfm")


@dataclass(frozen=True)
class FolderFile:
    """One model file (or a lone `.hash`) in a models folder, and what ffdesk makes of it.

    status: verified (a catalog model that passes every check, `.hash` included); unverified
    (passes, but has no `.hash` to check against); present (not checked: --no-verify); bad (a
    catalog model that fails a check: `note` says why); partial (half-downloaded: truncated
    with a `.hash` it does not match, or a `.hash` whose model never arrived); unused (not a
    model ffdesk runs: `note` says what it is, when the catalog knows)."""

    file: str
    status: FileStatus
    model: str | None
    kind: str | None
    size_bytes: int
    note: str
    variants: tuple[str, ...] = ()
    """Precision variants ffdesk has cached for it (fp16, int8)."""

    @property
    def usable(self) -> bool:
        return self.status in ("verified", "unverified", "present")


def _catalog_file(catalog: Catalog, name: str) -> ModelSpec | None:
    return next((m for m in catalog.models if m.file == name), None)


FAMILY_SUFFIXES = {".dfm": "deep_swapper"}
"""Files of one person each, many to a family: a DeepFaceLab `.dfm` is checked against the
catalog's deep swapper entry whose input names it has (`family_spec`), not found by its name."""


def family_spec(catalog: Catalog, path: Path) -> ModelSpec | str:
    """The contract of a family file (`FAMILY_SUFFIXES`): the entry of its kind whose input names
    are the file's, with its open sides (axes 1 and 2 of each rank-4 tensor) fixed to those of
    the file's first such input, named after the file. A string saying why when there is none
    (not ONNX, another kind of model, no fixed side)."""
    from dataclasses import replace

    kind = FAMILY_SUFFIXES[path.suffix.lower()]
    try:
        model = load_onnx(path)
    except UserError as exc:
        return str(exc).removeprefix(f"{path.name}: ")
    inits = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    names = {i.name for i in inputs}
    entry = next((e for e in catalog.by_kind(kind) if {t.name for t in e.inputs} == names), None)
    if entry is None:
        return f"not a {kind.replace('_', ' ')} model (inputs {input_signature(model)})"
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in inputs[0].type.tensor_type.shape.dim]
    side = dims[1] if len(dims) == 4 and dims[1] == dims[2] and dims[1] > 0 else None
    if side is None:
        return f"input {inputs[0].name!r} is [{','.join(map(str, dims))}], without one fixed side"

    def fixed(t: TensorSpec) -> TensorSpec:
        if t.rank != 4:
            return t
        return replace(
            t, shape=tuple(side if a in (1, 2) and is_dynamic(d) else d for a, d in enumerate(t.shape))
        )

    return replace(
        entry,
        name=path.stem,
        file=path.name,
        inputs=tuple(fixed(t) for t in entry.inputs),
        outputs=tuple(fixed(t) for t in entry.outputs),
    )


@dataclass(frozen=True)
class FolderModel:
    """A model file of a models folder as `models list` and `models verify` both take it: how
    it is shown, which model it is and the contract it is checked against."""

    path: Path
    file: str
    """As shown: its name, or `<scope>/<name>.dfm` in a scope subfolder."""
    model: str | None
    """The catalog's name, or a family file's `<scope>/<name>` (its stem at the top); None for a
    file that is no model ffdesk runs."""
    kind: str | None
    spec: ModelSpec | None
    """None for a file ffdesk does not run, and for a family file that is no such model."""
    note: str = ""
    """Why a family file has no contract, or what a file ffdesk does not run is."""
    scope: str = ""


def folder_model(catalog: Catalog, path: Path, scope: str = "") -> FolderModel:
    """What one model file is; `scope`: the subfolder it is in (FaceFusion's `<scope>/<name>.dfm`)."""
    spec: ModelSpec | None = _catalog_file(catalog, path.name) if not scope else None
    shown = f"{scope}/{path.name}" if scope else path.name
    family = FAMILY_SUFFIXES.get(path.suffix.lower())
    if spec is None and family is not None:
        name = f"{scope}/{path.stem}" if scope else path.stem
        found = family_spec(catalog, path)
        if isinstance(found, str):
            return FolderModel(path, shown, name, family, None, found, scope)
        return FolderModel(path, shown, name, family, replace_name(found, name), "", scope)
    if spec is None:
        what = catalog.other(path.name) or "not a model ffdesk knows"
        return FolderModel(path, shown, None, None, None, what, scope)
    return FolderModel(path, shown, spec.name, spec.kind, spec, "", scope)


def _renamed(line: str, name: str, shown: str) -> str:
    """A problem line that starts with the file's `name` made to start with `shown` instead."""
    own = f"{name}: "
    return f"{shown}: {line.removeprefix(own)}" if line.startswith(own) else line


def folder_model_problems(entry: FolderModel, *, strict: bool = False) -> list[str]:
    """`verify`'s problems with a folder's model file, each line naming it as shown
    (`iperov/elon_musk_224.dfm: hash mismatch ...`); a family file that is no such model is
    its one problem. Empty for a good file (and for a file ffdesk does not run)."""
    if entry.model is None:
        return []
    if entry.spec is None:
        return [f"{entry.file}: {entry.note}"]
    return [
        _renamed(line, entry.path.name, entry.file) for line in verify(entry.spec, entry.path, strict=strict)
    ]


def _model_file(entry: FolderModel, check: bool, variants_dir: Path | None) -> FolderFile:
    """A `scan_folder` row for one model file."""
    path, shown, spec = entry.path, entry.file, entry.spec
    size = path.stat().st_size
    if entry.model is None:
        return FolderFile(shown, "unused", None, None, size, entry.note)
    if spec is None:
        return FolderFile(shown, "bad", entry.model, entry.kind, size, entry.note)
    if not check:
        return FolderFile(shown, "present", spec.name, spec.kind, size, "")
    problems = folder_model_problems(entry)
    side = sidecar_path(path)
    if problems:
        truncated = problems[0].endswith(("truncated or not an ONNX model", "empty file"))
        if truncated and side.is_file():
            of = f" of ~{format_bytes(spec.size_bytes)}" if spec.size_bytes else ""
            note = f"half-downloaded ({format_bytes(size)}{of}, does not match its .hash)"
            return FolderFile(shown, "partial", spec.name, spec.kind, size, note)
        why = "; ".join(p.removeprefix(f"{shown}: ") for p in problems)
        return FolderFile(shown, "bad", spec.name, spec.kind, size, why)
    status: FileStatus = "verified" if hash_status(spec, path) == "ok" else "unverified"
    note = "no .hash sidecar to check it against" if status == "unverified" else reads_of(spec, path)
    return FolderFile(shown, status, spec.name, spec.kind, size, note, cached_variants(path, variants_dir))


def replace_name(spec: ModelSpec, name: str) -> ModelSpec:
    """`spec` under another name (a family file's `<scope>/<name>`)."""
    from dataclasses import replace

    return replace(spec, name=name)


def _listed_names(folder: Path) -> list[str]:
    """The names in `folder` that are not hidden, sorted (what `models list` looks at)."""
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def models_in_folder(catalog: Catalog, folder: Path) -> tuple[FolderModel, ...]:
    """Every model file in `folder` by name, then those in its scope subfolders (FaceFusion keeps
    its deep swapper models at `<scope>/<name>.dfm`): what `models list` shows and `models
    verify` checks. Empty for a folder that is not there."""
    folder = Path(folder)
    if not folder.is_dir():
        return ()
    names = _listed_names(folder)
    found = [
        folder_model(catalog, folder / name)
        for name in names
        if (folder / name).suffix.lower() in MODEL_SUFFIXES and (folder / name).is_file()
    ]
    for name in names:
        sub = folder / name
        if sub.is_dir() and not sub.is_symlink():
            for path in sorted(
                p for p in sub.iterdir() if p.suffix.lower() in FAMILY_SUFFIXES and p.is_file()
            ):
                found.append(folder_model(catalog, path, scope=name))
    return tuple(found)


def lone_hashes(catalog: Catalog, folder: Path) -> tuple[FolderFile, ...]:
    """Each `.hash` in `folder` whose model file is not there: *partial* for a catalog model's
    (a download that never started or was removed), *unused* for a file of FaceFusion's that
    ffdesk does not run; others are not shown."""
    folder = Path(folder)
    if not folder.is_dir():
        return ()
    names = _listed_names(folder)
    present = set(names)
    rows: list[FolderFile] = []
    what = "its model file never arrived (a download that did not start or was removed)"
    for name in names:
        path = folder / name
        if path.suffix.lower() != ".hash" or not path.is_file():
            continue
        if any(path.stem + s in present for s in MODEL_SUFFIXES):
            continue
        spec = next((m for m in catalog.models if m.hash_file == name), None)
        if spec is not None:
            rows.append(FolderFile(name, "partial", spec.name, spec.kind, 0, what))
        elif (other := catalog.other(path.stem)) is not None:
            rows.append(FolderFile(name, "unused", None, None, 0, f"{other}; {what}"))
    return tuple(rows)


def scan_folder(
    catalog: Catalog, folder: Path, *, check: bool = True, variants_dir: Path | None = None
) -> tuple[FolderFile, ...]:
    """Every model file in `folder` (and every `.hash` without its model), by name, then the
    model files of its scope subfolders (`models_in_folder`); `variants_dir` is where precision
    variants are cached (default: the environment's)."""
    entries = models_in_folder(catalog, folder)
    rows = [_model_file(e, check, variants_dir) for e in entries if not e.scope]
    top = sorted([*rows, *lone_hashes(catalog, folder)], key=lambda r: r.file)
    scoped = [_model_file(e, check, variants_dir) for e in entries if e.scope]
    return (*top, *scoped)


def usable_models(
    catalog: Catalog, folder: Path, *, variants_dir: Path | None = None
) -> dict[str, list[str]]:
    """Catalog names by kind of the files in `folder` that pass verification (for pickers)."""
    out: dict[str, list[str]] = {}
    for row in scan_folder(catalog, folder, variants_dir=variants_dir):
        if row.usable and row.model is not None and row.kind is not None:
            out.setdefault(row.kind, []).append(row.model)
    return out
