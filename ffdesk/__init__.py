"""ffdesk: desktop face-swap studio."""

import os as _os

# ONNX Runtime's usage telemetry (on by default in its Linux wheels since 1.2x) queues a device id,
# the machine, the Python path and the model files' names in the user's cache and $TMPDIR, to be
# sent to its maker: a studio's tool keeps that to itself. Read when onnxruntime is imported, so
# set here, before any of ffdesk's modules imports it; a value the user set stays.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

__version__ = "0.1.0"
