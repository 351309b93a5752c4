"""`dynod` entry point: flags/config, logging, signals, exit codes (0 clean, 1 cannot start, 2 bad config)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from dyno.daemon.config import ConfigError, build_parser, resolve_config
from dyno.daemon.sdnotify import notify
from dyno.netaddr import host_port

__all__ = ["main"]

log = logging.getLogger("dynod")


def _setup_logging(level: str) -> None:
    # Under journald (JOURNAL_STREAM set) timestamps and the unit name are added by the journal.
    fmt = "%(levelname)s %(name)s: %(message)s"
    if not os.environ.get("JOURNAL_STREAM"):
        fmt = "%(asctime)s " + fmt
    logging.basicConfig(level=level.upper(), format=fmt, stream=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 with one usage line on a bad flag
    try:
        config = resolve_config(args)
    except ConfigError as e:
        print(f"dynod: error: {e}", file=sys.stderr)
        return 2
    _setup_logging(config.log_level)

    from dyno.daemon.app import Daemon, StartupError  # after logging, so import-time warnings are formatted

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

    try:
        daemon = Daemon(config)
        daemon.start()
    except StartupError as e:
        print(f"dynod: error: {e}", file=sys.stderr)
        return 1
    except ConfigError as e:  # unusable token or TLS files, found when the server is built
        print(f"dynod: error: {e}", file=sys.stderr)
        return 2
    # host_port puts IPv6 literals in brackets: "http://::1:9778/metrics" is no URL
    metrics_at = host_port(config.metrics_listen or config.listen, daemon.metrics_port)
    metrics = f"http://{metrics_at}/metrics" if daemon.metrics_port else "off"
    grpc_at = host_port(config.listen, daemon.port)
    log.info("dynod %s ready: grpc=%s metrics=%s pid=%d", daemon.status().version, grpc_at, metrics, os.getpid())
    notify("READY=1")
    stop.wait()  # the signal handler sets it; no periodic wake-ups while idle
    notify("STOPPING=1")
    daemon.stop()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
