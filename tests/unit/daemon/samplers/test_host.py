"""HostSampler against a fake /proc tree: two snapshots, exact percentages and rates."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dyno.daemon.samplers.base import Reading, Sampler, labels
from dyno.daemon.samplers.counters import CounterDeltas
from dyno.daemon.samplers.host import HostSampler

pytestmark = pytest.mark.unit

NET_HEADER = (
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls "
    "carrier compressed\n"
)


def net_line(name: str, rx_b: int, rx_p: int, tx_b: int, tx_p: int, errs: int = 0, drops: int = 0) -> str:
    return f"  {name}: {rx_b} {rx_p} {errs} {drops} 0 0 0 0 {tx_b} {tx_p} 0 0 0 0 0 0\n"


def disk_line(name: str, reads: int, rsect: int, writes: int, wsect: int, io_ms: int) -> str:
    return f" 259 0 {name} {reads} 0 {rsect} 0 {writes} 0 {wsect} 0 0 {io_ms} 0 0 0 0 0 0 0\n"


def write_proc(root: Path, *, cpu: dict[str, list[int]], net: str, disk: str, mem_avail_kib: int) -> None:
    (root / "net").mkdir(parents=True, exist_ok=True)
    stat = "".join(f"{k} {' '.join(map(str, v))} 0 0\n" for k, v in cpu.items()) + "intr 1 2 3\nctxt 99\n"
    (root / "stat").write_text(stat)
    (root / "meminfo").write_text(
        f"MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:   {mem_avail_kib} kB\n"
        "Buffers:          100 kB\nCached:          200 kB\n"
    )
    (root / "net" / "dev").write_text(NET_HEADER + net)
    (root / "diskstats").write_text(disk)
    (root / "loadavg").write_text("1.50 0.75 0.25 3/456 7890\n")
    (root / "uptime").write_text("12345.67 23456.78\n")


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


# (name, labels) -> value
Sample = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def as_dict(readings: list[Reading]) -> Sample:
    out = {(r.name, r.labels): r.value for r in readings}
    assert len(out) == len(readings), "duplicate (name, labels) in one sample"
    return out


@pytest.fixture()
def proc(tmp_path: Path) -> Path:
    # cpu fields: user nice system idle iowait irq softirq steal
    write_proc(
        tmp_path,
        cpu={"cpu": [100, 0, 50, 800, 50, 0, 0, 0], "cpu0": [50, 0, 25, 400, 25, 0, 0, 0]},
        net=net_line("lo", 5, 5, 5, 5)
        + net_line("eth0", 1000, 10, 2000, 20)
        + net_line("veth12ab", 1, 1, 1, 1)
        + net_line("ib0", 0, 0, 0, 0),
        disk=disk_line("nvme0n1", 10, 100, 5, 50, 0)
        + disk_line("nvme0n1p1", 10, 100, 5, 50, 0)
        + disk_line("loop0", 1, 1, 1, 1, 1)
        + disk_line("sda", 0, 0, 0, 0, 0),
        mem_avail_kib=12000000,
    )
    return tmp_path


def test_first_sample_primes_then_second_gives_exact_values(proc: Path) -> None:
    clock = FakeClock()
    sampler = HostSampler(proc_root=proc, clock=clock)
    assert isinstance(sampler, Sampler)
    assert sampler.state().ok

    first = as_dict(sampler.sample())
    # gauges are there at once; no percentages or rates before a second snapshot
    assert first[("memory_total_bytes", ())] == 16000000 * 1024
    assert first[("load_average_1m", ())] == 1.5
    assert first[("load_average_15m", ())] == 0.25
    assert first[("host_uptime_seconds", ())] == 12345.67
    assert not any(name.startswith(("cpu_", "net_", "disk_")) for name, _ in first)

    clock.t += 2.0
    write_proc(
        proc,
        # total delta 200 jiffies: user+nice 40 (30+10), system+irq+softirq 40 (20+10+10), idle 100, iowait 20
        cpu={"cpu": [130, 10, 70, 900, 70, 10, 10, 0], "cpu0": [50, 0, 25, 500, 25, 0, 0, 0]},
        net=net_line("lo", 9, 9, 9, 9)
        + net_line("eth0", 1000 + 4096, 18, 2000 + 1000, 24, errs=2, drops=4)
        + net_line("veth12ab", 9, 9, 9, 9)
        + net_line("ib0", 2_000_000, 100, 0, 0),
        disk=disk_line("nvme0n1", 30, 100 + 2048, 9, 50 + 4096, 500)
        + disk_line("nvme0n1p1", 30, 100 + 2048, 9, 50 + 4096, 500)
        + disk_line("loop0", 9, 9, 9, 9, 9)
        + disk_line("sda", 0, 0, 0, 0, 0),
        mem_avail_kib=4000000,
    )
    got = as_dict(sampler.sample())

    total = labels(cpu="total")
    assert got[("cpu_user_percent", total)] == pytest.approx(20.0)
    assert got[("cpu_system_percent", total)] == pytest.approx(20.0)
    assert got[("cpu_iowait_percent", total)] == pytest.approx(10.0)
    assert got[("cpu_idle_percent", total)] == pytest.approx(50.0)
    cpu0 = labels(cpu="0")
    assert got[("cpu_idle_percent", cpu0)] == pytest.approx(100.0)
    assert got[("cpu_user_percent", cpu0)] == 0.0

    assert got[("memory_available_bytes", ())] == 4000000 * 1024
    assert got[("memory_used_bytes", ())] == 12000000 * 1024
    assert got[("memory_used_percent", ())] == pytest.approx(75.0)

    eth0 = labels(device="eth0")
    assert got[("net_rx_bytes_per_second", eth0)] == pytest.approx(2048.0)
    assert got[("net_tx_bytes_per_second", eth0)] == pytest.approx(500.0)
    assert got[("net_rx_packets_per_second", eth0)] == pytest.approx(4.0)
    assert got[("net_tx_packets_per_second", eth0)] == pytest.approx(2.0)
    assert got[("net_errors_per_second", eth0)] == pytest.approx(1.0)
    assert got[("net_drops_per_second", eth0)] == pytest.approx(2.0)
    assert got[("net_rx_bytes_per_second", labels(device="ib0"))] == pytest.approx(1_000_000.0)
    net_devices = {dict(lab)["device"] for name, lab in got if name.startswith("net_")}
    assert net_devices == {"eth0", "ib0"}  # loopback and veth skipped

    nvme = labels(device="nvme0n1")
    assert got[("disk_read_bytes_per_second", nvme)] == pytest.approx(2048 * 512 / 2)
    assert got[("disk_write_bytes_per_second", nvme)] == pytest.approx(4096 * 512 / 2)
    assert got[("disk_reads_per_second", nvme)] == pytest.approx(10.0)
    assert got[("disk_writes_per_second", nvme)] == pytest.approx(2.0)
    assert got[("disk_busy_percent", nvme)] == pytest.approx(25.0)  # 500 ms busy in 2 s
    disk_devices = {dict(lab)["device"] for name, lab in got if name.startswith("disk_")}
    assert disk_devices == {"nvme0n1", "sda"}  # partition and loop device skipped


def test_counter_reset_skips_the_interval_then_recovers(proc: Path) -> None:
    clock = FakeClock()
    sampler = HostSampler(proc_root=proc, clock=clock)
    sampler.sample()

    def a_second_later(cpu: list[int], eth0: tuple[int, int, int, int]) -> Sample:
        clock.t += 1.0
        write_proc(proc, cpu={"cpu": cpu}, net=net_line("eth0", *eth0), disk="", mem_avail_kib=12000000)
        return as_dict(sampler.sample())

    # eth0 counters went down (driver reload / 32-bit wrap): no rate this interval, and no negative spike
    got = a_second_later([100, 0, 50, 800, 50, 0, 0, 0], (10, 1, 20, 2))
    assert not any(name.startswith("net_") for name, _ in got)
    # identical cpu counters (no jiffy elapsed) give no percentages rather than a division by zero
    assert not any(name.startswith("cpu_") for name, _ in got)
    got = a_second_later([101, 0, 50, 803, 50, 0, 0, 0], (110, 2, 20, 2))
    assert got[("net_rx_bytes_per_second", labels(device="eth0"))] == pytest.approx(100.0)
    assert got[("cpu_user_percent", labels(cpu="total"))] == pytest.approx(25.0)


def test_missing_files_drop_only_their_values(tmp_path: Path) -> None:
    (tmp_path / "loadavg").write_text("0.10 0.20 0.30 1/2 3\n")
    sampler = HostSampler(proc_root=tmp_path, clock=FakeClock())
    state = sampler.state()
    assert not state.ok and "stat" in state.reason
    got = as_dict(sampler.sample())
    assert set(name for name, _ in got) == {"load_average_1m", "load_average_5m", "load_average_15m"}


def test_counter_deltas_forget_vanished_keys() -> None:
    deltas = CounterDeltas()
    assert deltas.update("a", (1, 2)) is None
    assert deltas.update("b", (5,)) is None
    deltas.end_round()
    assert deltas.update("a", (4, 2)) == (3, 0)
    deltas.end_round()  # "b" not seen this round: forgotten, so it primes again
    assert deltas.update("b", (9,)) is None


def test_real_proc_when_present() -> None:
    if not Path("/proc/stat").exists():
        pytest.skip("no /proc on this system")
    sampler = HostSampler()
    sampler.sample()
    got = as_dict(sampler.sample())
    assert got[("memory_total_bytes", ())] > 0
    assert ("host_uptime_seconds", ()) in got


def test_totals_are_the_raw_counters_of_the_last_sample_in_base_units(proc: Path) -> None:
    sampler = HostSampler(proc_root=proc, clock=FakeClock())
    assert sampler.totals() == []  # nothing read yet
    sampler.sample()  # the first sample already has them: a counter needs no previous value
    totals = as_dict(sampler.totals())
    tick = 1.0 / os.sysconf("SC_CLK_TCK")
    # per CPU and mode only: a cpu="total" series would be counted twice by sum()
    assert {dict(lab)["cpu"] for name, lab in totals if name == "cpu_seconds"} == {"0"}
    assert totals[("cpu_seconds", labels(cpu="0", mode="user"))] == pytest.approx(50 * tick)
    assert totals[("cpu_seconds", labels(cpu="0", mode="idle"))] == pytest.approx(400 * tick)
    assert sum(1 for name, _ in totals if name == "cpu_seconds") == 8  # every mode, steal included
    eth0 = labels(device="eth0")
    assert totals[("net_rx_bytes", eth0)] == 1000 and totals[("net_tx_packets", eth0)] == 20
    assert ("net_rx_bytes", labels(device="lo")) not in totals  # the same interfaces as the rates
    nvme = labels(device="nvme0n1")
    assert totals[("disk_read_bytes", nvme)] == 100 * 512 and totals[("disk_written_bytes", nvme)] == 50 * 512
    assert totals[("disk_reads_completed", nvme)] == 10 and totals[("disk_io_time_seconds", nvme)] == 0.0
    assert ("disk_read_bytes", labels(device="nvme0n1p1")) not in totals
    write_proc(
        proc,
        cpu={"cpu0": [60, 0, 25, 400, 25, 0, 0, 0]},
        net=net_line("eth0", 5000, 10, 2000, 20),
        disk=disk_line("nvme0n1", 10, 100, 5, 50, 1500),
        mem_avail_kib=12000000,
    )
    sampler.sample()
    totals = as_dict(sampler.totals())
    assert totals[("cpu_seconds", labels(cpu="0", mode="user"))] == pytest.approx(60 * tick)
    assert totals[("net_rx_bytes", eth0)] == 5000 and totals[("disk_io_time_seconds", nvme)] == 1.5
    sampler.close()
