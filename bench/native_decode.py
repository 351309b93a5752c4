"""Benchmark: ``_native.decode_batch`` alone, in-process, on the batches the loader cuts from each shared trace.

Not a test. The batches are collected once per trace (the loader's own block cuts, the ones the native decoder
accepts), then decoded ``--repeat`` times; the best time per trace is printed with the bytes decoded. Run it in two
checkouts (each one's venv) to compare builds of ``trace_analysis/_native.c``; target (decision 70): no slower for
parsing without the GIL. With ``--other SO``, the ``_native`` module at that path (e.g. another checkout's
``trace_analysis/_native.cpython-*.so``) is timed too, interleaved with this one, round by round.

    python bench/native_decode.py [--repeat 30] [--other ../main/trace_analysis/_native.cpython-311-x86_64-linux-gnu.so]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import io
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from bench_common import SHARED_GPU_TRACES

from dyno.trace_analysis import _native  # type: ignore[attr-defined]
from dyno.trace_analysis.eventdecode import decode_batch
from dyno.trace_analysis.jsonscan import ScanResult, iter_event_batches


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("_native", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _batches(path: Path) -> list[bytes]:
    raw = path.read_bytes()
    data = gzip.decompress(raw) if path.name.endswith(".gz") else raw
    out: list[bytes] = []

    def keep(batch: Any) -> Any:
        cols = _native.decode_batch(batch)
        if cols is not None:
            out.append(bytes(batch))
        return cols

    for _ in iter_event_batches(io.BytesIO(data), ScanResult(), decode=decode_batch, fast_decode=keep):
        pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=Path, default=SHARED_GPU_TRACES)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--other", help="another build's _native .so, timed interleaved with this one")
    args = ap.parse_args()
    mods = {"this": _native}
    if args.other:
        mods["other"] = _load(args.other)
    print(f"{'trace file':40} {'MB':>6} " + " ".join(f"{k + ' ms':>9}" for k in mods))
    for path in sorted(args.traces.glob("*/*.json*")):
        batches = _batches(path)
        best = dict.fromkeys(mods, float("inf"))
        for _ in range(args.repeat):
            for name, mod in mods.items():
                t0 = time.perf_counter()
                for b in batches:
                    mod.decode_batch(b)
                best[name] = min(best[name], time.perf_counter() - t0)
        mb = sum(map(len, batches)) / 1e6
        print(f"{path.name[:40]:40} {mb:6.1f} " + " ".join(f"{v * 1e3:9.2f}" for v in best.values()))
    print("(best of --repeat; target: this build no slower than the one before it)")


if __name__ == "__main__":
    main()
