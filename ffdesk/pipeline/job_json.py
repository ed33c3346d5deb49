"""`RenderJob` to JSON and back, losslessly, through the one codec of ffdesk's typed data
(`ffdesk.pipeline.codec`: a field added to `RenderJob` travels without a change here as long as
its type is made of the kinds the codec handles).

`job_from_json` refuses, in one line, a document that is not a job: an unknown field, a value of
the wrong kind, a `Literal` value outside its choices.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from ffdesk import jsontext
from ffdesk.errors import UserError
from ffdesk.pipeline.codec import Codec
from ffdesk.pipeline.codec import field_types as field_types
from ffdesk.pipeline.job import RenderJob, upgrade_legacy_fields

T = TypeVar("T")

FORMAT = "ffdesk.render-job"
VERSION = 1

_JOBS = Codec("render job", UserError, strict=True)
"""Jobs (and the queue's other typed records): every key must be a field, floats finite."""


def json_defaults(cls: type) -> Mapping[str, Any]:
    """The JSON form of the plain defaults of dataclass `cls`'s fields (`Codec.json_defaults`)."""
    return _JOBS.json_defaults(cls)


def fields_to_dict(obj: Any) -> dict[str, Any]:
    """The fields of dataclass instance `obj` as plain JSON values, by their declared types."""
    return _JOBS.encode(obj)


def fields_from_dict(cls: type[T], fields: dict[str, Any]) -> T:
    """An instance of dataclass `cls` from `fields_to_dict`'s values; absent fields take their
    defaults. `UserError` for an unknown field or a value of the wrong kind."""
    return _JOBS.decode(cls, fields)


def job_to_dict(job: RenderJob) -> dict[str, Any]:
    """The job as plain JSON values (every field, defaults included)."""
    return {"format": FORMAT, "version": VERSION, "job": fields_to_dict(job)}


def job_from_dict(data: object) -> RenderJob:
    """The job `job_to_dict` wrote; missing fields take their defaults, and the string pairs
    (`extra`) older versions wrote become the fields that replaced them. `UserError` for anything
    else."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("job"), dict):
        raise UserError("not a render job (expected the JSON that ffdesk writes for a job)")
    if data.get("version") != VERSION:
        raise UserError(f"render job version {data.get('version')!r} is not {VERSION}")
    return fields_from_dict(RenderJob, upgrade_legacy_fields(data["job"]))


def job_to_json(job: RenderJob) -> str:
    """The job as one line of JSON (stable key order)."""
    return json.dumps(job_to_dict(job), sort_keys=True, allow_nan=False)


def job_from_json(text: str) -> RenderJob:
    try:
        data = jsontext.loads(text)
    except ValueError as exc:
        raise UserError(f"render job: not JSON ({exc})") from None
    return job_from_dict(data)
