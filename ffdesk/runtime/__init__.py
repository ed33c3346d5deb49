"""Model catalog, sessions, residency under a memory budget, precision variants, integrity.

- `catalog`: the supported models and their input/output contracts (data: resources/catalog.toml).
- `env`: `RuntimeEnv`, the folders and switches a front end decides once and passes in (the one
  place the core reads environment variables, settings and the platform's folders).
- `files`: the models folder, `verify` (hash sidecars, contracts), import, safe torch weights;
  `integrity`: CRC32/SHA-256, `.hash` sidecars, file fingerprints, atomic model writes.
- `sessions`: ONNX Runtime (TensorRT -> CUDA -> CPU, read back) and torch sessions, one Protocol.
- `residency`: `ResidencyManager`, the one place that decides which models are loaded; a manager
  made with `share=app.share(holder)` joins `app`'s pool, so an application keeps one budget.
- `residency_policy`: what residency decides (evictions, size estimates, out-of-memory steps) as
  pure functions; `residency_pool`: the state one budget covers; `footprints`: measured model
  sizes remembered between runs; `memprobe`: how memory use is read (replaceable, so tests
  measure fake models).
- `precision`: FP16/INT8 variants made on demand and cached; `--precision auto`.
- `standins`: random-weight models that honour each contract (tests, benchmarks).
"""
