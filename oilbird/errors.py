"""The one base class of the project's input errors.

Every error that says "this input (a file, an option, a prompt) is wrong" derives from
:class:`InputError`: ``PromptError`` (here: the decoder refuses a prompt), ``DataError``
(:mod:`oilbird.data.requests`),
``TraceError`` (:mod:`oilbird.trace`), ``ResultsError`` (:mod:`oilbird.evaluation.report`), ``StoreError``
(:mod:`oilbird.store`). A command line prints one as one line and exits 2; an app shows it in
its banner. Anything else that escapes is a bug, not bad input.

Knows nothing about files or formats; :mod:`oilbird.jsonio` raises these for bytes that are
not what a loader expects. ``run_cli`` is how the command lines exit when their reader leaves
early (a pipe into ``head``).
"""
from __future__ import annotations

import os
import sys


class InputError(ValueError):
    """Bad input, said in one line: ``reason``, and where (``path``, 1-based ``line``; either
    may be None). ``str()`` is ``PATH:LINE: REASON`` (or ``PATH: REASON``, or ``REASON``), so
    a view that must not show a server path can rebuild the message from the parts.

    >>> str(InputError("not valid JSON", "runs/t.jsonl", 3))
    'runs/t.jsonl:3: not valid JSON'
    >>> InputError("--limit must be >= 1").path is None
    True
    """

    def __init__(self, reason: str, path=None, line: int | None = None):
        self.reason = str(reason)
        self.path = None if path is None else str(path)
        self.line = line
        super().__init__(self.where() + self.reason)

    def where(self) -> str:
        """``PATH:LINE: `` (or ``PATH: ``, or empty): the prefix of the message."""
        if self.path is None:
            return ""
        return f"{self.path}:{self.line}: " if self.line is not None else f"{self.path}: "

    def __reduce__(self):                   # picklable with its parts (multiprocessing, pytest-xdist)
        return (type(self), (self.reason, self.path, self.line))


class PromptError(InputError):
    """The prompt is empty or too long for the model."""


class ContextError(PromptError):
    """The prompt with ``max_new_tokens`` exceeds the model's context (a :class:`PromptError`:
    a caller may say which of its own settings to lower)."""


def repeated(items):
    """The first item named twice in ``items``, or None (for the one-line refusals of a list
    option or setting whose repeats would run, or count, twice).

    >>> repeated(["a", "b", "a"]), repeated([1, 2])
    ('a', None)
    """
    return next((x for i, x in enumerate(items) if x in items[:i]), None)


def shown(value, n: int = 60) -> str:
    """``repr(value)`` cut to ``n`` characters, for a message that echoes an input (a bad field
    or a pasted id can be megabytes long).

    >>> shown("x" * 100, 10)
    "'xxxxxx..."
    """
    text = repr(value)
    return text if len(text) <= n else text[:n - 3] + "..."


def run_cli(main_fn) -> int:
    """``main_fn()``, quiet when its reader leaves early (``python -m oilbird report ... | head``):
    the rest of the output goes nowhere instead of ending in a BrokenPipeError traceback."""
    try:
        code = main_fn()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # Python's own advice
        return 141                                   # 128 + SIGPIPE, as a shell pipe reports it
