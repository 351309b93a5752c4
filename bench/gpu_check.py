#!/usr/bin/env python3
"""GPU check for whoever has a machine with NVIDIA GPUs (not a test: it prints what it read).

1. Runs the GPU sampler with the nvml backend directly: inventory, then every metric read per GPU over a few
   samples, which counters were unavailable and why, the GPU processes, and the cost of one sample.
2. If the dynod daemon is installed and has --gpu-backend, starts it with --gpu-backend nvml on free loopback
   ports and prints `dyno-cli status` and `dyno-cli metrics`.

Exits 1 with a clear message when NVML or a GPU is missing, 0 otherwise.
    python bench/gpu_check.py [--samples 3] [--interval-s 1] [--no-daemon]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import free_port

from dyno.daemon.samplers.gpu import GpuSampler, make_gpu_sampler


def _fmt(name: str, value: float) -> str:
    if name.endswith("_bytes") or name.endswith("_bytes_per_second"):
        return f"{value:,.0f}"
    if name.endswith("bitmask"):
        return f"0x{int(value):x}"
    return f"{value:.6g}"


def check_sampler(samples: int, interval_s: float) -> int:
    sampler = make_gpu_sampler("nvml")
    state = sampler.state()
    if not state.ok or not isinstance(sampler, GpuSampler):
        print(f"NO GPU: the nvml backend is unavailable: {state.reason}", file=sys.stderr)
        return 1
    try:
        inventory = sampler.inventory()
        print(f"NVML ok, driver {sampler._nvml.driver_version or '?'}: {len(inventory)} GPU(s)")  # noqa: SLF001
        for d in inventory:
            print(f"  gpu {d.index}: {d.name}  {d.uuid}  pci {d.pci_bus_id}  {d.memory_total_bytes / 2**30:.1f} GiB")
        cpu_costs, wall_costs = [], []
        readings = []
        for i in range(samples):
            if i:
                time.sleep(interval_s)
            c0, w0 = time.process_time(), time.perf_counter()
            readings = sampler.sample()
            cpu_costs.append(time.process_time() - c0)
            wall_costs.append(time.perf_counter() - w0)
        print(f"\nlast of {samples} samples ({interval_s} s apart): {len(readings)} readings")
        last = {s.index: s for s in sampler.last_device_samples()}
        for d in inventory:
            print(f"\n== gpu {d.index} ({d.uuid})")
            mine = [r for r in readings if dict(r.labels).get("gpu") == str(d.index)]
            for r in sorted(mine, key=lambda r: (r.name, r.labels)):
                extra = {k: v for k, v in r.labels if k not in ("gpu", "uuid")}
                suffix = "{" + ",".join(f"{k}={v}" for k, v in extra.items()) + "}" if extra else ""
                print(f"  {r.name + suffix:<64} {_fmt(r.name, r.value)}")
            missing = last[d.index].unavailable if d.index in last else {}
            if missing:
                print("  unavailable:")
                for key, why in sorted(missing.items()):
                    print(f"    {key}: {why}")
        procs = sampler.processes()
        print(f"\nGPU processes: {len(procs)}")
        for p in procs:
            print(f"  pid {p.pid} gpu {p.gpu_index} {p.used_memory_bytes / 2**20:.0f} MiB")
        if samples > 1:  # the first sample primes GPM and is not representative
            cpu, wall = cpu_costs[1:], wall_costs[1:]
            print(
                f"\nsample() cost over {len(cpu)} samples: CPU mean {1e3 * sum(cpu) / len(cpu):.2f} ms, "
                f"wall mean {1e3 * sum(wall) / len(wall):.2f} ms, wall max {1e3 * max(wall):.2f} ms"
            )
    finally:
        sampler.close()
    return 0


def _tool(name: str) -> str | None:
    beside_python = Path(sys.executable).parent / name  # the venv's console script, activated or not
    return str(beside_python) if beside_python.exists() else shutil.which(name)


def check_daemon(timeout_s: float = 30.0) -> int:
    dynod, cli = _tool("dynod"), _tool("dyno-cli")
    if dynod is None or cli is None:
        print("\n(dynod / dyno-cli not installed: daemon check skipped)")
        return 0
    helptext = subprocess.run([dynod, "--help"], capture_output=True, text=True, timeout=30).stdout
    if "--gpu-backend" not in helptext:
        print("\n(dynod has no --gpu-backend option: daemon check skipped)")
        return 0
    port, metrics_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="dyno-gpu-check-") as tmp:
        cmd = [
            dynod,
            *("--listen", "127.0.0.1", "--port", str(port), "--metrics-port", str(metrics_port)),
            *("--gpu-backend", "nvml", "--interval-s", "1"),
            *("--state-dir", os.path.join(tmp, "state"), "--trace-dir", os.path.join(tmp, "traces")),
        ]
        print(f"\nstarting: {' '.join(cmd)}")
        daemon = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        target = ["--host", "127.0.0.1", "--port", str(port)]
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                status = subprocess.run([cli, "status", *target], capture_output=True, text=True, timeout=30)
                if status.returncode == 0:
                    break
                if status.returncode == 2 or daemon.poll() is not None or time.monotonic() > deadline:
                    print(f"dynod did not become ready: {status.stdout}{status.stderr}", file=sys.stderr)
                    return 1
                time.sleep(0.5)
            time.sleep(2.5)  # a few ticks, so rates and GPM values exist
            print(status.stdout)
            metrics = subprocess.run([cli, "metrics", *target], capture_output=True, text=True, timeout=30)
            print(metrics.stdout or metrics.stderr)
            return 0 if metrics.returncode == 0 else 1
        finally:
            daemon.terminate()
            try:
                out, _ = daemon.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                out, _ = daemon.communicate()
            print(f"dynod exited with {daemon.returncode}; its log:\n{out[-4000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=3, help="samples to take (first primes GPM)")
    parser.add_argument("--interval-s", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--no-daemon", action="store_true", help="skip starting dynod")
    args = parser.parse_args(argv)
    rc = check_sampler(max(1, args.samples), args.interval_s)
    if rc != 0 or args.no_daemon:
        return rc
    return check_daemon()


if __name__ == "__main__":
    sys.exit(main())
