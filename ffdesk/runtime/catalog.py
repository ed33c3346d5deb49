"""The model catalog: what each supported model file is and how to feed it.

The data lives in `resources/catalog.toml`; this module only parses it into frozen dataclasses.
"""

from __future__ import annotations

import difflib
import functools
import math
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast, get_args

import numpy as np
import numpy.typing as npt

from ffdesk.errors import UserError
from ffdesk.runtime.resources import resource_path

ModelKind = Literal[
    "swapper",
    "recognizer",
    "detector",
    "landmarker",
    "enhancer",
    "occluder",
    "parser",
    "converter",
    "lip_syncer",
    "frame_enhancer",
    "expression_restorer",
    "face_editor",
    "deep_swapper",
    "age_modifier",
    "background_remover",
    "frame_colorizer",
    "classifier",
    "voice_extractor",
]
Template = Literal[
    "arcface_112_v1", "arcface_112_v2", "arcface_128", "ffhq_512", "mtcnn_512", "dfl_whole_face", "none"
]
Identity = Literal["projected", "unit", "converted", "image"]
HashKind = Literal["crc32", "sha256"]
Dim = int | str
"""A fixed dimension (int >= 0) or a dynamic one (-1 or a symbol such as "N")."""

KINDS: tuple[str, ...] = get_args(ModelKind)
TEMPLATES: tuple[str, ...] = (
    "arcface_112_v1",
    "arcface_112_v2",
    "arcface_128",
    "ffhq_512",
    "mtcnn_512",
    "dfl_whole_face",
    "none",
)
IDENTITIES: tuple[str, ...] = ("projected", "unit", "converted", "image")
"""How a swapper takes the source identity:

- projected: the raw recogniser embedding times the model's last initializer, over its norm
  (inswapper);
- unit: the unit-length embedding (hyperswap);
- converted: the raw embedding through a separate converter model (`options.converter`), used
  as it comes out or made unit-length (`options.converted_unit`) (ghost, simswap, hififace);
- image: an aligned crop of the source face (`options.source_template`) instead of an
  embedding (blendswap, uniface).
"""
DESCRIPTION_SUFFIX = ".toml"
"""A model file not in the catalog can be described by `<stem>.toml` beside it, holding one
`[[model]]` table in the catalog's format."""
MAX_DESCRIPTION_BYTES = 256 * 1024
"""A `<stem>.toml` description larger than this is refused unread (the catalog's entries are
about 1 KiB each)."""
DTYPES: tuple[str, ...] = ("float32", "float16", "float64", "int64", "int32", "uint8")


def default_catalog_path() -> Path:
    """The bundled `resources/catalog.toml` (source checkout or installed copy)."""
    return resource_path("catalog.toml")


def is_dynamic(dim: Dim) -> bool:
    """True for -1 or a symbolic dimension."""
    return isinstance(dim, str) or dim < 0


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a model."""

    name: str
    """The tensor's name; "" when it is read by position and its name is not checked."""
    shape: tuple[Dim, ...]
    dtype: str = "float32"
    layout: str = ""
    """"NCHW", "NHWC" or "" (not an image)."""
    color: str = ""
    """"RGB", "BGR" or "" (not an image)."""
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    """value = (pixel - mean) / std, pixel in 0..255; one number or one per channel."""
    optional: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def fixed_shape(self) -> tuple[int, ...]:
        """The shape with dynamic dims replaced by 1 (a valid example input for most models)."""
        return tuple(1 if is_dynamic(d) else int(d) for d in self.shape)

    @property
    def numpy_dtype(self) -> np.dtype[Any]:
        return np.dtype(self.dtype)

    def _channel_params(self) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        mean = np.asarray(self.mean, np.float32)
        std = np.asarray(self.std, np.float32)
        if self.layout == "NCHW" and mean.size > 1:
            mean, std = mean.reshape(-1, 1, 1), std.reshape(-1, 1, 1)
        return mean, std

    def normalize(self, pixels: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
        """Map pixels (0..255, already in this tensor's layout and colour order) to model values."""
        mean, std = self._channel_params()
        return ((pixels.astype(np.float32) - mean) / std).astype(np.float32)

    def denormalize(self, values: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
        """Map model values back to pixels (0..255 float, not clipped)."""
        mean, std = self._channel_params()
        return (values.astype(np.float32) * std + mean).astype(np.float32)


@dataclass(frozen=True)
class ModelSpec:
    """A catalog entry."""

    name: str
    kind: str
    file: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    template: str = "none"
    size_bytes: int = 0
    """Approximate size of the published file (informational)."""
    hash_kind: str = "crc32"
    sha256: str | None = None
    description: str = ""
    options: tuple[tuple[str, Any], ...] = ()
    identity: str = ""
    """Swappers: how the source identity enters the model (one of `IDENTITIES`)."""
    extra_outputs: bool = True
    """Whether a file may have more outputs than listed: true where the processor reads its
    outputs by position (every FaceFusion processor does), so extra heads are ignored."""
    source: str = ""
    """Where the facts of this entry come from (for `models list` and the README)."""

    @property
    def framework(self) -> str:
        """ "onnx" or "torch", from the file's extension."""
        return "torch" if self.file.endswith((".pt", ".pth", ".safetensors")) else "onnx"

    @property
    def hash_file(self) -> str:
        """The FaceFusion-style sidecar name: `<stem>.hash`."""
        return Path(self.file).stem + ".hash"

    def input(self, name: str) -> TensorSpec:
        for t in self.inputs:
            if t.name == name:
                return t
        raise KeyError(f"{self.name} has no input {name!r}")

    def option(self, key: str, default: Any = None) -> Any:
        for k, v in self.options:
            if k == key:
                return v
        return default

    @property
    def resolution(self) -> int | None:
        """Side of the first image input in pixels, when fixed."""
        for t in self.inputs:
            if t.layout in ("NCHW", "NHWC") and t.rank == 4:
                side = t.shape[2] if t.layout == "NCHW" else t.shape[1]
                return None if is_dynamic(side) else int(side)
        return None


@dataclass(frozen=True)
class OtherFile:
    """Files a FaceFusion folder may hold that ffdesk does not use, and what they are."""

    patterns: tuple[str, ...]
    """Shell-style patterns matched against the file name (without its extension too)."""
    what: str

    def matches(self, file_name: str) -> bool:
        from fnmatch import fnmatch

        stem = Path(file_name).stem
        return any(fnmatch(file_name, p) or fnmatch(stem, p) for p in self.patterns)


@dataclass(frozen=True)
class Catalog:
    """All known models, in file order."""

    models: tuple[ModelSpec, ...]
    source: Path | None = None
    others: tuple[OtherFile, ...] = ()
    """What the files ffdesk does not use are, for `models list`."""

    def other(self, file_name: str) -> str | None:
        """What a file ffdesk does not use is, when the catalog knows."""
        return next((o.what for o in self.others if o.matches(file_name)), None)

    def __iter__(self) -> Iterator[ModelSpec]:
        return iter(self.models)

    def __len__(self) -> int:
        return len(self.models)

    def __contains__(self, name: object) -> bool:
        return any(m.name == name for m in self.models)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.models)

    def get(self, name: str) -> ModelSpec:
        """The entry called `name`; otherwise a `UserError` naming the known models a name that
        close was likely meant to be (or that start with it), or where to see them all."""
        for m in self.models:
            if m.name == name:
                return m
        suffix = Path(name).suffix.lower()
        if "/" in name or "\\" in name or (suffix[1:2].isalpha() and suffix != ".onnx"):
            # a path to something that is not a model (a file type, not a version such as 1.4 or
            # 2.5g): the catalog's names would not help
            raise UserError(f"unknown model {name!r}: give a name from `ffdesk models list` or an .onnx file")
        starting = [n for n in self.names if len(name) >= 3 and n.startswith(name)]
        if len(starting) > 6:  # a name that short names no model in particular
            raise UserError(f"unknown model {name!r} (did you mean one of {', '.join(starting)}?)")
        near = set(starting or difflib.get_close_matches(name, self.names, n=3, cutoff=0.75))
        close = [n for n in self.names if n in near]
        if close:
            raise UserError(f"unknown model {name!r} (did you mean {' or '.join(close)}?)")
        raise UserError(f"unknown model {name!r} (`ffdesk models list` names the {len(self.names)} known)")

    def by_kind(self, kind: str) -> tuple[ModelSpec, ...]:
        return tuple(m for m in self.models if m.kind == kind)

    def by_file(self, file_name: str) -> ModelSpec | None:
        """The entry whose file is `file_name` (or whose name is its stem)."""
        stem = Path(file_name).stem
        for m in self.models:
            if m.file == file_name or m.name == stem:
                return m
        return None


MIN_SIDE = 8
MAX_SIDE = 4096
"""Bounds of an image tensor's side in pixels, and of the size options (`size`, `min_size`, ...):
the published models run at 112 to 2048 px (gpen_bfr_2048), detectors at 160 to 640; a 4096-px
crop is already 48 MiB a face as RGB bytes, and what a description asks for is allocated per face
(65536 px would ask OpenCV for 12 GiB)."""
MAX_DIM = 1 << 24
"""The largest fixed dimension any tensor of a contract may have (a detector's anchor axis is in
the tens of thousands)."""
MAX_ELEMENTS = 1 << 28
"""The most elements one tensor of a contract may hold, fixed dims multiplied (1 GiB of float32)."""
MAX_RANK = 8
SIZE_OPTIONS = ("size", "min_size", "max_size", "heatmap_size", "box_scale")
"""Options read as a size in pixels: each a whole number within `MIN_SIDE`..`MAX_SIDE`."""


def _quoted(value: Any) -> str:
    """A value from the file, quoted, on one line and at most about 40 characters."""
    text = str(value)
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _listed(values: tuple[float, ...]) -> str:
    return str(values[0]) if len(values) == 1 else "[" + ", ".join(str(v) for v in values) + "]"


def _floats(value: Any, default: float, field: str) -> tuple[float, ...]:
    """A number or a list of numbers (1 to 4 of them), each finite, and for `std` each above 0;
    `ValueError` naming `field`."""
    if value is None:
        return (default,)
    values = value if isinstance(value, list) else [value]
    if not 1 <= len(values) <= 4:
        raise ValueError(f"{field} has {len(values)} values (one, or one per channel)")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(f"{field} {v!r} is not a number")
        if not math.isfinite(float(v)):
            raise ValueError(f"{field} {v!r} is not a finite number")
        out.append(float(v))
    if field == "std" and any(v <= 0 for v in out):
        raise ValueError(f"std {_listed(tuple(out))}: each must be above 0 (pixels are divided by it)")
    return tuple(out)


def _dim(d: Any) -> bool:
    """Whether `d` is a contract dim: a whole number 1..`MAX_DIM`, -1 or a short printable name."""
    if isinstance(d, str):
        return bool(d.strip()) and d.isprintable() and len(d) <= 64
    return isinstance(d, int) and not isinstance(d, bool) and (d == -1 or 1 <= d <= MAX_DIM)


def _shape(value: Any) -> tuple[Dim, ...]:
    """A contract's shape: 0 to `MAX_RANK` dims (`_dim`; [] is a scalar, as StyleGANEX's
    'direction'), at most `MAX_ELEMENTS` fixed elements."""
    if not isinstance(value, list) or not 0 <= len(value) <= MAX_RANK:
        raise ValueError(f"shape {value!r:.60} (a list of 0 to {MAX_RANK} dims; [] is a scalar)")
    bad = next((d for d in value if not _dim(d)), None)
    if bad is not None:
        raise ValueError(f"shape {value!r:.60}: dim {bad!r:.20} (a whole number 1..{MAX_DIM}, -1 or a name)")
    fixed = 1
    for d in value:
        fixed *= d if isinstance(d, int) and d > 0 else 1
    if fixed > MAX_ELEMENTS:
        raise ValueError(f"shape {value!r:.60} holds {fixed:,} elements (at most {MAX_ELEMENTS:,})")
    return tuple(value)


def _image_checks(t: TensorSpec) -> None:
    """An image tensor's sides within `MIN_SIDE`..`MAX_SIDE` and its mean/std one value or one
    per channel."""
    if t.layout and t.rank == 4:
        sides = (t.shape[2], t.shape[3]) if t.layout == "NCHW" else (t.shape[1], t.shape[2])
        channels = t.shape[1] if t.layout == "NCHW" else t.shape[3]
        for side in sides:
            if not is_dynamic(side) and not MIN_SIDE <= int(side) <= MAX_SIDE:
                raise ValueError(
                    f"shape {list(t.shape)}: a side of {side} px (an image's is {MIN_SIDE}..{MAX_SIDE})"
                )
        for field, values in (("mean", t.mean), ("std", t.std)):
            if len(values) > 1 and not is_dynamic(channels) and len(values) != int(channels):
                raise ValueError(
                    f"{field} {_listed(values)} for {channels} channels (one value, or one each)"
                )
    elif t.layout:
        raise ValueError(f"layout {t.layout!r} on a rank-{t.rank} tensor (an image is rank 4)")


def _tensor(raw: Mapping[str, Any], where: str) -> TensorSpec:
    if not isinstance(raw, Mapping):
        raise UserError(f"{where}: {raw!r:.60} is not a table")
    name = raw.get("name", "")
    label = f"{where} {_quoted(name)}" if name else where
    try:
        shape = _shape(raw["shape"])
        dtype = str(raw.get("dtype", "float32"))
        if dtype not in DTYPES:
            raise ValueError(f"dtype {dtype!r}")
        layout = str(raw.get("layout", ""))
        if layout not in ("", "NCHW", "NHWC"):
            raise ValueError(f"layout {layout!r}")
        color = str(raw.get("color", ""))
        if color not in ("", "RGB", "BGR"):
            raise ValueError(f"color {color!r}")
        spec = TensorSpec(
            name=str(raw.get("name", "")),
            shape=shape,
            dtype=dtype,
            layout=layout,
            color=color,
            mean=_floats(raw.get("mean"), 0.0, "mean"),
            std=_floats(raw.get("std"), 1.0, "std"),
            optional=bool(raw.get("optional", False)),
        )
        if not spec.name.isprintable() or len(spec.name) > 200:
            raise ValueError("name: printable, at most 200 characters")
        _image_checks(spec)
        return spec
    except KeyError as exc:
        raise UserError(f"{label}: missing {exc}") from exc
    except (TypeError, ValueError) as exc:
        raise UserError(f"{label}: {exc}") from exc


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _freeze(v)) for k, v in value.items())
    return value


def _check_options(options: Any) -> None:
    """`ValueError` for a size option outside `MIN_SIDE`..`MAX_SIDE`, or any number in the
    options that is not finite."""
    if not isinstance(options, Mapping):
        raise ValueError("options must be a table")

    def numbers(key: str, value: Any) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"options.{key} {value!r} is not a finite number")
        if isinstance(value, list):
            for v in value:
                numbers(key, v)
        elif isinstance(value, Mapping):
            for k, v in value.items():
                numbers(f"{key}.{k}", v)

    for key, value in options.items():
        numbers(str(key), value)
        if key in SIZE_OPTIONS:
            ok = isinstance(value, int) and not isinstance(value, bool) and MIN_SIDE <= value <= MAX_SIDE
            if not ok:
                raise ValueError(f"options.{key} {value!r} (a size in pixels, {MIN_SIDE}..{MAX_SIDE})")


def _tensors(raw: Mapping[str, Any], key: str, here: str) -> tuple[TensorSpec, ...]:
    entries = raw[key]
    if not isinstance(entries, list) or len(entries) > 64:
        raise UserError(f"{here}: {key} must be a list of at most 64 tensor tables")
    return tuple(_tensor(t, f"{here} {key}[{i}]") for i, t in enumerate(entries))


def _model(raw: Mapping[str, Any], where: str) -> ModelSpec:
    if not isinstance(raw, Mapping):
        raise UserError(f"{where}: a [[model]] entry must be a table")
    try:
        name = str(raw["name"])
        if not name or not name.isprintable() or len(name) > 200:
            raise ValueError(f"name {_quoted(name)} (printable, 1 to 200 characters)")
        kind = str(raw["kind"])
        if kind not in KINDS:
            raise ValueError(f"kind {kind!r}")
        template = str(raw.get("template", "none"))
        if template not in TEMPLATES:
            raise ValueError(f"template {template!r}")
        hash_kind = str(raw.get("hash", "crc32"))
        if hash_kind not in ("crc32", "sha256"):
            raise ValueError(f"hash {hash_kind!r}")
        here = f"{where} model {name!r}"
        options = raw.get("options", {})
        _check_options(options)
        identity = str(raw.get("identity", ""))
        if kind == "swapper" and identity not in IDENTITIES:
            raise ValueError(f"identity {identity!r} (a swapper needs one of {', '.join(IDENTITIES)})")
        if kind == "swapper" and identity == "converted" and not options.get("converter"):
            raise ValueError("identity 'converted' needs options.converter")
        return ModelSpec(
            name=name,
            kind=kind,
            file=str(raw["file"]),
            inputs=_tensors(raw, "inputs", here),
            outputs=_tensors(raw, "outputs", here),
            template=template,
            size_bytes=max(0, int(raw.get("size_bytes", 0))),
            hash_kind=hash_kind,
            sha256=cast(str | None, raw.get("sha256")),
            description=str(raw.get("description", "")),
            options=tuple((str(k), _freeze(v)) for k, v in options.items()),
            identity=identity,
            extra_outputs=bool(raw.get("extra_outputs", True)),
            source=str(raw.get("source", "")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"{where}: bad model entry ({exc})") from exc


def load_catalog(path: Path | None = None) -> Catalog:
    """Parse the catalog file (default: the bundled `resources/catalog.toml`).

    A file whose text was parsed before gives the same `Catalog` again: it is immutable, and
    parsing the bundled catalog takes about 50 ms, which every render, model-list refresh and
    swapper lookup would otherwise pay (reading the file again costs well under a millisecond)."""
    parts = [Path(path)] if path is not None else [default_catalog_path(), *catalog_parts()]
    catalogs = []
    for part in parts:
        try:
            text = part.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{part}: cannot read the model catalog ({exc.strerror})") from exc
        catalogs.append(_parsed_catalog(part, text))
    return catalogs[0] if len(catalogs) == 1 else _joined(tuple(catalogs))


@functools.lru_cache(maxsize=8)
def _joined(catalogs: tuple[Catalog, ...]) -> Catalog:
    """One catalog of the bundled files' entries (the main file's `source`); `UserError` for a
    model name two files share."""
    models = tuple(m for c in catalogs for m in c.models)
    names = [m.name for m in models]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UserError(f"{catalogs[0].source}: duplicate model names {', '.join(dupes)} (in catalog.d)")
    others = tuple(o for c in catalogs for o in c.others)
    return Catalog(models=models, source=catalogs[0].source, others=others)


def catalog_parts() -> list[Path]:
    """The bundled catalog's further files, `resources/catalog.d/*.toml` in name order (one per
    processor family; their `[[model]]` and `[[other]]` tables join the main file's)."""
    folder = default_catalog_path().parent / "catalog.d"
    return sorted(folder.glob("*.toml")) if folder.is_dir() else []


@functools.lru_cache(maxsize=8)
def _parsed_catalog(path: Path, text: str) -> Catalog:
    """`load_catalog`'s parse of `text` (read from `path`), remembered; errors are raised, never kept."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not a valid catalog ({exc})") from exc
    models = tuple(_model(m, str(path)) for m in data.get("model", []))
    names = [m.name for m in models]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UserError(f"{path}: duplicate model names {', '.join(dupes)}")
    try:
        others = tuple(
            OtherFile(tuple(str(m) for m in o["match"]), str(o["what"])) for o in data.get("other", [])
        )
    except (KeyError, TypeError) as exc:
        raise UserError(f"{path}: bad [[other]] entry ({exc})") from exc
    return Catalog(models=models, source=path, others=others)


def description_path(model_file: Path) -> Path:
    """Where a description of a model file the catalog does not know would be: `<stem>.toml`."""
    return Path(model_file).with_suffix(DESCRIPTION_SUFFIX)


def load_description(model_file: Path) -> ModelSpec | None:
    """The user's own catalog entry for `model_file` (`<stem>.toml` beside it), or None when
    there is none. Its `file` is the model file's name whatever the description says."""
    from dataclasses import replace

    path = description_path(model_file)
    if not path.is_file():
        return None
    try:
        if path.stat().st_size > MAX_DESCRIPTION_BYTES:
            raise UserError(f"{path}: a model description of over {MAX_DESCRIPTION_BYTES // 1024} KiB")
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"{path}: cannot read the model description ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not a valid model description (not UTF-8 text)") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not a valid model description ({exc})") from exc
    entries = data.get("model", [])
    if isinstance(entries, dict):
        entries = [entries]
    if not isinstance(entries, list) or len(entries) != 1 or not isinstance(entries[0], dict):
        raise UserError(f"{path}: a model description holds exactly one [[model]] table")
    raw = dict(entries[0])
    raw.setdefault("name", Path(model_file).stem)
    raw.setdefault("file", Path(model_file).name)
    spec = _model(raw, str(path))
    if not spec.inputs or not spec.outputs:
        raise UserError(f"{path} model {spec.name!r}: a description lists at least one input and one output")
    return replace(spec, file=Path(model_file).name)
