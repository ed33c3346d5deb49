"""The render engine: jobs, stages, scheduling, batching, reports (Qt-free)."""
