"""Reading JSON and JSON-lines files: the one door every loader of the project goes through.

:func:`read_text` turns a path into text, :func:`loads` turns text into a JSON value, and
:func:`json_lines` / :func:`read_json` put the two together. For any bytes at all they return
a value or raise one error of the class the caller names (a subclass of
:class:`~oilbird.errors.InputError`) that says which file and, where there is one, which line:

* a missing path, a folder, an unreadable file, a damaged or truncated ``.gz``;
* more than :data:`MAX_BYTES` of text (a gzip bomb included), bytes that are not UTF-8;
* invalid JSON, ``NaN`` / ``Infinity``, an integer beyond 64 bits (Python would take 4,300
  digits and then refuse), a float that overflows to infinity, nesting deeper than Python's
  parser can go, a string holding a lone UTF-16 surrogate (``"\\ud800"``: valid JSON, but no
  text any encoder or tokenizer takes);
* in a whole document (:func:`read_json`), an object that gives one key twice.

It knows nothing about what the values mean: each loader checks its own fields
(:mod:`oilbird.data.requests`, :mod:`oilbird.trace`, :mod:`oilbird.evaluation.report`, :mod:`oilbird.store_files`).
Files ending in ``.gz`` are decompressed; a UTF-8 byte-order mark is dropped.
"""
from __future__ import annotations

import gzip
import json
import re
import zlib
from pathlib import Path
from typing import Iterator

from .errors import InputError

MAX_BYTES = 1 << 31          # 2 GiB of text, after decompression
INT_LIMIT = 1 << 63          # integers must lie in [-2**63, 2**63)

# a run of 19+ digits or a 3-digit exponent: only then does a text need the strict decoder
_SUSPECT = re.compile(r"\d{19}|[eE][+-]?\d{3}")


class _BadNumber(ValueError):
    """A number the project refuses; ``literal`` is its text (to find its line)."""

    def __init__(self, reason: str, literal: str):
        super().__init__(reason)
        self.literal = literal


def _no_constant(name: str):
    raise _BadNumber(f"{name} is not a number this project reads (JSON has no NaN or Infinity)", name)


def _int64(text: str) -> int:
    if len(text.lstrip("-")) > 19 or not -INT_LIMIT <= int(text) < INT_LIMIT:
        raise _BadNumber(f"an integer of {len(text.lstrip('-'))} digits (beyond 64 bits)", text)
    return int(text)


def _finite(text: str) -> float:
    v = float(text)
    if v in (float("inf"), float("-inf")):
        raise _BadNumber(f"the number {text[:40]} overflows a float", text)
    return v


class _KeyTwice(ValueError):
    """An object gives one key twice (the decoder cannot say where: the message names the key)."""


def _unique(pairs: list[tuple[str, object]]) -> dict:
    obj = dict(pairs)
    if len(obj) < len(pairs):
        twice = next(k for i, (k, _) in enumerate(pairs) if any(k == j for j, _ in pairs[:i]))
        keys = list(dict.fromkeys(k for k, _ in pairs))
        raise _KeyTwice(f"the key {twice!r} appears twice in one object (JSON readers keep the last one "
                        f"silently; the object's keys: {', '.join(keys[:8])}{', ...' if len(keys) > 8 else ''}): "
                        "say which is meant")
    return obj


_FAST = json.JSONDecoder(parse_constant=_no_constant)
_STRICT = json.JSONDecoder(parse_constant=_no_constant, parse_int=_int64, parse_float=_finite)
# whole documents (a results.json, a data file) also refuse a key given twice; JSON lines, read
# in bulk (traces), do not pay for the check
_FAST_ONCE = json.JSONDecoder(parse_constant=_no_constant, object_pairs_hook=_unique)
_STRICT_ONCE = json.JSONDecoder(parse_constant=_no_constant, parse_int=_int64, parse_float=_finite,
                                object_pairs_hook=_unique)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, max(pos, 0)) + 1


def _read_gzip(f, limit: int) -> tuple[bytes, Exception | None]:
    """Up to ``limit`` + 1 decompressed bytes of the gzip file ``f``, and the error that stopped
    it early (damage or truncation; None if none did), keeping everything decompressed before it:
    each ``read1`` decompresses what one buffer of input holds, so only the damaged part is lost."""
    data = bytearray()
    try:
        while len(data) <= limit:
            b = f.read1(1 << 16)
            if not b:
                break
            data += b
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        return bytes(data), exc
    return bytes(data), None


def _size(n: int) -> str:
    """``n`` bytes in the largest binary unit that divides it (GiB, MiB, KiB), else bytes."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def read_text(path, error: type[InputError] = InputError, per_line: bool = False, limit: int = MAX_BYTES) -> str:
    """The text of ``path`` (decompressed if it ends in ``.gz``), checked as above; ``limit``: the
    most bytes of text taken (default :data:`MAX_BYTES`; past it, refused unread). ``per_line``:
    bytes that are not UTF-8 are kept as lone surrogates (``surrogateescape``) for a line-by-line
    reader to refuse by line (:func:`undecodable`), instead of refusing the whole file; and a
    damaged or truncated ``.gz`` is refused at the line where it breaks, the error carrying the
    whole lines before it as ``partial`` (a reader may keep them: ``replay --skip-bad``)."""
    p = Path(path)
    cut = None
    try:
        if not p.exists():
            raise error("no such file", p)
        if not p.is_file():
            raise error("not a file (a folder?)", p)
        if p.suffix == ".gz":
            with gzip.open(p, "rb") as f:
                data, cut = _read_gzip(f, limit)
        else:
            if p.stat().st_size > limit:
                raise error(f"more than {_size(limit)} of text: split it", p)
            with open(p, "rb") as f:
                data = f.read(limit + 1)
    except InputError:
        raise
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise error(f"damaged or truncated gzip file ({exc})", p) from None
    except OSError as exc:                  # the message without the path again
        raise error(f"cannot read ({exc.strerror or type(exc).__name__})", p) from None
    if len(data) > limit:
        raise error(f"more than {_size(limit)} of text: split it", p)
    if cut is not None:
        whole = data[:data.rfind(b"\n") + 1]         # the line it breaks in is lost with the rest
        n = whole.count(b"\n")
        if not per_line or not n:
            raise error(f"damaged or truncated gzip file ({cut})", p)
        exc = error(f"damaged or truncated gzip file ({cut}): it breaks after line {n}; what followed is lost", p,
                    n + 1)
        exc.partial = whole.decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
        raise exc
    if p.suffix != ".gz" and data[:2] == b"\x1f\x8b":     # gzip's magic: readers go by the name
        raise error("gzip-compressed, but the name does not end in .gz: rename it (or gunzip it)", p)
    try:
        text = data.decode("utf-8", errors="surrogateescape" if per_line else "strict")
    except UnicodeDecodeError as exc:
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise error(f"not UTF-8 text (byte {column} of the line cannot be decoded)", p,
                    data.count(b"\n", 0, exc.start) + 1) from None
    return text.removeprefix("\ufeff")


_ESCAPED = re.compile("[\udc80-\udcff]")       # what surrogateescape makes of a byte that is not UTF-8


def not_text(s: str) -> bool:
    """Does ``s`` hold a surrogate code point (a byte that was not UTF-8, kept by Python's
    ``surrogateescape`` as one: a command-line argument, a file name; or a lone ``\\ud800``)?
    Such a string is no text: it cannot be encoded, tokenized or written back."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def undecodable(line: str) -> bool:
    """Does a line of :func:`read_text` ``(per_line=True)`` hold bytes that are not UTF-8?"""
    return _ESCAPED.search(line) is not None


# a JSON string's escapes that matter here, read left to right as the decoder reads them: an
# escaped backslash (after one, "ud800" is text) and a \\u escape of a UTF-16 surrogate, high
# (d800-dbff) or low (dc00-dfff)
_ESCAPES = re.compile(r"\\\\|\\u([dD][89abAB]|[dD][c-fC-F])[0-9a-fA-F]{2}")


def _lone_surrogate(text: str) -> re.Match | None:
    """The first \\u escape of ``text`` (valid JSON) that leaves a lone surrogate: a high one not
    followed at once by a low one, or a low one not right after a high one. A pair is one astral
    character; a lone one decodes to a string that is no text (no encoder or tokenizer takes it)."""
    high = None                         # a high surrogate's escape waiting for its low one
    for m in _ESCAPES.finditer(text):
        kind = m.group(1)
        if kind is None:                # an escaped backslash
            if high is not None:
                return high
            continue
        is_high = kind[1] in "89abAB"
        if high is not None and (is_high or m.start() != high.end()):
            return high
        if is_high:
            high = m
        elif high is None:
            return m
        else:
            high = None
    return high


def loads(text: str, error: type[InputError] = InputError, path=None, line: int | None = None,
          keys_once: bool = False):
    """One JSON value from ``text``; ``line`` is the line ``text`` starts on in ``path``
    (a JSON-lines line), or None for a whole document (the line is then found in it).
    ``keys_once``: an object that gives one key twice is refused too."""
    first = line or 1
    strict = _SUSPECT.search(text)
    try:
        value = ((_STRICT_ONCE if strict else _FAST_ONCE) if keys_once else (_STRICT if strict else _FAST)).decode(text)
    except json.JSONDecodeError as exc:
        # ("Unterminated string starting at" ends where its position is given: a colon, not a comma)
        raise error(f"not valid JSON ({exc.msg}: column {exc.colno})", path, first + exc.lineno - 1) from None
    except _BadNumber as exc:
        at = text.find(exc.literal)
        raise error(str(exc), path, first + _line_of(text, at) - 1 if at >= 0 else line) from None
    except _KeyTwice as exc:
        raise error(str(exc), path, line) from None
    except RecursionError:
        raise error("nested too deeply to read", path, line) from None
    except ValueError as exc:               # anything else the decoder refuses about a number
        raise error(f"not readable as JSON ({exc})", path, line) from None
    lone = _lone_surrogate(text) if "\\ud" in text or "\\uD" in text else None   # (a fast look first)
    if lone:
        raise error(f"a string holds a lone UTF-16 surrogate ({lone.group()}), which is not text", path,
                    first + _line_of(text, lone.start()) - 1)
    return value


def json_lines(text: str, error: type[InputError] = InputError, path=None) -> Iterator[tuple[int, object]]:
    """``(line number, value)`` for every non-blank line of a JSON-lines text. Lines are split
    on ``\\n`` only: U+2028 or U+0085 inside a JSON string does not end a line."""
    first = True
    for no, line in enumerate(text.split("\n"), start=1):
        if line.strip(" \t\r"):
            try:
                value = loads(line, error, path, no)
            except InputError:
                if first and one_document(text):
                    raise error(NOT_JSON_LINES, path) from None
                raise
            first = False
            yield no, value


NOT_JSON_LINES = "one JSON document over several lines (a results.json?), not JSON lines: one record per line"


def one_document(text: str) -> bool:
    """Is ``text`` one indented JSON document (what a JSON-lines reader's first line fails on)?"""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return "\n" in text.strip()


def read_json(path, error: type[InputError] = InputError):
    """The one JSON document in ``path``."""
    text = read_text(path, error)
    if not text.strip(" \t\r\n"):
        raise error("empty file", path)
    return loads(text, error, path, keys_once=True)

