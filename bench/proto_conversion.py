"""The dataclass <-> dyno.v1 converters built on dyno.message_fields, per record: a job record each way (a ListJobs
page converts one per row) and a 64-rank trace summary from the wire (dyno-cli opportunities and trace --summaries
convert one per host).

    python bench/proto_conversion.py             # best of 7 runs each

Target: reading (from_proto, the paths that convert many records) no slower than the hand-written field lists
they replaced; writing within a few µs of them (a flush writes one record per job). Figures in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable

from dyno.daemon.jobs.codec import record_from_proto, record_to_proto
from dyno.daemon.jobs.records import JobRecord
from dyno.trace_summary_pb import summary_from_proto
from dyno.v1 import dyno_pb2


def _best_us(call: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(call, number=number, repeat=7)) / number * 1e6


def main() -> None:
    record = JobRecord("j", "u", "h", 1, 2, True, gpu_indices=(0, 1), ranks=(0, 1), pids=(5, 6), gpu_seconds=1.5)
    message = record_to_proto(record)
    assert record_from_proto(message) == record
    summary = dyno_pb2.TraceSummary(
        trace_id="t",
        ranks=[dyno_pb2.RankStepStats(rank=i, steps=3, mean_step_us=1.0) for i in range(64)],
        rules=[dyno_pb2.RuleLoss(rule="x", severity="high", time_lost_share=0.1) for _ in range(10)],
    )
    print(f"record_to_proto              {_best_us(lambda: record_to_proto(record), 5000):8.2f} us")
    print(f"record_from_proto            {_best_us(lambda: record_from_proto(message), 5000):8.2f} us")
    print(f"summary_from_proto, 64 ranks {_best_us(lambda: summary_from_proto(summary), 300):8.1f} us")
    print("target: from_proto no slower than field by field; to_proto within a few us (docs/BENCHMARKS.md)")


if __name__ == "__main__":
    main()
