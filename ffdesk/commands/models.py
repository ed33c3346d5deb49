"""`ffdesk models list|verify|import|prepare|standins|set-dir`: the user's model pack."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ffdesk.commands.argtypes import MAX_COST_MS, given_path, standin_cost_ms
from ffdesk.commands.job_options import refuse_missing_models_dir
from ffdesk.commands.registry import needs_subcommand
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import UserError
from ffdesk.terminal_text import terminal_line
from ffdesk.units import format_bytes

if TYPE_CHECKING:
    from ffdesk.runtime.catalog import Catalog
    from ffdesk.runtime.files import FolderModel, ImportResult


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "models", help="list, verify and import model files; write stand-ins"
    )
    cmds = parser.add_subparsers(dest="models_command", parser_class=type(parser))

    def dir_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--models-dir",
            type=given_path,
            default=None,
            help="models folder (default: the saved setting, else the user data folder)",
        )

    p = cmds.add_parser(
        "list", help="every file of the folder: verified, failing (why), half-downloaded, or not used"
    )
    dir_arg(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--no-verify", action="store_true", help="skip hashing and contract checks (fast)")
    p.set_defaults(func=_list)

    p = cmds.add_parser("verify", help="check hashes and contracts; exit 2 naming each bad file")
    dir_arg(p)
    p.add_argument("names", nargs="*", help="models to check (default: every file present)")
    p.add_argument("--strict", action="store_true", help="a missing .hash sidecar is an error too")
    p.set_defaults(func=_verify)

    p = cmds.add_parser("import", help="verify files and copy them into the models folder")
    dir_arg(p)
    p.add_argument(
        "paths",
        nargs="+",
        type=given_path,
        metavar="PATH",
        help="model files, or folders: every model file in a folder that the catalog knows",
    )
    p.add_argument("--as", dest="as_name", default=None, help="catalog name for a renamed file")
    p.add_argument(
        "--replace", action="store_true", help="replace a different file of the same name already there"
    )
    p.set_defaults(func=_import)

    p = cmds.add_parser(
        "prepare", help="make models' FP16 variants (and CPU weight copies) now, not at a render's start"
    )
    dir_arg(p)
    p.add_argument("names", nargs="+", help="catalog models to prepare (e.g. inswapper_128)")
    p.add_argument(
        "--precision",
        choices=("fp16", "fp32"),
        default="fp16",
        help="fp16: make the FP16 variant (default); fp32: only the CPU weight copy",
    )
    p.add_argument(
        "--gpu",
        action="store_true",
        help="for renders on a GPU: also the checked batch-free copy of a per-face model's file "
        "that fixes its batch at 1 (the FP16 variant is then made from it), which a GPU render "
        "otherwise makes at its start; no CPU weight copies",
    )
    p.set_defaults(func=_prepare)

    p = cmds.add_parser("standins", help="write random-weight models that honour the catalog contracts")
    p.add_argument("--out", type=given_path, required=True)
    p.add_argument("--realistic", action="store_true", help="the real models' size and compute")
    p.add_argument("--only", default="", help="comma-separated model names (default: all)")
    p.add_argument(
        "--cost-ms",
        type=standin_cost_ms,
        default=None,
        help=f"pad each model to about this many ms per face here (0 to {MAX_COST_MS:g})",
    )
    p.add_argument("--dynamic-batch", action="store_true", help="a dynamic batch axis instead of 1")
    p.set_defaults(func=_standins)

    p = cmds.add_parser("set-dir", help="remember a models folder for later runs")
    p.add_argument("path", type=_folder_named)
    p.set_defaults(func=_set_dir, rewrites_settings=True)  # says itself what it does with a damaged one

    needs_subcommand(parser, cmds)


STATUS_WORDS = {
    "verified": "verified",
    "unverified": "unverified",
    "present": "present",
    "bad": "BAD",
    "partial": "PARTIAL",
    "unused": "not used",
}


def _list(args: argparse.Namespace) -> int:
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import FAMILY_SUFFIXES, model_status, resolve_models_dir, scan_folder

    env = runtime_env(args)
    catalog = load_catalog()
    folder = resolve_models_dir(args.models_dir, env)
    refuse_missing_models_dir(args.models_dir)
    check = not args.no_verify
    files = scan_folder(catalog, folder, check=check, variants_dir=env.variants_dir)
    if args.json:
        rows = [model_status(s, folder, check=check, variants_dir=env.variants_dir) for s in catalog]
        data = {
            "models_dir": str(folder),
            "files": [dict(asdict(f), usable=f.usable) for f in files],
            "models": [dict(asdict(r), verified=r.verified) for r in rows],
        }
        print(json.dumps(data, indent=1))
        return 0
    print(terminal_line(f"models folder: {folder}"))
    if not files:
        print("no model files here" if folder.is_dir() else "this folder does not exist")
    else:  # names from the folder (its files', its scope folders'), each shown as a terminal shows it
        shown = [(terminal_line(f.file), terminal_line(f.model or "-"), f) for f in files]
        width = max(len(file) for file, _, _ in shown) + 1
        wide = max(24, *(len(model) for _, model, _ in shown))  # crossface_/arcface_converter_ names
        kinds = max(19, *(len(f.kind or "-") for f in files))
        print(f"{'file':<{width}} {'model':<{wide}} {'kind':<{kinds}} {'status':<10} {'size':>10}  notes")
        for file, model, f in shown:
            size = format_bytes(f.size_bytes) if f.size_bytes else "-"
            kind = f.kind or "-"
            status = STATUS_WORDS[f.status]
            note = terminal_line(f.note)
            print(f"{file:<{width}} {model:<{wide}} {kind:<{kinds}} {status:<10} {size:>10}  {note}")
    here = {f.model for f in files if f.model}
    absent = [  # a family's entry (a DeepFaceLab .dfm's contract) is no file anyone has
        spec.name
        for spec in catalog
        if spec.name not in here and Path(spec.file).suffix not in FAMILY_SUFFIXES
    ]
    if absent:
        print(f"catalog models not in this folder ({len(absent)}): {', '.join(absent)}")
    return 0


def _prepare(args: argparse.Namespace) -> int:
    """Make what a render would otherwise make before its first frame: the FP16 variant of each
    model a render runs in FP16 (the swapper, face enhancers and mask models: `FREED_KINDS`;
    cached under the cache folder's variants/), with `--gpu` from the batch-free copy of a
    file that fixes its batch at 1 (made and checked first) for the per-face models a GPU render
    batches (`batch_free.FREED_KINDS`), and, without `--gpu`, for large files the external-data
    copy the CPU loads them from (weights/). INT8 variants are calibrated on the faces of the clip
    being rendered, so a render makes those itself."""
    import time

    from ffdesk.runtime import precision, weights
    from ffdesk.runtime.batch_free import FREED_KINDS, batch_free, spec_fixes_batch
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import resolve_models_dir, verify

    env = runtime_env(args)
    catalog = load_catalog()
    folder = resolve_models_dir(args.models_dir, env)
    refuse_missing_models_dir(args.models_dir)
    unknown = [n for n in args.names if n not in catalog]
    if unknown:
        raise UserError(f"{unknown[0]}: not a catalog model (ffdesk models list shows them)")
    specs = [catalog.get(n) for n in args.names]
    for spec in specs:  # every file checked before any work
        path = folder / spec.file
        if not path.is_file():
            there = "" if folder.is_dir() else " (no such folder)"
            raise UserError(f"{spec.file}: not in {folder}{there}")
        problems = verify(spec, path)
        if problems:
            raise UserError("; ".join(problems))
    for spec in specs:
        path = folder / spec.file
        t0 = time.perf_counter()
        notes = []
        files = [path]
        if args.gpu and spec.kind in FREED_KINDS and spec_fixes_batch(spec):
            freed = batch_free(path, cache_dir=env.variants_dir)
            if freed.copy is not None:
                notes.append(f"batch-free copy: {freed.copy}")
                path = freed.copy
            else:
                notes.append(str(freed.kept))
        if args.precision == "fp16" and spec.kind not in FREED_KINDS:
            # a render runs FP16 only for the swapper, the face enhancer and the mask models
            notes.append("no render runs it in fp16 (the swapper, face enhancers and mask models do)")
        elif args.precision == "fp16":
            cached = precision.cached_sound(precision.variant_path(path, "fp16", cache_dir=env.variants_dir))
            variant = precision.make_fp16(path, cache_dir=env.variants_dir)
            notes.append(f"fp16 variant {'already made' if cached else 'made'}: {variant}")
            files.append(variant)
        for model in () if args.gpu else files:  # a GPU render loads the files themselves
            copy = weights.external_copy(model, env.weights_dir)
            if copy is not None:
                notes.append(f"CPU weight copy: {copy}")
        took = time.perf_counter() - t0
        print(terminal_line(f"{spec.name}: {'; '.join(notes) or 'nothing to prepare'} ({took:.1f} s)"))
    return 0


def _verify(args: argparse.Namespace) -> int:
    """Check every model `models list` shows (or the ones named), `.dfm` files in scope
    subfolders included, each by the check `list` makes and named as `list` names it; exit 2
    when one is bad or a named one is missing. A `.hash` whose model never arrived is said in a
    warning."""
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import (
        folder_model_problems,
        hash_status,
        lone_hashes,
        models_in_folder,
        reads_of,
        resolve_models_dir,
    )

    catalog = load_catalog()
    folder = resolve_models_dir(args.models_dir, runtime_env(args))
    refuse_missing_models_dir(args.models_dir)
    runs = [m for m in models_in_folder(catalog, folder) if m.model is not None]
    chosen, absent = _named_models(args.names, runs, catalog) if args.names else (runs, [])
    for row in lone_hashes(catalog, folder):
        if row.status == "partial" and (not args.names or row.model in args.names):
            print(
                terminal_line(f"ffdesk: warning: {row.file}: {row.note}; {row.model} not checked"),
                file=sys.stderr,
            )
    for file in absent:
        print(terminal_line(f"{file}: missing from {folder}"), file=sys.stderr)
    bad = len(absent)
    for entry in chosen:
        problems = folder_model_problems(entry, strict=args.strict)
        if problems or entry.spec is None:
            bad += 1
            for line in problems:
                print(terminal_line(line), file=sys.stderr)
            continue
        notes = [reads_of(entry.spec, entry.path)]
        if hash_status(entry.spec, entry.path) == "unverified":
            notes.append("unverified: no .hash sidecar")
        note = "; ".join(n for n in notes if n)
        print(terminal_line(f"{entry.file}: ok" + (f" ({note})" if note else "")))
    if not chosen and not absent:
        raise UserError(f"{folder}: no model files ffdesk runs found")
    if bad:
        print(terminal_line(f"{bad} bad file(s) of {len(chosen) + len(absent)} in {folder}"), file=sys.stderr)
        return 2
    return 0


def _named_models(
    names: list[str], runs: list[FolderModel], catalog: Catalog
) -> tuple[list[FolderModel], list[str]]:
    """The folder's models called `names` (each once, as `models list` names them: a catalog
    name, or `SCOPE/NAME` of a `.dfm`), and the files of those named that are not there.
    `UserError` (one line) for a name that is neither."""
    from ffdesk.runtime.files import split_scoped

    here = {m.model: m for m in runs}
    chosen: list[FolderModel] = []
    absent: list[str] = []
    for name in dict.fromkeys(names):
        if name in here:
            chosen.append(here[name])
        elif name in catalog:
            absent.append(catalog.get(name).file)
        elif split_scoped(name) is not None:
            absent.append(f"{name}.dfm")
        else:
            catalog.get(name)  # no such catalog model: a UserError naming the close ones
    return chosen, absent


def check_model_name(name: str, *, scoped: bool = False) -> None:
    """`UserError` unless `name` is a bare model name (no path separators, no `..`, no leading
    dot) or, with `scoped` (a DeepFaceLab `.dfm` being imported), `SCOPE/NAME` of two such."""
    from ffdesk.runtime.files import is_plain_name, split_scoped

    if is_plain_name(name) or (scoped and split_scoped(name) is not None):
        return
    if scoped:
        raise UserError(
            f"--as {name!r}: a model name or SCOPE/NAME, not a path (one '/', no '\\', '..' or leading '.')"
        )
    raise UserError(f"--as {name!r}: a model name, not a path (no '/', '\\', '..' or leading '.')")


def _import(args: argparse.Namespace) -> int:
    """Import each file named, and every model file the catalog knows in each folder named and
    every DeepFaceLab `.dfm` under it (`folder_models`); exit 2 when one of them could not be."""
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import FAMILY_SUFFIXES, import_model, resolve_models_dir

    if args.as_name is not None:
        one_dfm = len(args.paths) == 1 and args.paths[0].suffix.lower() in FAMILY_SUFFIXES
        check_model_name(args.as_name, scoped=one_dfm)
    if args.as_name and (len(args.paths) > 1 or args.paths[0].is_dir()):
        raise UserError("--as takes one file at a time")
    catalog = load_catalog()
    sources: list[tuple[Path, str | None]] = []
    for given in args.paths:
        if given.is_dir():
            found, left = folder_models(given, catalog)
            if left:
                said = f"{given}: not imported, not models the catalog knows: {', '.join(left)}"
                print(terminal_line(f"ffdesk: warning: {said}"), file=sys.stderr)
            sources.extend(found)
        else:
            sources.append((given, args.as_name))
    folder = resolve_models_dir(args.models_dir, runtime_env(args))
    failed = 0
    for src, as_name in sources:
        result = import_model(src, catalog, folder, as_name=as_name, replace=args.replace)
        if result.problems:  # one line a file: its first problem, and how many more it has
            failed += 1
            more = len(result.problems) - 1
            also = f" (and {more} more: not the model it is named as?)" if more else ""
            print(terminal_line(f"not imported: {result.problems[0]}{also}"), file=sys.stderr)
        else:
            for line in import_lines(result):
                print(terminal_line(line))
    return 2 if failed else 0


def import_lines(result: ImportResult) -> list[str]:
    """What `models import` says of one model it imported: a line for each file it copied into
    the models folder, the model first, then each external data file that came with it; a file
    read through a link is named where the link points (what was copied)."""

    def line(path: Path, dest: Path, *notes: str) -> str:
        if path.is_symlink():
            notes = (*notes, f"copied from {path.resolve()}, where the link {path} points")
        return f"{result.name}: {dest}" + (f" ({'; '.join(notes)})" if notes else "")

    unverified = ("no .hash sidecar: recorded its CRC32 now",) if result.hash == "unverified" else ()
    return [
        line(result.source, result.dest, *unverified),
        *(line(came, to, "its external data") for came, to in result.data),
    ]


def folder_models(folder: Path, catalog: Catalog) -> tuple[list[tuple[Path, str | None]], list[str]]:
    """What to import from `folder`: each model file in it (not its subfolders) that the catalog
    knows by name, and each DeepFaceLab `.dfm` the catalog does not know at any depth under it
    as `<scope>/<name>` (its folder's name and its stem, as FaceFusion keeps them at
    `<scope>/<name>.dfm`), each with the name to import it as (None: its catalog name); and the
    paths (relative to `folder`) of the other model files there (.onnx, .pth, ...: not imported,
    as `--as` names one file at a time). Sidecars and external data files go with their model.
    `UserError` (one line) for a folder with none to import."""
    from ffdesk.runtime.files import FAMILY_SUFFIXES, MODEL_SUFFIXES, scoped_name

    try:
        files = _files_under(folder, MODEL_SUFFIXES)
    except OSError as exc:
        raise UserError(f"{folder}: cannot read the folder ({exc.strerror or exc})") from None
    found: list[tuple[Path, str | None]] = []
    left: list[str] = []
    for path in files:
        if path.parent == folder and catalog.by_file(path.name) is not None:
            found.append((path, None))
        elif path.suffix.lower() in FAMILY_SUFFIXES and (name := scoped_name(path)) is not None:
            found.append((path, name))
        else:
            left.append(path.relative_to(folder).as_posix())
    facefusion = folder / ".assets" / "models"
    if not found and facefusion.is_dir():  # FaceFusion's own folder: its models are in there
        raise UserError(f"{folder}: FaceFusion keeps its models in {facefusion}: import that folder")
    if not found and files:
        names = ", ".join(left)
        raise UserError(
            f"{folder}: no model the catalog knows in this folder ({names}); import one with --as NAME"
        )
    if not found:
        raise UserError(f"{folder}: a folder with no model files ({', '.join(MODEL_SUFFIXES)})")
    return found, left


def _files_under(folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """The files ending in one of `suffixes` in `folder` and every folder under it but hidden ones
    (`.git`, `.venv`, FaceFusion's `.assets`: a folder's own files are imported by naming it;
    links to folders not followed), those in `folder` first, each group by path; `OSError` when
    `folder` cannot be read (a subfolder that cannot is passed over)."""
    with os.scandir(folder):
        pass
    found = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [
            Path(root) / n for n in names if Path(n).suffix.lower() in suffixes and (Path(root) / n).is_file()
        ]
    return sorted(found, key=lambda p: (p.parent != folder, p.relative_to(folder).as_posix()))


def _standins(args: argparse.Namespace) -> int:
    from ffdesk.runtime.standins import write_standins
    from ffdesk.userpath import not_a_file

    not_a_file(Path(args.out).expanduser(), "--out")
    names = [n.strip() for n in args.only.split(",") if n.strip()] or None
    infos = write_standins(
        args.out,
        names,
        realistic=args.realistic,
        cost_ms=args.cost_ms,
        dynamic_batch=args.dynamic_batch,
    )
    for info in infos:
        ms = f"  {info.ms:.1f} ms/face" if info.ms is not None else ""
        size = format_bytes(info.bytes)
        print(
            f"{info.name:<20} {size:>10}  {info.parameters / 1e6:7.2f} M params{ms}  "
            + terminal_line(info.path)
        )
    amp = next((i for i in infos if i.name == "dfl_amp"), None)
    if amp is not None:  # where FaceFusion keeps its default deep swapper model
        placed = _place_default_deep_swapper(amp.path, Path(args.out))
        print(f"{'(its copy)':<20} {format_bytes(amp.bytes):>10}  {'':>16}  {terminal_line(placed)}")
    return 0


def _place_default_deep_swapper(standin: Path, folder: Path) -> Path:
    """A copy of the AMP stand-in (and its .hash) at FaceFusion's default deep swapper model's
    place, `<folder>/iperov/elon_musk_224.dfm`, so `--deep-swapper` alone runs with stand-ins."""
    import shutil

    from ffdesk.pipeline.job import DEFAULT_MODELS

    scope, _, name = DEFAULT_MODELS["deep_swapper"].partition("/")
    dest = folder / scope / f"{name}.dfm"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(standin, dest)
    hash_file = standin.with_suffix(".hash")
    if hash_file.is_file():
        shutil.copyfile(hash_file, dest.with_suffix(".hash"))
    return dest


def _folder_named(text: str) -> Path:
    """A folder as typed; an empty one is refused (it would save the folder the command ran in)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("give the models folder (it is empty)")
    return Path(text)


def _set_dir(args: argparse.Namespace) -> int:
    from ffdesk.runtime.files import save_models_dir

    path = save_models_dir(args.path, runtime_env(args))
    if not path.is_dir():
        print(f"note: {path} does not exist yet", file=sys.stderr)
    print(f"models folder: {path}")
    return 0
