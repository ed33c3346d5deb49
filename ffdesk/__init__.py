"""ffdesk: desktop face-swap studio."""

import os as _os

# ONNX Runtime's usage telemetry (on by default in its Linux wheels since 1.2x) queues a device id,
# the machine, the Python path and the model files' names in the user's cache and $TMPDIR, to be
# sent to its maker: a studio's tool keeps that to itself. Read when onnxruntime is imported, so
# set here, before any of ffdesk's modules imports it; a value the user set stays.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

# The Python processes ffdesk starts (`-m ffdesk.runtime.weights`, the INT8 variant's spawned
# process, torchrun's ranks) would put the current folder first on their import path: run from a
# downloaded pack's or a shared farm folder holding a `ffdesk/` or `multiprocessing/` folder, they
# would import and run its code. Python 3.11's safe path leaves the current folder out; set here
# so that every child inherits it, whichever front end started ffdesk; a value the user set stays.
_os.environ.setdefault("PYTHONSAFEPATH", "1")

__version__ = "0.1.0"
