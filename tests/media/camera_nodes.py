"""Video nodes as JSON, so what a real driver listed can be kept beside the tests.

`tests/media/data/vivid_nodes.json` is what `ffdesk.media.camera_modes.read_device` read from the
kernel's vivid driver (Debian's 6.1 kernel, vivid loaded with its defaults) inside the VM of
`scripts/v4l2_vm.sh`; `python -m tests.media.camera_nodes OUT.json` writes such a file from the
machine's own /dev/video* nodes.
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

from ffdesk.media.camera_modes import DeviceNode, FrameSize, PixelFormat, SizeSpan, read_device

VIVID = Path(__file__).parent / "data" / "vivid_nodes.json"


def _size(e: FrameSize) -> list[Any]:
    span = [str(r) for r in e.rate_span] if e.rate_span else None
    return [e.width, e.height, [str(r) for r in e.rates], span]


def node_json(node: DeviceNode) -> dict[str, Any]:
    return {
        "path": str(node.path),
        "card": node.card,
        "driver": node.driver,
        "bus": node.bus,
        "capture": node.capture,
        "kind": node.kind,
        "formats": [
            {
                "fourcc": f.fourcc,
                "description": f.description,
                "compressed": f.compressed,
                "sizes": [_size(e) for e in f.sizes],
                "span": [list(f.span.smallest), list(f.span.largest), list(f.span.step)] if f.span else None,
            }
            for f in node.formats
        ],
    }


def node_from_json(d: dict[str, Any]) -> DeviceNode:
    formats = []
    for f in d["formats"]:
        sizes = tuple(
            FrameSize(
                w,
                h,
                tuple(Fraction(r) for r in rates),
                (Fraction(span[0]), Fraction(span[1])) if span else None,
            )
            for w, h, rates, span in f["sizes"]
        )
        span = f["span"]
        formats.append(
            PixelFormat(
                f["fourcc"],
                f["description"],
                f["compressed"],
                sizes,
                SizeSpan(tuple(span[0]), tuple(span[1]), tuple(span[2])) if span else None,  # type: ignore[arg-type]
            )
        )
    return DeviceNode(
        Path(d["path"]), d["card"], d["driver"], d["bus"], d["capture"], d["kind"], tuple(formats)
    )


def vivid_nodes() -> list[DeviceNode]:
    return [node_from_json(d) for d in json.loads(VIVID.read_text(encoding="utf-8"))]


if __name__ == "__main__":
    nodes = [read_device(p) for p in sorted(Path("/dev").glob("video[0-9]*"))]
    Path(sys.argv[1]).write_text(
        json.dumps([node_json(n) for n in nodes], separators=(",", ":")), encoding="utf-8"
    )
    print(f"{len(nodes)} nodes written to {sys.argv[1]}")
