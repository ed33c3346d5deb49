"""GPU (NVML) and process sampling, stage timings, logs."""
