"""ListProcesses' page token: where the next page of the registry's processes starts.

The registry lists processes in (job id, pid) order, so a token is the last (job id, pid) a page carried; the
next page is the processes after it, those registered meanwhile included, those gone left out.
"""

from __future__ import annotations

import base64
import binascii
import json

__all__ = ["BadProcessToken", "decode", "encode"]


class BadProcessToken(ValueError):
    """Not a next_page_token of ListProcesses."""


def encode(job_id: str, pid: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([job_id, pid]).encode()).decode()


def decode(token: str) -> tuple[str, int]:
    try:
        job_id, pid = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
    except (ValueError, TypeError, binascii.Error, UnicodeEncodeError):
        raise BadProcessToken("page_token: not a next_page_token of ListProcesses") from None
    if not isinstance(job_id, str) or not isinstance(pid, int) or isinstance(pid, bool):
        raise BadProcessToken("page_token: not a next_page_token of ListProcesses")
    return job_id, pid
