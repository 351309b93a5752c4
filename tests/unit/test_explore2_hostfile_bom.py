"""A hostfile saved by an editor that writes a UTF-8 byte order mark (Windows Notepad) must read like any other:
the BOM made the first host '\\ufeffgpu1', a usage error."""

from __future__ import annotations

from pathlib import Path

import pytest

from dyno.client.hosts import Host, read_hostfile

pytestmark = pytest.mark.unit


def test_hostfile_with_a_byte_order_mark(tmp_path: Path) -> None:
    f = tmp_path / "nodes.txt"
    f.write_bytes("gpu1:1779\r\n# rack 2\r\ngpu[2-3]\r\n".encode("utf-8-sig"))
    assert read_hostfile(f) == [Host("gpu1", 1779), Host("gpu2"), Host("gpu3")]
