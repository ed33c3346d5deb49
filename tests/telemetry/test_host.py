"""Host sampling for real, and the RAPL reader on a powercap tree built in a temporary folder."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ffdesk.telemetry.host import HostMonitor, RaplCounter


def _domain(root: Path, name: str, label: str, energy_uj: int, max_uj: int | None = 2**32) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "name").write_text(label + "\n")
    (d / "energy_uj").write_text(f"{energy_uj}\n")
    if max_uj is not None:
        (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return d


def _set(d: Path, energy_uj: int) -> None:
    (d / "energy_uj").write_text(f"{energy_uj}\n")


def test_real_host_figures() -> None:
    mon = HostMonitor()
    end = time.process_time() + 0.05
    while time.process_time() < end:  # CPU work to measure, however busy the machine is
        pass
    s = mon.sample()
    assert s.process_rss_bytes is not None and s.process_rss_bytes > 10 * 2**20
    assert s.process_cpu_pct is not None and s.process_cpu_pct > 0
    assert s.system_memory_total_bytes is not None and s.system_memory_used_bytes is not None
    assert 0 < s.system_memory_used_bytes < s.system_memory_total_bytes
    json.dumps(s.to_json())


def test_the_processs_peak_between_samples_is_kept() -> None:
    """A peak shorter than the sampling interval shows in the kernel's high-water mark (Linux)."""
    import numpy as np

    mon = HostMonitor()
    before = mon.sample()
    if before.process_rss_peak_bytes is None:
        pytest.skip("no /proc VmHWM here")
    spike = np.ones(300 * 2**20 // 8)  # 300 MiB, touched, then let go before the next sample
    del spike
    after = mon.sample()
    assert after.process_rss_peak_bytes is not None and after.process_rss_bytes is not None
    assert after.process_rss_peak_bytes >= max(before.process_rss_bytes or 0, after.process_rss_bytes)
    assert after.process_rss_peak_bytes >= (before.process_rss_bytes or 0) + 250 * 2**20


def test_real_rapl_is_tolerated_present_or_not() -> None:
    rapl = RaplCounter()
    value = rapl.read_j()
    assert (value is None) == (not rapl.available)
    if rapl.available:
        assert value is not None and value >= 0
    else:
        assert rapl.reason


def test_rapl_sums_packages_and_ignores_subdomains_and_psys(tmp_path: Path) -> None:
    p0 = _domain(tmp_path, "intel-rapl:0", "package-0", 1_000_000)
    p1 = _domain(tmp_path, "intel-rapl:1", "package-1", 5_000_000)
    core = _domain(tmp_path, "intel-rapl:0:0", "core", 0)
    psys = _domain(tmp_path, "intel-rapl:2", "psys", 0)
    rapl = RaplCounter(tmp_path)
    assert rapl.available and rapl.read_j() == 0.0
    _set(p0, 3_000_000)
    _set(p1, 5_500_000)
    _set(core, 9_000_000)
    _set(psys, 9_000_000)
    assert rapl.read_j() == pytest.approx(2.5)


def test_rapl_counter_wrap_around(tmp_path: Path) -> None:
    p0 = _domain(tmp_path, "intel-rapl:0", "package-0", 999_900, max_uj=1_000_000)
    rapl = RaplCounter(tmp_path)
    _set(p0, 50)  # wrapped: 100 uJ to the top, then 50
    assert rapl.read_j() == pytest.approx(150e-6)
    _set(p0, 1_050)
    assert rapl.read_j() == pytest.approx(1_150e-6)


def test_rapl_wrap_without_range_leaves_that_interval_out(tmp_path: Path) -> None:
    p0 = _domain(tmp_path, "intel-rapl:0", "package-0", 500, max_uj=None)
    rapl = RaplCounter(tmp_path)
    _set(p0, 100)
    assert rapl.read_j() == 0.0
    _set(p0, 400)
    assert rapl.read_j() == pytest.approx(300e-6)


def test_rapl_absent_or_unreadable(tmp_path: Path) -> None:
    absent = RaplCounter(tmp_path / "nothing")
    assert not absent.available and absent.read_j() is None and "no RAPL" in (absent.reason or "")
    d = tmp_path / "intel-rapl:0"
    d.mkdir()
    (d / "name").write_text("package-0\n")
    (d / "energy_uj").mkdir()  # reading it fails like a root-only file does for a user
    unreadable = RaplCounter(tmp_path)
    assert not unreadable.available and unreadable.read_j() is None
    assert "not readable" in (unreadable.reason or "")


def test_rapl_counter_vanishing_later_is_a_missing_value(tmp_path: Path) -> None:
    p0 = _domain(tmp_path, "intel-rapl:0", "package-0", 1_000)
    rapl = RaplCounter(tmp_path)
    (p0 / "energy_uj").unlink()
    assert rapl.read_j() is None
    _set(p0, 2_000)
    assert rapl.read_j() == pytest.approx(1_000e-6)


def test_host_monitor_power_from_rapl(tmp_path: Path) -> None:
    p0 = _domain(tmp_path, "intel-rapl:0", "package-0", 0)
    before = time.monotonic()
    mon = HostMonitor(powercap_root=tmp_path)
    time.sleep(0.1)
    _set(p0, 4_000_000)  # 4 J in a little over 0.1 s
    t0 = time.monotonic()
    s = mon.sample()
    gap = time.monotonic() - before  # (longer than the monitor's own: it is taken outside it)
    assert s.cpu_package_energy_j == pytest.approx(4.0)
    assert s.cpu_package_power_w is not None and 4.0 / gap <= s.cpu_package_power_w <= 4.0 / 0.1
    _set(p0, 4_000_000)
    s2 = mon.sample()
    assert s2.cpu_package_power_w == 0.0 and time.monotonic() > t0


def test_host_monitor_of_a_process_that_is_gone() -> None:
    s = HostMonitor(pid=2**22 + 12345).sample()
    assert s.process_rss_bytes is None and s.process_cpu_pct is None
    assert s.system_memory_total_bytes is not None
