"""Host discovery: Slurm nodelist expansion, host lists with ports and IPv6, hostfiles, Slurm job lookup."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from fetch_cmd_fakes import PYTHON_M_DYNO_CLIENT

from dyno.client.hosts import (
    MAX_HOSTS,
    Host,
    HostSpecError,
    dedupe,
    expand_nodelist,
    parse_host,
    parse_hosts,
    read_hostfile,
    slurm_job_hosts,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("nodelist", "expected"),
    [
        ("node1", ["node1"]),
        ("gpu[001-004,007],login1", ["gpu001", "gpu002", "gpu003", "gpu004", "gpu007", "login1"]),
        ("node[1-3]-ib", ["node1-ib", "node2-ib", "node3-ib"]),
        ("a[01-02]b[1-2]", ["a01b1", "a01b2", "a02b1", "a02b2"]),
        ("n[8-11]", ["n8", "n9", "n10", "n11"]),  # no padding when the lower bound has none
        ("n[08-11]", ["n08", "n09", "n10", "n11"]),  # the lower bound's width is kept
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),
        ("n[7]", ["n7"]),
        ("n[3,1,2]", ["n3", "n1", "n2"]),  # order as written
        ("n[1-2,2-3]", ["n1", "n2", "n3"]),  # duplicates removed
        ("x[1-2],y,x[2-3]", ["x1", "x2", "y", "x3"]),
        (
            "rack[1-2]-node[01-02].ib.cluster",
            [
                "rack1-node01.ib.cluster",
                "rack1-node02.ib.cluster",
                "rack2-node01.ib.cluster",
                "rack2-node02.ib.cluster",
            ],
        ),
        ("[1-2]n", ["1n", "2n"]),
        (" gpu[1-2] , cpu1 ", ["gpu1", "gpu2", "cpu1"]),
        ("", []),
    ],
)
def test_expand_nodelist(nodelist: str, expected: list[str]) -> None:
    assert expand_nodelist(nodelist) == expected


@pytest.mark.parametrize(
    ("nodelist", "message"),
    [
        ("gpu[1-4", "unclosed '\\['"),
        ("gpu1-4]", "unmatched '\\]'"),
        ("gpu[]", "empty brackets"),
        ("gpu[4-1]", "goes backwards"),
        ("gpu[1[2]]", "nested '\\['"),
        ("gpu[a-b]", "bad range 'a-b'"),
        ("gpu[1-]", "bad range '1-'"),
        ("gpu[1,,2]", "bad range ''"),
        ("gpu[1-2-3]", "bad range"),
        ("gpu[1-4:2]", "bad range"),
        ("a,,b", "empty entry"),
        ("a,", "empty entry"),
        ("bad name", "bad host name"),
        ("-lead", "bad host name"),
        ("n[0-999999999]", "more than"),
        ("a[1-1000]b[1-1000]", "more than"),
    ],
)
def test_malformed_nodelists(nodelist: str, message: str) -> None:
    with pytest.raises(HostSpecError, match=message):
        expand_nodelist(nodelist)


def test_max_hosts_is_large_enough_for_real_clusters() -> None:
    assert len(expand_nodelist("n[00001-20000]")) == 20000 <= MAX_HOSTS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a,b:1779,c", [Host("a"), Host("b", 1779), Host("c")]),
        ("gpu[01-02]:1780,login", [Host("gpu01", 1780), Host("gpu02", 1780), Host("login")]),
        ("a,a,a:1778,a:1779", [Host("a"), Host("a", 1779)]),  # same (name, port) once; order kept
        ("10.0.0.1:2000,10.0.0.1", [Host("10.0.0.1", 2000), Host("10.0.0.1")]),
        ("[::1]:1779,::1,[fe80::1%eth0]", [Host("::1", 1779), Host("::1"), Host("fe80::1%eth0")]),
        ("c,b,a", [Host("c"), Host("b"), Host("a")]),
    ],
)
def test_parse_hosts(text: str, expected: list[Host]) -> None:
    assert parse_hosts(text) == expected


def test_parse_hosts_default_port() -> None:
    assert parse_hosts("a,b:7", default_port=9000) == [Host("a", 9000), Host("b", 7)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty host list"),
        ("a:", "bad port"),
        ("a:0", "outside 1-65535"),
        ("a:65536", "outside 1-65535"),
        ("a:http", "not a number"),
        ("[::1]x", "unexpected"),
        ("[::1", "unclosed"),
        ("a:b:c", "bad IPv6 address"),
        ("[::zz]:1", "bad IPv6 address"),
        ("a,,b", "empty entry"),
        ("gpu[1-3:1779", "unclosed"),
        ("a/b", "bad host name"),
        ("node\n1", "bad host name"),
    ],
)
def test_parse_hosts_errors(text: str, message: str) -> None:
    with pytest.raises(HostSpecError, match=message):
        parse_hosts(text)


def test_host_target_and_str() -> None:
    assert Host("gpu1", 1779).target == "gpu1:1779"
    assert Host("::1", 1778).target == "[::1]:1778"
    assert str(Host("a")) == "a:1778"
    assert parse_host("[::1]:5") == Host("::1", 5)
    with pytest.raises(HostSpecError):
        parse_host("gpu[1-2]")  # one host only
    with pytest.raises(AttributeError):
        Host("a").port = 1  # type: ignore[misc]  # frozen


def test_dedupe_keeps_first_occurrence() -> None:
    assert dedupe([Host("b"), Host("a"), Host("b"), Host("a", 2)]) == [Host("b"), Host("a"), Host("a", 2)]


def test_hostfile(tmp_path: Path) -> None:
    f = tmp_path / "hosts"
    f.write_text("# the job's nodes\n\ngpu01\ngpu02:1779   # other port\n  gpu[03-04]\n\ngpu01\n[::1]:1780\n")
    assert read_hostfile(f) == [Host("gpu01"), Host("gpu02", 1779), Host("gpu03"), Host("gpu04"), Host("::1", 1780)]


def test_hostfile_errors(tmp_path: Path) -> None:
    with pytest.raises(HostSpecError, match="does not exist"):
        read_hostfile(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.write_text("# nothing here\n\n")
    with pytest.raises(HostSpecError, match="lists no hosts"):
        read_hostfile(empty)
    bad = tmp_path / "bad"
    bad.write_text("gpu01\ngpu[1-\n")
    with pytest.raises(HostSpecError, match=r"bad:2: unclosed"):
        read_hostfile(bad)
    with pytest.raises(HostSpecError, match="cannot read"):
        read_hostfile(tmp_path)  # a directory


class FakeSlurm:
    """Records commands; answers squeue / scontrol like Slurm would."""

    def __init__(self, squeue_out: str, *, tools: Sequence[str] = ("squeue", "scontrol")) -> None:
        self.squeue_out = squeue_out
        self.tools = set(tools)
        self.calls: list[list[str]] = []

    def which(self, name: str) -> str | None:
        return f"/usr/bin/{name}" if name in self.tools else None

    def run(self, argv: Sequence[str]) -> str:
        self.calls.append(list(argv))
        if argv[0] == "squeue":
            return self.squeue_out
        if argv[:3] == ["scontrol", "show", "hostnames"]:
            return "".join(f"{n}\n" for n in expand_nodelist(argv[3]))
        raise AssertionError(argv)


def test_slurm_job_with_scontrol() -> None:
    slurm = FakeSlurm("gpu[001-002],login1\n")
    hosts = slurm_job_hosts("1234", 1790, run=slurm.run, which=slurm.which)
    assert hosts == [Host("gpu001", 1790), Host("gpu002", 1790), Host("login1", 1790)]
    assert slurm.calls == [
        ["squeue", "-h", "-j", "1234", "-o", "%N"],
        ["scontrol", "show", "hostnames", "gpu[001-002],login1"],
    ]


def test_slurm_job_without_scontrol_uses_builtin_expander() -> None:
    slurm = FakeSlurm("node[1-2]\nnode[2-3]\n", tools=("squeue",))  # array job: one line per task
    assert slurm_job_hosts("36199_0", run=slurm.run, which=slurm.which) == [Host("node1"), Host("node2"), Host("node3")]
    assert [c[0] for c in slurm.calls] == ["squeue"]


def test_slurm_job_without_squeue_inside_the_allocation() -> None:
    slurm = FakeSlurm("", tools=())
    env = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "c[1-2]"}
    assert slurm_job_hosts("77", run=slurm.run, which=slurm.which, environ=env) == [Host("c1"), Host("c2")]
    with pytest.raises(HostSpecError, match="needs Slurm's squeue"):
        slurm_job_hosts("78", run=slurm.run, which=slurm.which, environ=env)


def test_slurm_job_errors() -> None:
    slurm = FakeSlurm("(null)\n")
    with pytest.raises(HostSpecError, match="no allocated nodes"):
        slurm_job_hosts("1", run=slurm.run, which=slurm.which)
    with pytest.raises(HostSpecError, match="bad Slurm job id"):
        slurm_job_hosts("1; rm -rf /", run=slurm.run, which=slurm.which)


def _fake_squeue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    squeue = tmp_path / "squeue"
    squeue.write_text("#!/bin/sh\n" + script)
    squeue.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))  # no scontrol there: the built-in expander is used


def test_slurm_tools_run_for_real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_squeue(tmp_path, monkeypatch, 'test "$*" = "-h -j 42 -o %N" && echo "gpu[07-08]"\n')
    assert slurm_job_hosts("42") == [Host("gpu07"), Host("gpu08")]


def test_slurm_command_failure_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_squeue(tmp_path, monkeypatch, "echo 'slurm_load_jobs error: Invalid job id specified' >&2\nexit 1\n")
    with pytest.raises(HostSpecError, match=r"failed: slurm_load_jobs error: Invalid job id specified$"):
        slurm_job_hosts("999")


def test_targets_bracket_ipv6_literals_once() -> None:
    from dyno.netaddr import host_port

    assert Host("::1", 1779).target == "[::1]:1779" == host_port("[::1]", 1779)
    assert Host("node1", 1778).target == "node1:1778" == host_port("node1", 1778)


# A hostfile saved by an editor that writes a UTF-8 byte order mark (Windows Notepad) must read like any other


def test_hostfile_with_a_byte_order_mark(tmp_path: Path) -> None:
    f = tmp_path / "nodes.txt"
    f.write_bytes("gpu1:1779\r\n# rack 2\r\ngpu[2-3]\r\n".encode("utf-8-sig"))
    assert read_hostfile(f) == [Host("gpu1", 1779), Host("gpu2"), Host("gpu3")]


# `--hostfile -` reads the host list from standard input (`squeue -h -o %N -j 36199 | dyno-cli status --hostfile -`,
# as `-` means for most tools)


def test_hostfile_dash_is_stdin(fake_dynod) -> None:
    r = subprocess.run(
        [*PYTHON_M_DYNO_CLIENT, "ps", "--hostfile", "-", "--json"],
        input=f"# from squeue\n{fake_dynod.target} slots=8\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert '"pid": 1000' in r.stdout


def test_a_bad_line_on_stdin_names_it(fake_dynod) -> None:
    r = subprocess.run(
        [*PYTHON_M_DYNO_CLIENT, "status", "--hostfile", "-"],
        input=f"{fake_dynod.target}\nnode[1-\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "<stdin>:2: unclosed '['" in r.stderr, r.stderr
