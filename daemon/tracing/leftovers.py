"""What a trace that did not end done may have left in its folder, and its removal once the writer is gone.

A trainer killed mid-export, or exiting past the agent's EXIT_FINISH_S while its export still runs, leaves partial
files under the daemon's trace dir: an agent trace its temporaries (dyno.trace_layout.agent_temporaries) and maybe
a final file published after it was reported failed; libkineto its `<path>.tmp`. dynod removes them when the process
is gone (nothing can write them any more), so a failed trace's folder holds no half-written file.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from dyno.daemon.registered_process import PROTOCOL_AGENT
from dyno.daemon.tracing.values import FINAL_STATES, ProcessTraceView, TraceState
from dyno.trace_layout import agent_temporaries, kineto_tmp

__all__ = ["leftover_paths", "remove_leftovers"]

log = logging.getLogger(__name__)


def leftover_paths(view: ProcessTraceView) -> list[Path]:
    """The files a process's trace may have left, if it ended other than done; [] otherwise (a done trace's file is
    the trace, and one still running is being written)."""
    if view.state not in FINAL_STATES or view.state == TraceState.DONE:
        return []
    path = Path(view.path)
    if view.protocol == PROTOCOL_AGENT:
        return [*agent_temporaries(path), path]
    return [kineto_tmp(path)]


def remove_leftovers(paths: Iterable[Path]) -> None:
    """Unlink what is there (never following a link: unlink removes a planted symlink itself)."""
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as e:
            log.warning("cannot remove %s, left by an unfinished trace: %s", path, e.strerror or e)
            continue
        log.info("removed %s, left by an unfinished trace", path)
