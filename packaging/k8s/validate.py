"""Validate the Kubernetes manifests beside this file against their schemas; no cluster needed.

    python packaging/k8s/validate.py [FILE.yaml ...]      (default: every *.yaml here)

Core kinds (Job, Service, PersistentVolumeClaim, ...) are checked by kubernetes-validate against
the Kubernetes API schema, strictly (an unknown field is an error). A KubeRay `RayCluster` is
checked against KubeRay's own CRD schema (schemas/raycluster-v1.json, from the CRD of the
KubeRay release named in it), also rejecting fields the schema does not know, and each of its
pod templates against the Kubernetes schema as a `PodTemplate`. Prints one line a document;
exits 1 when any is invalid.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

HERE = Path(__file__).resolve().parent
KUBERNETES_VERSION = "1.33.0"
CRD_SCHEMAS = {("ray.io/v1", "RayCluster"): HERE / "schemas" / "raycluster-v1.json"}


def unknown_fields(value: Any, schema: dict[str, Any], where: str) -> Iterator[str]:
    """Paths in `value` that `schema` does not declare (CRD schemas allow them silently)."""
    if isinstance(value, dict) and schema.get("type", "object") == "object":
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if props is not None and key in props:
                yield from unknown_fields(item, props[key], f"{where}.{key}")
            elif isinstance(extra, dict):
                yield from unknown_fields(item, extra, f"{where}.{key}")
            elif props is not None and extra is not True:
                yield f"{where}.{key}"
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield from unknown_fields(item, schema["items"], f"{where}[{i}]")


def pod_templates(cluster: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    spec = cluster.get("spec") or {}
    head = (spec.get("headGroupSpec") or {}).get("template")
    if head is not None:
        yield "headGroupSpec", head
    for group in spec.get("workerGroupSpecs") or []:
        yield f"workerGroupSpecs[{group.get('groupName')}]", group.get("template") or {}


def check_custom(doc: dict[str, Any], schema_path: Path) -> list[str]:
    schema = json.loads(schema_path.read_text())["schema"]
    problems = [
        f"{'.'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}"
        for e in jsonschema.Draft7Validator(schema).iter_errors(doc)
    ]
    problems += [f"{path}: not a field of the schema" for path in unknown_fields(doc, schema, "")]
    for where, template in pod_templates(doc):
        wrapped = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "check"},
            "template": template,
        }
        try:
            kubernetes_validate.validate(wrapped, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{where}.template: {exc.message}")
    return problems


def check(doc: dict[str, Any]) -> list[str]:
    key = (doc.get("apiVersion"), doc.get("kind"))
    schema_path = CRD_SCHEMAS.get(key)  # type: ignore[arg-type]
    if schema_path is not None:
        return check_custom(doc, schema_path)
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [exc.message]
    except kubernetes_validate.SchemaNotFoundError:
        return [f"no schema for {key[0]} {key[1]}"]
    return []


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or sorted(HERE.glob("*.yaml"))
    failed = 0
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            name = f"{path.name}: {doc.get('kind')} {(doc.get('metadata') or {}).get('name')}"
            problems = check(doc)
            if problems:
                failed += 1
                print(f"{name}: INVALID: {'; '.join(problems)}")
            else:
                print(f"{name}: valid")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
