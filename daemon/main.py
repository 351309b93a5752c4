"""`dynod` entry point: flags/config, logging, signals, exit codes (config.EXIT_CODES: 0 clean, 1 cannot start, 2 bad
config)."""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from typing import TextIO

from dyno import exit_codes
from dyno.daemon.config import ConfigError, DaemonConfig, build_parser, resolve_config
from dyno.daemon.sdnotify import notify
from dyno.grpc_import import import_grpc
from dyno.netaddr import host_port

__all__ = ["main", "log_formatter"]

log = logging.getLogger("dynod")
GIL_SWITCH_INTERVAL_S = 0.001  # CPython's default: 0.005


_FORMAT = "%(levelname)s %(name)s: %(message)s"
# syslog priorities (sd-daemon.h SD_ERR ...) of the logging levels, for the "<N>" prefix journald reads
_PRIORITIES = ((logging.CRITICAL, 2), (logging.ERROR, 3), (logging.WARNING, 4), (logging.INFO, 6))


def _on_journal(stream: TextIO, env: Mapping[str, str]) -> bool:
    """Whether `stream` is the journal stream systemd gave this process: JOURNAL_STREAM names its device:inode
    (a child that merely inherited the variable writes elsewhere)."""
    want = env.get("JOURNAL_STREAM")
    if not want:
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError):  # no real file descriptor (io.UnsupportedOperation is both)
        return False
    return want == f"{st.st_dev}:{st.st_ino}"


class _JournalFormatter(logging.Formatter):
    """Every line (a traceback's too) starts with its syslog priority, "<4>WARNING ...": journald stores stderr
    lines at "info" otherwise, and `journalctl -p warning` found nothing. The journal adds time and unit."""

    def format(self, record: logging.LogRecord) -> str:
        priority = next((p for level, p in _PRIORITIES if record.levelno >= level), 7)
        return "\n".join(f"<{priority}>{line}" for line in super().format(record).split("\n"))


def log_formatter(stream: TextIO, env: Mapping[str, str]) -> logging.Formatter:
    """The formatter for dynod's stderr: journald priorities on the journal stream, else timestamped lines."""
    if _on_journal(stream, env):
        return _JournalFormatter(_FORMAT)
    return logging.Formatter("%(asctime)s " + _FORMAT)


def _setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(log_formatter(sys.stderr, os.environ))
    logging.basicConfig(level=level.upper(), handlers=[handler])


def _error(message: str) -> None:
    """The one line dynod prints before exiting non-zero, at error priority in the journal."""
    prefix = "<3>" if _on_journal(sys.stderr, os.environ) else ""
    print(f"{prefix}dynod: error: {message}", file=sys.stderr)


DEFAULT_SIM_GPUS = DaemonConfig.sim_gpus


class _SignalWakeup:
    """A pipe that every signal writes a byte to (signal.set_wakeup_fd), whichever thread the kernel gave it to.
    The kernel gives a process-directed signal to any thread that does not block it (grpc's, the sampler's), and
    Python runs handlers only on the main thread, when that thread next runs Python code: a main thread asleep in
    Event.wait() stayed asleep, and a SIGTERM went unanswered until systemd's SIGKILL (under load, a loop of starts
    and SIGTERMs hung on its 8th). Reading this pipe wakes it instead, with no periodic wake-ups while idle."""

    def __enter__(self) -> _SignalWakeup:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._previous = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        return self

    def wait(self, stop: threading.Event) -> None:
        """Until a handler has set `stop`; any other signal (SIGHUP) wakes it and it sleeps again."""
        while not stop.is_set():
            os.read(self._read, 64)  # back in Python, the main thread runs the pending handlers

    def __exit__(self, *exc: object) -> None:
        signal.set_wakeup_fd(self._previous)
        os.close(self._read)
        os.close(self._write)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 with one usage line on a bad flag
    try:
        config = resolve_config(args)
    except ConfigError as e:
        _error(str(e))
        return exit_codes.USAGE
    _setup_logging(config.log_level)
    # `dynod --sim-gpus 4` (or sim_gpus = 4 in the file) for a demo, without the backend that uses it
    if config.gpu_backend in ("auto", "nvml") and (args.sim_gpus is not None or config.sim_gpus != DEFAULT_SIM_GPUS):
        where = "--sim-gpus %d" if args.sim_gpus is not None else f"sim_gpus = %d in {config.config_path}"
        log.warning(
            where + " is ignored: gpu_backend %s never simulates; simulated GPUs need --gpu-backend sim",
            config.sim_gpus,
            config.gpu_backend,
        )

    import_grpc()  # without its fork handlers: dynod forks analysis workers while its threads serve (grpc_import)
    from dyno.daemon.app import Daemon, StartupError  # after logging, so import-time warnings are formatted

    # A thread waiting for the GIL waits about this long per thread that holds it before it: the libkineto
    # endpoint's thread must answer within ~90 ms however busy the RPC threads are (handler_slots.py, BENCHMARKS.md)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    stop = threading.Event()

    def _on_signal(signum: int, _frame: object) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    def _on_hup(_signum: int, _frame: object) -> None:
        # The default action would kill dynod on the spot (no drain, traces lost) when a terminal closes or
        # someone expects `kill -HUP` to reload; nothing is re-read at run time, so say so and keep serving.
        log.warning("received SIGHUP, ignored: the configuration is read only at start; restart dynod to apply it")

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGHUP, _on_hup)
    with _SignalWakeup() as wakeup:
        try:
            daemon = Daemon(config)
            daemon.start()
            # What start-up made (modules, config, servers) lives as long as dynod: out of the cyclic collector's
            # scans. Its requests allocate short-lived objects that reference counting frees; a young-generation pass
            # every 20,000 allocations instead of 700 spends less of the GIL on collection under many callers
            # (bench/registry_scale.py).
            gc.freeze()
            gc.set_threshold(20_000, 10, 10)
        except StartupError as e:
            _error(str(e))
            return exit_codes.FAILURE
        except ConfigError as e:  # unusable token or TLS files, found when the server is built
            _error(str(e))
            return exit_codes.USAGE
        # host_port puts IPv6 literals in brackets: "http://::1:9778/metrics" is no URL
        metrics_at = host_port(config.metrics_listen or config.listen, daemon.metrics_port)
        metrics = f"http://{metrics_at}/metrics" if daemon.metrics_port else "off"
        grpc_at = host_port(config.listen, daemon.port)
        log.info("dynod %s ready: grpc=%s metrics=%s pid=%d", daemon.status().version, grpc_at, metrics, os.getpid())
        notify("READY=1")
        wakeup.wait(stop)  # the signal handler sets it
        notify("STOPPING=1")
        daemon.stop()
    log.info("stopped")
    return exit_codes.OK


if __name__ == "__main__":
    sys.exit(main())
