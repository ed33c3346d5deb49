"""Local training of person-specific swap models: facesets, the model, the trainer, run monitoring.

Qt-free; the monitor window lives in `ffdesk.gui`.
"""
