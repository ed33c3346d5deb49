"""`ffdesk telemetry`: a live table of GPU and process figures, one JSON sample, or a metrics endpoint.

This module is the terminal view: all display formatting of telemetry samples lives here.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import time
from typing import Any, TextIO

from ffdesk.commands.argtypes import number_from, whole_at_least, whole_between
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import UserError
from ffdesk.telemetry.nvml import GpuSample
from ffdesk.telemetry.sampler import DEFAULT_INTERVAL_S, Sample, Sampler, SystemProbe
from ffdesk.units import format_bytes

_CLEAR = "\x1b[H\x1b[J"

MAX_INTERVAL_S = 3600.0
"""The longest --interval, as `ffdesk monitor` takes it (an hour between samples; far more
overflowed the sampler thread's wait)."""

MAX_PID = 2**31 - 1
"""The largest process id there can be (a pid_t is a signed 32-bit number)."""


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "telemetry",
        help="show GPU memory, power, utilization and process figures",
        description="Live table of GPU (NVML) and process figures; Ctrl-C stops.",
    )
    parser.add_argument("--once", action="store_true", help="take one sample and exit")
    parser.add_argument("--json", action="store_true", help="JSON: one object (--once) or one a line")
    parser.add_argument(
        "--interval",
        type=number_from(0, above=True, high=MAX_INTERVAL_S),
        default=DEFAULT_INTERVAL_S,
        metavar="S",
        help=f"seconds between samples (at most {MAX_INTERVAL_S:g})",
    )
    parser.add_argument(
        "--count", type=whole_at_least(1), default=None, metavar="N", help="stop after N samples"
    )
    parser.add_argument(
        "--pid", type=whole_between(1, MAX_PID), default=None, help="process to watch (default: this one)"
    )
    parser.add_argument(
        "--metrics-port",
        type=whole_between(0, 65535),
        default=None,
        metavar="N",
        help="serve Prometheus metrics on port N",
    )
    parser.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="ADDR",
        help="address to bind (default 127.0.0.1, this machine only; 0.0.0.0 for every interface)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.pid is not None:
        import psutil

        if not psutil.pid_exists(args.pid):
            raise UserError(f"--pid {args.pid}: no such process")
    probe = SystemProbe(pid=args.pid, flags=runtime_env(args).driver)
    if args.once:
        return _once(probe, args)
    return _live(probe, args, sys.stdout)


def _once(probe: SystemProbe, args: argparse.Namespace) -> int:
    try:
        # CPU percentages are measured between two readings: wait one interval for a real figure.
        time.sleep(min(args.interval, 1.0))
        sample = probe.sample()
    finally:
        probe.close()
    if args.json:
        out = sample.to_json()
        out["no_gpu_reason"] = probe.no_gpu_reason
        print(json.dumps(out, indent=2))
    else:
        print(format_table(sample, probe.no_gpu_reason))
    return 0


def _live(probe: SystemProbe, args: argparse.Namespace, out: TextIO) -> int:
    samples: queue.Queue[Sample] = queue.Queue()
    sampler = Sampler(interval_s=args.interval, source=probe)
    sampler.add_callback(samples.put)
    server = None
    interactive = out.isatty() and not args.json
    shown = 0
    try:
        if args.metrics_port is not None:
            from ffdesk.telemetry.metrics import serve_metrics

            server = serve_metrics(
                lambda: sampler.latest, args.metrics_port, args.metrics_host, probe.no_gpu_reason
            )
            print(f"serving metrics on {server.url}", file=sys.stderr)
            if not server.loopback:
                print(
                    f"ffdesk: warning: metrics on {server.host} can be read by anyone who can reach "
                    "this machine (--metrics-host 127.0.0.1 keeps them local)",
                    file=sys.stderr,
                )
        if probe.no_gpu_reason and args.json:
            print(probe.no_gpu_reason, file=sys.stderr)
        sampler.start()
        while args.count is None or shown < args.count:
            try:
                sample = samples.get(timeout=0.25)
            except queue.Empty:
                if not sampler.running:  # its thread died: say so, rather than wait for ever
                    raise RuntimeError(
                        f"telemetry sampling stopped: {sampler.failure!r}"
                    ) from sampler.failure
                continue
            if args.json:
                out.write(json.dumps(sample.to_json()) + "\n")
            else:
                # a table redrawn in place keeps the reason in view; printed one after another, it
                # is said with the first only
                reason = probe.no_gpu_reason if interactive or shown == 0 else None
                out.write((_CLEAR if interactive else "") + format_table(sample, reason) + "\n")
                if not interactive:
                    out.write("\n")
            out.flush()
            shown += 1
    except KeyboardInterrupt:
        pass  # Ctrl-C is how the live view is meant to end
    finally:
        sampler.stop()
        if server is not None:
            server.close()
        probe.close()
    return 0


def _fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def _gpu_rows(g: GpuSample) -> list[str]:
    mem = f"{format_bytes(g.memory_used_bytes)} / {format_bytes(g.memory_total_bytes)}"
    power = f"{_fmt(g.power_w, '.0f')} / {_fmt(g.power_limit_w, '.0f')} W"
    rows = [
        f"GPU {g.index}  {g.name or '?'}",
        f"  memory     {mem}  (this process {format_bytes(g.process_memory_bytes)}, "
        f"reserved {format_bytes(g.memory_reserved_bytes)})",
        f"  power      {power}   energy {_fmt(g.energy_j, '.0f', ' J')}",
        f"  util       gpu {_fmt(g.gpu_util_pct, '.0f', '%')}   memory {_fmt(g.memory_util_pct, '.0f', '%')}",
        f"  temp       {_fmt(g.temperature_c, '.0f', ' C')}   clocks sm {_fmt(g.sm_clock_mhz, '.0f')} MHz, "
        f"mem {_fmt(g.memory_clock_mhz, '.0f')} MHz",
        f"  pcie       tx {format_bytes(g.pcie_tx_bytes_per_s)}/s   "
        f"rx {format_bytes(g.pcie_rx_bytes_per_s)}/s",
        f"  ecc        corrected {_fmt(g.ecc_corrected_errors, 'd')}   "
        f"uncorrected {_fmt(g.ecc_uncorrected_errors, 'd')}",
        f"  throttle   {', '.join(g.throttle_reasons) if g.throttle_reasons else '-'}",
    ]
    if g.processes:
        procs = ", ".join(f"{p.pid}: {format_bytes(p.used_bytes)}" for p in g.processes)
        rows.append(f"  processes  {procs}")
    return rows


def format_table(sample: Sample, no_gpu_reason: str | None) -> str:
    """The terminal view of one sample."""
    h = sample.host
    rows = [
        time.strftime("%H:%M:%S", time.localtime(sample.wall_time)) + f"  pid {h.pid}",
        f"process    RSS {format_bytes(h.process_rss_bytes)}   CPU {_fmt(h.process_cpu_pct, '.0f', '%')}",
        f"system     memory {format_bytes(h.system_memory_used_bytes)} / "
        f"{format_bytes(h.system_memory_total_bytes)}   CPU {_fmt(h.system_cpu_pct, '.0f', '%')}",
        f"cpu power  {_fmt(h.cpu_package_power_w, '.1f', ' W')} (package, RAPL)",
    ]
    if no_gpu_reason:
        rows.append(no_gpu_reason)
    for g in sample.gpus:
        rows.extend(_gpu_rows(g))
    return "\n".join(rows)
