"""A process forked while the agent's trace runs (a DataLoader worker with the default fork start method) must
not keep recording: it inherited the profiler session, which nothing would ever stop, so every op it ran stayed
buffered (230 MB for 200k small ops in our check)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dyno.client.agent.profiler import profiler_factory
from dyno.client.agent.trace import TraceSpec

pytestmark = pytest.mark.unit
torch = pytest.importorskip("torch")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_child_does_not_keep_recording(tmp_path: Path) -> None:
    spec = TraceSpec(trace_id="t-fork", output_path=tmp_path / "f.pt.trace.json.gz", duration_ms=10)
    ours = profiler_factory(spec, all_threads=True)()
    starter = threading.Thread(target=ours.start)  # as the agent does: on its own thread, for all threads
    starter.start()
    starter.join()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run ops, then see how many the session (if still on) recorded
        code = 1
        try:
            x = torch.randn(3)
            for _ in range(50):
                x = x + 1
            recorded = torch._C._autograd._disable_profiler().events()
            os.write(write_end, str(sum(e.name() == "aten::add" for e in recorded)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as r:
        recorded_in_child = r.read()
    _, status = os.waitpid(pid, 0)
    torch.randn(3) + 1  # the parent's trace goes on
    ours.stop()
    ours.export_chrome_trace(str(tmp_path / "parent.json"))
    assert os.waitstatus_to_exitcode(status) == 0
    assert recorded_in_child == "0", f"the forked child recorded {recorded_in_child} ops"
    assert "aten::add" in (tmp_path / "parent.json").read_text()
