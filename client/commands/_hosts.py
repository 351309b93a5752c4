"""Options shared by every host-level command (status, ps, metrics, trace): which daemons, how long to wait,
and how to authenticate. Hosts come from --host, --hosts, --hostfile and --slurm-job together (in that order,
duplicates dropped); with none of them, $DYNO_HOST or localhost."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from dyno import exit_codes
from dyno.argtypes import nonempty_path, number
from dyno.client.commands._catalog import COMMANDS
from dyno.client.commands._usage import UsageError, usage_error
from dyno.client.hosts import (
    DEFAULT_PORT,
    Host,
    HostSpecError,
    dedupe,
    parse_host,
    parse_hosts,
    read_hostfile,
    slurm_job_hosts,
)

# The client stack (grpc, protobuf, the auth and cluster modules) is imported by the functions that call daemons,
# not here: a command's parser and its --help load none of it.
if TYPE_CHECKING:
    from dyno.client.auth import ClientAuth
    from dyno.client.client import DynoClient
    from dyno.client.cluster import Cluster, HostResult

__all__ = [
    "FANOUT_EXIT_CODES",
    "UsageError",
    "add_host_arguments",
    "add_host_command",
    "client_auth",
    "cluster_from_args",
    "fanout_exit_code",
    "hosts_from_args",
    "print_failures",
    "resolve_hosts",
    "single_client",
    "usage_error",
]


# Per-call deadlines: a day is far beyond any answer; unbounded values overflow the threading timers (1e308).
MAX_CALL_TIMEOUT_S = 86400.0
_positive = number(float, gt=0, le=MAX_CALL_TIMEOUT_S)
_port = number(int, ge=1, le=65535)
_concurrency = number(int, ge=1, le=4096)


def add_host_command(
    sub: argparse._SubParsersAction,
    name: str,
    description: str,
    codes: Mapping[int, str],
    *,
    call_timeout_flag: str = "--timeout-s",
) -> argparse.ArgumentParser:
    """The parser of the host-level command `name`: its one-line help from the catalog, `description`, its exit
    `codes` as the epilog, and the host options (add_host_arguments)."""
    p: argparse.ArgumentParser = sub.add_parser(
        name, help=COMMANDS[name], description=description, epilog=exit_codes.describe(codes)
    )
    add_host_arguments(p, call_timeout_flag=call_timeout_flag)
    return p


def add_host_arguments(parser: argparse.ArgumentParser, *, call_timeout_flag: str = "--timeout-s") -> None:
    """--host/--port, --hosts, --hostfile, --slurm-job, the per-call deadline, --max-concurrency and the auth options.

    The per-call deadline is stored as `args.call_timeout_s`; its flag is `--timeout-s` unless a command that
    already gives --timeout-s another meaning (trace: the overall wait) names it differently."""
    g = parser.add_argument_group("daemons")
    g.add_argument(
        "--host",
        "--hostname",  # dynolog's dyno spells it so
        action="append",  # a second --host adds a host (never replaces the first silently)
        help="a daemon, HOST or HOST:PORT (repeatable; default $DYNO_HOST or localhost when no other host option is "
        "given)",
    )
    g.add_argument(
        "--port",
        type=_port,
        default=None,
        help=f"port of every host given without one (default $DYNO_PORT or {DEFAULT_PORT})",
    )
    g.add_argument(
        "--hosts",
        action="append",
        default=[],
        metavar="LIST",
        help="comma-separated hosts, each HOST[:PORT] or a Slurm nodelist like gpu[001-004,007] (repeatable)",
    )
    g.add_argument(
        "--hostfile",
        action="append",
        default=[],
        type=nonempty_path,
        metavar="FILE",
        help="file with one host (or nodelist) per line, further words ignored (an MPI hostfile's 'node1 slots=8' "
        "works); '#' starts a comment; '-' reads standard input (repeatable)",
    )
    g.add_argument(
        "--slurm-job",
        metavar="JOB_ID",
        help="every node of this Slurm job (squeue + scontrol; built-in nodelist expansion otherwise)",
    )
    # --call-timeout-s everywhere (trace and fetch have only that name): one wrapper script can pass the same flag
    # to every command
    flags = [call_timeout_flag] + (["--call-timeout-s"] if call_timeout_flag != "--call-timeout-s" else [])
    g.add_argument(
        *flags,
        dest="call_timeout_s",
        type=_positive,
        default=5.0,
        metavar="S",
        help="deadline for each host's answer (default 5); slow or dead hosts are reported, not waited for",
    )
    g.add_argument(
        "--max-concurrency", type=_concurrency, default=256, metavar="N", help="hosts called at once (default 256)"
    )
    a = parser.add_argument_group(
        "auth",
        "Needed when the daemons require a token or TLS. A token over plaintext "
        "is readable by anyone on the network path: use it alone only on trusted "
        "networks, else add --tls-ca.",
    )
    a.add_argument(
        "--auth-token-file",
        type=nonempty_path,
        default=_env_path("DYNO_AUTH_TOKEN_FILE"),
        metavar="FILE",
        help="file with the daemons' shared bearer token (default $DYNO_AUTH_TOKEN_FILE)",
    )
    a.add_argument(
        "--tls-ca",
        type=nonempty_path,
        metavar="PEM",
        help="CA bundle that signed the daemons' certificates (enables TLS)",
    )
    a.add_argument("--tls-cert", type=nonempty_path, metavar="PEM", help="client certificate for mTLS")
    a.add_argument("--tls-key", type=nonempty_path, metavar="PEM", help="client private key for mTLS")
    a.add_argument(
        "--tls-server-name",
        metavar="NAME",
        help="name to check the daemons' certificates against instead of the host name dialled",
    )


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


def _default_port(args: argparse.Namespace) -> int:
    if args.port is not None:
        return int(args.port)
    env = os.environ.get("DYNO_PORT", "")
    try:
        return int(_port(env)) if env else DEFAULT_PORT
    except argparse.ArgumentTypeError as e:
        raise HostSpecError(f"$DYNO_PORT: {e}") from None


def hosts_from_args(args: argparse.Namespace) -> list[Host]:
    """The hosts the options name, in order, without duplicates. Raises HostSpecError."""
    port = _default_port(args)
    hosts: list[Host] = []
    for text in args.host or []:
        if not text.strip():  # `--host "$NODE"` with NODE unset must not quietly mean localhost
            raise HostSpecError("--host: empty host name")
        hosts.append(parse_host(text, port))
    for text in args.hosts:
        hosts.extend(parse_hosts(text, port))
    for path in args.hostfile:
        hosts.extend(read_hostfile(path, port))
    if args.slurm_job:
        hosts.extend(slurm_job_hosts(args.slurm_job, port))
    if not hosts and not (args.hosts or args.hostfile or args.slurm_job):
        env = os.environ.get("DYNO_HOST", "")
        try:  # a list too, as --hosts takes it; errors name the variable (none of the options was given)
            hosts.extend(parse_hosts(env, port) if env.strip() else [parse_host("localhost", port)])
        except HostSpecError as e:
            raise HostSpecError(f"$DYNO_HOST: {e}") from None
    return dedupe(hosts)


def resolve_hosts(args: argparse.Namespace) -> list[Host]:
    """hosts_from_args, with errors as a one-line usage error (exit 2)."""
    try:
        return hosts_from_args(args)
    except HostSpecError as e:
        usage_error(str(e))


def client_auth(args: argparse.Namespace) -> ClientAuth | None:
    """ClientAuth from the auth options, None when none is given; errors are usage errors (exit 2)."""
    if not (args.auth_token_file or args.tls_ca or args.tls_cert or args.tls_key):
        return None
    from dyno.client.auth import AuthError, ClientAuth

    try:
        auth = ClientAuth.from_files(
            token_file=args.auth_token_file,
            tls_ca=args.tls_ca,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            tls_server_name=args.tls_server_name,
        )
    except AuthError as e:
        token_file = args.auth_token_file
        if token_file is not None and token_file == _env_path("DYNO_AUTH_TOKEN_FILE") and e.path == token_file:
            # no option named the file: say where it came from (a profile's export, for every command)
            usage_error(f"$DYNO_AUTH_TOKEN_FILE: {e} (unset $DYNO_AUTH_TOKEN_FILE or pass --auth-token-file)")
        usage_error(str(e))
    _check_tls_files(auth, args.tls_ca, args.tls_cert, args.tls_key)
    return auth


def _check_tls_files(auth: ClientAuth, ca: Path | None, cert: Path | None, key: Path | None) -> None:
    """Usage error unless the TLS files are what their options say (checked with the ssl module, as grpc would
    use them): grpc takes any PEM, then logs C++ errors on stderr at every connection attempt and fails with
    "TLS handshake with dynod failed", which blames the daemon for a key or CA file mixed up on the client."""
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if auth.tls_ca is not None:
        try:
            ctx.load_verify_locations(cadata=auth.tls_ca.decode("ascii", "replace"))
        except (ssl.SSLError, ValueError) as e:
            usage_error(f"--tls-ca {ca}: not a CA certificate bundle (PEM certificates): {e}")
    if cert is not None and key is not None:
        try:  # a password callback, so an encrypted key fails here instead of prompting (grpc cannot use one)
            ctx.load_cert_chain(cert, key, password=lambda: b"")
        except (ssl.SSLError, OSError, ValueError) as e:
            usage_error(
                f"--tls-cert {cert} and --tls-key {key}: not a certificate and its unencrypted private key: {e}"
            )


def cluster_from_args(args: argparse.Namespace) -> Cluster:
    """A Cluster over the resolved hosts with the deadline, concurrency and auth from the options."""
    from dyno.client.cluster import Cluster

    return Cluster(
        resolve_hosts(args),
        deadline_s=args.call_timeout_s,
        max_concurrency=args.max_concurrency,
        auth=client_auth(args),
    )


def single_client(args: argparse.Namespace, what: str = "this command talks to one daemon") -> DynoClient:
    """A DynoClient for commands that talk to exactly one daemon; more than one host is a usage error (`what`
    says which part of the command needs one)."""
    hosts = resolve_hosts(args)
    if len(hosts) != 1:
        usage_error(f"{what}, but the options name {len(hosts)}")
    from dyno.client.cluster import open_client

    return open_client(hosts[0], client_auth(args), timeout_s=args.call_timeout_s)


# The --help table of the commands that end with fanout_exit_code (status, version, metrics, ps).
FANOUT_EXIT_CODES: dict[int, str] = {
    exit_codes.OK: "every host answered",
    exit_codes.FAILURE: "no host answered, or another error (said on stderr)",
    exit_codes.USAGE: "usage (bad options, a malformed host list)",
    exit_codes.PARTIAL: "some hosts failed (each named on stderr)",
    exit_codes.INTERRUPTED: "interrupted (Ctrl-C or SIGTERM)",
}


def fanout_exit_code(results: list[HostResult[Any]]) -> int:
    """0 when every host answered, 3 when some did not (partial), 1 when none did."""
    bad = sum(not r.ok for r in results)
    if bad == 0:
        return exit_codes.OK
    return exit_codes.FAILURE if bad == len(results) else exit_codes.PARTIAL


def print_failures(results: list[HostResult[Any]], file: TextIO | None = None) -> None:
    """One line per failed host: "dyno-cli: error: host:port: message (ErrorType)"."""
    out = file if file is not None else sys.stderr
    for r in results:
        if r.ok:
            continue
        print(f"dyno-cli: error: {r.host}: {r.error} ({r.error_type})", file=out)
