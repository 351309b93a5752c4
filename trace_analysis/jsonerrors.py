"""What a JSON failure in a trace file means, in words a user can act on.

The parsers' own messages describe the text they were given, which is not always the file: the metadata around
``traceEvents`` is parsed without the array's elements (so orjson's "line 15 column 1 (char 434)" pointed nowhere
in a 300 KB file), and orjson reports invalid UTF-8 as "surrogates not allowed ... (char 0)". Here those cases
get the file's byte offset and the likely cause (a Latin-1 re-encoding, a UTF-16 export, a file compressed twice,
NUL padding left by a crash or an interrupted copy).
"""

from __future__ import annotations

__all__ = ["ScanError", "not_json_reason", "invalid_element_reason", "after_document_reason", "byte_of_char"]

_UTF16_32_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


class ScanError(ValueError):
    """The byte stream is not a well-formed Chrome trace (message says what is wrong)."""


def not_json_reason(head: bytes) -> str:
    """Why a file whose first non-blank bytes are ``head`` is not a JSON trace."""
    for bom, enc in _UTF16_32_BOMS:
        if head.startswith(bom):
            return (
                f"not JSON: {enc} text (byte-order mark {bom.hex(' ').upper()}); trace files are UTF-8: convert it "
                f"(iconv -f {enc} -t UTF-8)"
            )
    if head.startswith(b"\x1f\x8b"):
        return "not JSON: gzip data inside the gzip stream (compressed twice?): gunzip it once"
    return f"not JSON: starts with {head[:20]!r}"


def _bad_utf8(text: bytes, base: int | None) -> str | None:
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as u:
        at = f"byte {base + u.start} of the file" if base is not None else f"byte {u.start} of the element"
        return (
            f"not valid UTF-8: byte 0x{text[u.start]:02X} at {at}, in {text[max(0, u.start - 30) : u.start + 10]!r}"
            " (trace files are UTF-8; was this one re-encoded, e.g. as Latin-1?)"
        )
    return None


def byte_of_char(text: bytes, pos: int) -> int:
    """The byte offset in UTF-8 ``text`` of the character at index ``pos`` (where a parser's "char N" points)."""
    return len(text.decode("utf-8", "surrogateescape")[:pos].encode("utf-8", "surrogateescape"))


def invalid_element_reason(
    text: bytes | bytearray | memoryview, error: Exception, where: str, base: int | None = None
) -> str:
    """Why the traceEvents text ``text`` (one element or a batch of them, ``where`` says which) did not parse;
    ``base``: the file offset of ``text[0]``, when known: the message then gives the file offset of the error (the
    parser's own "line 1 column N (char N)" counts in ``text``, which is not the file)."""
    raw = bytes(text)
    bad = _bad_utf8(raw, base)
    if bad is None and base is not None and isinstance(error, ValueError) and hasattr(error, "pos"):
        at = base + byte_of_char(raw, int(error.pos))
        return f"invalid JSON in traceEvents (at byte {at} of the file): {getattr(error, 'msg', error)}"
    return f"invalid JSON in traceEvents ({where}): {bad or error}"


def after_document_reason(rest: bytes, offset: int) -> str:
    """Why text ``rest`` found after the end of the top-level JSON value, at byte ``offset`` of the file, is an
    error."""
    if not rest.strip(b"\x00"):
        return (
            f"{len(rest)} NUL bytes after the end of the JSON at byte {offset} (zero padding left by a crash or an "
            "interrupted copy?): remove them (e.g. tr -d '\\000')"
        )
    return f"invalid JSON outside traceEvents: unexpected content after the document at byte {offset}: {rest[:20]!r}"
