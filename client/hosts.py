"""Host discovery: host lists, hostfiles and Slurm jobs, resolved to an ordered, duplicate-free list of Host.

Slurm nodelists (`gpu[001-004,007],login1`, `node[1-3]-ib`, `a[01-02]b[1-2]`) are expanded by a built-in
expander, so `--hosts gpu[01-04]` works and `--slurm-job` works where `scontrol` is missing. `scontrol show
hostnames` is preferred when present because it knows every Slurm syntax extension of the installed version.
"""

from __future__ import annotations

import ipaddress
import itertools
import logging
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dyno.netaddr import host_port

__all__ = [
    "DEFAULT_PORT",
    "MAX_HOSTS",
    "Host",
    "HostSpecError",
    "dedupe",
    "expand_nodelist",
    "parse_host",
    "parse_hosts",
    "read_hostfile",
    "slurm_job_hosts",
]

log = logging.getLogger(__name__)

DEFAULT_PORT = 1778
# Bounds every expansion: `n[0-999999999]` is a typo, not a cluster.
MAX_HOSTS = 100_000

# RFC 1123 labels plus '_' (seen in real inventories); dots separate labels.
_NAME_RE = re.compile(r"\A[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?\Z")
_RANGE_RE = re.compile(r"^(\d+)(?:-(\d+))?$")


class HostSpecError(ValueError):
    """A malformed host list, hostfile or nodelist, or a Slurm lookup that failed; the message is one line."""


@dataclass(frozen=True, order=True)
class Host:
    """One daemon endpoint. `name` is a hostname, an IPv4 address or a bare IPv6 address (no brackets)."""

    name: str
    port: int = DEFAULT_PORT

    @property
    def target(self) -> str:
        """gRPC target, "name:port"; IPv6 literals in brackets ("[::1]:1778")."""
        return host_port(self.name, self.port)

    def __str__(self) -> str:
        return self.target


def _check_port(text: str, spec: str) -> int:
    if not text.isdigit():
        raise HostSpecError(f"bad port in {spec!r}: {text!r} is not a number")
    port = int(text)
    if not 1 <= port <= 65535:
        raise HostSpecError(f"bad port in {spec!r}: {port} is outside 1-65535")
    return port


def _check_name(name: str, spec: str) -> str:
    if not name:
        raise HostSpecError(f"empty host name in {spec!r}")
    if not _NAME_RE.match(name) or ".." in name:
        raise HostSpecError(f"bad host name {name!r} in {spec!r}")
    return name


def _split_port(spec: str, default_port: int) -> tuple[str, int]:
    """Split "name:port", "[v6]:port", "[v6]" or a bare IPv6 address; the name part may be a nodelist."""
    if "://" in spec:  # a URL pasted from a browser or a config (was: "bad IPv6 address 'http://...'")
        netloc = urllib.parse.urlsplit(spec).netloc
        raise HostSpecError(f"{spec!r} is a URL: give HOST[:PORT]" + (f", e.g. {netloc}" if netloc else ""))
    if spec.startswith("[") and ":" in spec.split("]", 1)[0]:
        # IPv6 literal: "[::1]" or "[::1]:1779". A nodelist never has ':' inside brackets.
        inner, sep, rest = spec[1:].partition("]")
        if not sep:
            raise HostSpecError(f"unclosed '[' in IPv6 address {spec!r}")
        if rest and not rest.startswith(":"):
            raise HostSpecError(f"unexpected {rest!r} after IPv6 address in {spec!r}")
        return _check_ipv6(inner, spec), _check_port(rest[1:], spec) if rest else default_port
    if spec.count(":") > 1 and "[" not in spec:
        return _check_ipv6(spec, spec), default_port  # bare IPv6, no port possible
    name, sep, port = spec.rpartition(":")
    if not sep:
        return spec, default_port
    if "]" in port:
        raise HostSpecError(f"unexpected ':' inside brackets in {spec!r}")
    return name, _check_port(port, spec)


def _check_ipv6(text: str, spec: str) -> str:
    address, _, zone = text.partition("%")
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        raise HostSpecError(f"bad IPv6 address {text!r} in {spec!r}") from None
    if "%" in text and not re.fullmatch(r"[A-Za-z0-9_.-]+", zone):
        raise HostSpecError(f"bad IPv6 zone in {spec!r}")
    return text


def parse_host(spec: str, default_port: int = DEFAULT_PORT) -> Host:
    """One host, no nodelist: "a", "a:1779", "10.0.0.1:1779", "::1", "[::1]:1779"."""
    spec = spec.strip()
    name, port = _split_port(spec, default_port)
    if ":" not in name:
        _check_name(name, spec)
    return Host(name, port)


def _split_top_level(text: str, spec: str) -> list[str]:
    """Split at commas outside brackets."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostSpecError(f"nested '[' in {spec!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostSpecError(f"unmatched ']' in {spec!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise HostSpecError(f"unclosed '[' in {spec!r}")
    parts.append(text[start:])
    return parts


def _expand_ranges(body: str, spec: str) -> list[str]:
    """ "001-004,007" -> ["001", "002", "003", "004", "007"]; the width of the lower bound is kept (Slurm's rule)."""
    if not body:
        raise HostSpecError(f"empty brackets '[]' in {spec!r}")
    out: list[str] = []
    for part in body.split(","):
        m = _RANGE_RE.match(part.strip())
        if not m:
            raise HostSpecError(f"bad range {part!r} in {spec!r} (expected N or N-M)")
        lo_text, hi_text = m.group(1), m.group(2)
        lo = int(lo_text)
        hi = int(hi_text) if hi_text is not None else lo
        if hi < lo:
            raise HostSpecError(f"range {part!r} in {spec!r} goes backwards")
        if len(out) + hi - lo + 1 > MAX_HOSTS:
            raise HostSpecError(f"{spec!r} expands to more than {MAX_HOSTS} hosts")
        width = len(lo_text)
        out.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return out


def _expand_item(item: str, spec: str) -> list[str]:
    """One nodelist item with any number of bracket groups: "a[01-02]b[1-2]" -> a01b1 a01b2 a02b1 a02b2."""
    pieces: list[list[str]] = []
    rest = item
    while "[" in rest:
        prefix, _, tail = rest.partition("[")
        body, sep, rest = tail.partition("]")
        if not sep:
            raise HostSpecError(f"unclosed '[' in {spec!r}")
        pieces.append([prefix])
        pieces.append(_expand_ranges(body, spec))
    if "]" in rest:
        raise HostSpecError(f"unmatched ']' in {spec!r}")
    pieces.append([rest])
    total = 1
    for p in pieces:
        total *= len(p)
    if total > MAX_HOSTS:
        raise HostSpecError(f"{spec!r} expands to more than {MAX_HOSTS} hosts")
    # Leftmost group varies slowest, as scontrol prints them.
    return ["".join(combo) for combo in itertools.product(*pieces)]


def expand_nodelist(nodelist: str) -> list[str]:
    """Expand a Slurm nodelist ("gpu[001-004,007],login1") into host names, order kept, duplicates removed."""
    spec = nodelist.strip()
    if not spec:
        return []
    names: list[str] = []
    for item in _split_top_level(spec, spec):
        item = item.strip()
        if not item:
            raise HostSpecError(f"empty entry in {spec!r} (stray comma?)")
        for name in _expand_item(item, spec):
            names.append(_check_name(name, spec))
        if len(names) > MAX_HOSTS:
            raise HostSpecError(f"{spec!r} expands to more than {MAX_HOSTS} hosts")
    return list(dict.fromkeys(names))


def dedupe(hosts: Iterable[Host]) -> list[Host]:
    """Drop repeated (name, port) pairs, keeping the first occurrence's position."""
    return list(dict.fromkeys(hosts))


def _parse_entry(entry: str, default_port: int, spec: str) -> list[Host]:
    entry = entry.strip()
    if not entry:
        raise HostSpecError(f"empty entry in {spec!r} (stray comma?)")
    name, port = _split_port(entry, default_port)
    if ":" in name:  # IPv6 literal, already checked
        return [Host(name, port)]
    return [Host(_check_name(n, entry), port) for n in _expand_item(name, entry)]


def parse_hosts(text: str, default_port: int = DEFAULT_PORT) -> list[Host]:
    """Parse "a,b:1779,gpu[01-04]:1780,[::1]:1779": commas outside brackets separate entries, each entry may be
    a Slurm nodelist item and may carry a ":port" that applies to all of its hosts. Order kept, duplicates
    removed."""
    spec = text.strip()
    if not spec:
        raise HostSpecError("empty host list")
    hosts: list[Host] = []
    # IPv6 literals hold ':' but never ',' inside brackets, so one bracket-aware split serves both syntaxes.
    for entry in _split_top_level(spec, spec):
        hosts.extend(_parse_entry(entry, default_port, spec))
        if len(hosts) > MAX_HOSTS:
            raise HostSpecError(f"host list expands to more than {MAX_HOSTS} hosts")
    return dedupe(hosts)


def read_hostfile(path: str | os.PathLike[str], default_port: int = DEFAULT_PORT) -> list[Host]:
    """One entry per line (any parse_hosts syntax, so nodelists work too); '#' starts a comment; blank lines
    are skipped; key=value words after the entry (an MPI hostfile's slots=8) are ignored. Errors name the file and
    line. "-" is standard input (`squeue -h -o %N -j J | dyno-cli status --hostfile -`), named <stdin>."""
    stdin = os.fspath(path) == "-"
    p = Path("<stdin>" if stdin else path)
    try:
        if stdin:
            text = sys.stdin.buffer.read().decode("utf-8-sig")
        else:
            text = p.read_text(encoding="utf-8-sig")  # -sig: a byte order mark (Windows editors) is not a host
    except FileNotFoundError:
        raise HostSpecError(f"hostfile {p} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise HostSpecError(f"cannot read hostfile {p}: {getattr(e, 'strerror', None) or e}") from None
    hosts: list[Host] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        first, *rest = line.split()
        if rest and all("=" in word for word in rest):
            line = first  # an MPI hostfile's "node1 slots=8": the host, then key=value words for mpirun
        try:
            hosts.extend(parse_hosts(line, default_port))
        except HostSpecError as e:
            raise HostSpecError(f"{p}:{lineno}: {e}") from None
        if len(hosts) > MAX_HOSTS:
            raise HostSpecError(f"hostfile {p} lists more than {MAX_HOSTS} hosts")
    if not hosts:
        raise HostSpecError(f"hostfile {p} lists no hosts")
    return dedupe(hosts)


Runner = Callable[[Sequence[str]], str]


def _run(argv: Sequence[str]) -> str:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        raise HostSpecError(f"{argv[0]} timed out after 30 s") from None
    except OSError as e:
        raise HostSpecError(f"cannot run {argv[0]}: {e.strerror or e}") from None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise HostSpecError(f"{' '.join(argv)} failed: {detail[-1] if detail else f'exit {proc.returncode}'}")
    return proc.stdout


def slurm_job_hosts(
    job_id: str,
    default_port: int = DEFAULT_PORT,
    *,
    run: Runner = _run,
    which: Callable[[str], str | None] = shutil.which,
    environ: dict[str, str] | None = None,
) -> list[Host]:
    """Hosts of a Slurm job: `squeue -h -j J -o %N` for its nodelist, expanded by `scontrol show hostnames`
    when present, else by the built-in expander. Without squeue, inside the job's own allocation, the
    SLURM_JOB_NODELIST environment variable is used. `run`, `which` and `environ` are injectable for tests."""
    job = job_id.strip()
    if not re.fullmatch(r"[0-9]+(_[0-9]+|\[[0-9,\-%]+\])?(\+[0-9]+)?", job):
        raise HostSpecError(f"bad Slurm job id {job_id!r} (expected e.g. 1234, 1234_5 or 1234+0)")
    env = os.environ if environ is None else environ
    if which("squeue"):
        out = run(["squeue", "-h", "-j", job, "-o", "%N"])
        nodelists = [line.strip() for line in out.splitlines() if line.strip() and line.strip() != "(null)"]
        if not nodelists:
            raise HostSpecError(f"Slurm job {job} has no allocated nodes (pending, finished or unknown)")
    elif env.get("SLURM_JOB_ID") == job and env.get("SLURM_JOB_NODELIST"):
        nodelists = [env["SLURM_JOB_NODELIST"]]
        log.info("squeue not found; using SLURM_JOB_NODELIST of the current allocation")
    else:
        raise HostSpecError(
            "--slurm-job needs Slurm's squeue on PATH (or run inside the job's allocation); "
            "use --hosts or --hostfile instead"
        )
    names: list[str] = []
    for nodelist in nodelists:
        if which("scontrol"):
            out = run(["scontrol", "show", "hostnames", nodelist])
            names.extend(line.strip() for line in out.splitlines() if line.strip())
        else:
            names.extend(expand_nodelist(nodelist))
    hosts = [Host(_check_name(n, n), default_port) for n in names]
    return dedupe(hosts)
