"""Reading the secrets both sides of a connection share: a bearer token file and PEM files.

One implementation for dynod and for the client, each translating SecretFileError into its own error type.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

__all__ = ["MAX_TOKEN_BYTES", "SecretFileError", "read_pem", "read_token_file"]

log = logging.getLogger(__name__)

# A token file holds a secret, never a document: bounded, so a wrong path (a log, a trace) is caught.
MAX_TOKEN_BYTES = 4096
_MAX_PEM_BYTES = 1024 * 1024


class SecretFileError(ValueError):
    """A token or PEM file that cannot be used; the message names the file and says why, in one line. `path`: the
    file."""

    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


def _read_bounded(path: Path, limit: int, what: str) -> tuple[bytes, os.stat_result]:
    """At most limit + 1 bytes of the file (one more than allowed, so the caller sees it is too big) and the
    status of the file read; errors name it as `what`."""
    try:
        with open(path, "rb") as f:
            return f.read(limit + 1), os.fstat(f.fileno())
    except FileNotFoundError:
        raise SecretFileError(f"{what} {path} does not exist", path) from None
    except IsADirectoryError:
        raise SecretFileError(f"{what} {path} is a directory", path) from None
    except OSError as e:
        raise SecretFileError(f"cannot read {what} {path}: {e.strerror or e}", path) from None


def read_token_file(path: Path) -> str:
    """A shared token: surrounding whitespace stripped, one non-empty word. Warns when the file is readable by
    group or others (the token is then known to every user of that host) and when the token is short."""
    data, st = _read_bounded(path, MAX_TOKEN_BYTES, "auth token file")
    if len(data) > MAX_TOKEN_BYTES:
        raise SecretFileError(f"auth token file {path} is larger than {MAX_TOKEN_BYTES} bytes; is it a token?", path)
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise SecretFileError(f"auth token file {path} is not UTF-8 text", path) from None
    if not token:
        raise SecretFileError(f"auth token file {path} is empty", path)
    if any(c.isspace() for c in token) or not token.isprintable():
        raise SecretFileError(f"auth token file {path} must hold one token without spaces or control characters", path)
    if st.st_mode & (stat.S_IRGRP | stat.S_IROTH):
        log.warning(
            "auth token file %s is readable by other users (mode %03o); run: chmod 600 %s",
            path,
            stat.S_IMODE(st.st_mode),
            path,
        )
    if len(token) < 16:
        log.warning("auth token in %s has only %d characters; use at least 16 random ones", path, len(token))
    return token


def read_pem(path: Path, what: str) -> bytes:
    """The bytes of a PEM file (certificate, key or CA bundle); `what` names it in errors."""
    data, _ = _read_bounded(path, _MAX_PEM_BYTES, what)
    if len(data) > _MAX_PEM_BYTES or b"-----BEGIN " not in data:
        raise SecretFileError(f"{what} {path} is not a PEM file", path)
    return data
