"""`dyno-cli version` across hosts lists every host it was given, failed ones included (their error type in the
table, the error on stderr), exactly like `status` (one shared table helper), and its exit code says some failed:
3 when some hosts failed, 1 when all did. Against a real dynod and a port nothing listens on."""

from __future__ import annotations

import json

import pytest

from conftest import free_port, run_cli

pytestmark = pytest.mark.integration


def _rows(stdout: str) -> dict[str, list[str]]:
    """The table's rows by HOST (the first column), below its header and rule."""
    lines = stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("HOST")) + 2
    return {ln.split()[0]: ln.split()[1:] for ln in lines[start:] if ln.strip()}


def test_version_lists_a_failed_host_with_its_error_and_exits_3(dynod) -> None:
    dead = f"127.0.0.1:{free_port()}"
    r = run_cli("version", "--hosts", f"{dynod.target},{dead}", "--timeout-s", "1")
    assert r.returncode == 3, r.stderr
    rows = _rows(r.stdout)
    assert list(rows) == [dynod.target, dead]  # host order kept, the dead one included
    assert rows[dynod.target][1] == "dyno.v1"
    assert rows[dead] == ["Unavailable", "-", "-", "-"]
    assert f"dyno-cli: error: {dead}: cannot reach dynod" in r.stderr and "Traceback" not in r.stderr


def test_version_and_status_show_a_failed_host_the_same_way(dynod) -> None:
    dead = f"127.0.0.1:{free_port()}"
    hosts = ["--hosts", f"{dead},{dynod.target}", "--timeout-s", "1"]
    version, status = run_cli("version", *hosts), run_cli("status", *hosts)
    assert version.returncode == status.returncode == 3
    assert _rows(version.stdout)[dead][0] == _rows(status.stdout)[dead][0] == "Unavailable"


def test_version_when_every_host_fails_exits_1_and_still_lists_them() -> None:
    dead = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    r = run_cli("version", "--hosts", ",".join(dead), "--timeout-s", "1")
    assert r.returncode == 1
    assert list(_rows(r.stdout)) == dead
    r = run_cli("version", "--hosts", ",".join(dead), "--timeout-s", "1", "--json")
    assert r.returncode == 1
    daemons = json.loads(r.stdout)["daemons"]
    got = [(d["host"], d["ok"], d["error"].split(":")[0]) for d in daemons]
    assert got == [(h, False, "Unavailable") for h in dead]
