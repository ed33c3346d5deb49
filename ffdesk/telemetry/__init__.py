"""GPU (NVML) and process sampling, stage timings, logs.

- `nvml.Nvml`: the one NVML wrapper (missing values, never exceptions) -> `GpuSample`.
- `host.HostMonitor`: process RSS/CPU, system memory, CPU package power (RAPL) -> `HostSample`.
- `sampler.Sampler`: the sampling thread (deadline scheduling, ring buffers, callbacks) -> `Sample`.
- `render.RenderTelemetry`: sampling during a render, its JSONL log and the report summary.
- `metrics.serve_metrics`: the latest sample in the Prometheus text format.
"""
