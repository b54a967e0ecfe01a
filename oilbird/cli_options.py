"""The options several ``python -m oilbird`` commands share (argparse types and groups), and the
default ``--out`` of a run: used by :mod:`oilbird.__main__` and :mod:`oilbird.serving.cli`."""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from .data.requests import NAMED_SETS
from .errors import repeated
from .jsonio import not_text


def at_least(low: int):
    """An argparse type: an int >= ``low`` (argparse prints the message as one error line)."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, not {v}")
        return v
    return parse


def list_of(item):
    """An argparse type: comma-separated values, each parsed by the argparse type ``item``
    (e.g. ``list_of(at_least(1))`` for ``--batch-sizes 1,8``); at least one."""
    def parse(text: str) -> list:
        parts = [t.strip() for t in text.split(",") if t.strip()]
        if not parts:
            raise argparse.ArgumentTypeError("name at least one value")
        values = [item(t) for t in parts]
        twice = repeated(values)
        if twice is not None:
            raise argparse.ArgumentTypeError(f"'{twice}' is named twice; name each once")
        return values
    return parse


def out_path(text: str) -> str:
    """An argparse type for ``--out``: a path, not an empty string (which would mean the current
    folder, or the default one, without saying so)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a folder or file to write (or leave --out out)")
    return text


def data_arg(text: str) -> str:
    """An argparse type for ``--data``: a set's name or a path, not an empty string (which
    would read the current folder without saying so)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: name a data set or give a file or folder to read")
    if not_text(text):      # a name in bytes that are not UTF-8: results and traces record it as text
        raise argparse.ArgumentTypeError("names a path in bytes that are not UTF-8: rename it")
    return text


def non_negative(text: str) -> float:
    """An argparse type: a finite number >= 0 (argparse prints the message as one error line)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, not {text}")
    return v


def common_options(p: argparse.ArgumentParser, default_max: int | None = 128, state_layer: bool = True,
            max_help: str | None = None, default_limit: int | None = None) -> None:
    p.add_argument("--data", type=data_arg, default="builtin",
                   help="builtin | api-bank | humaneval | gsm8k | mt-bench | PATH")
    p.add_argument("--limit", type=at_least(1), default=default_limit, help="serve only the first N requests"
                   + (f" (default {default_limit})" if default_limit else ""))
    p.add_argument("--skip", type=at_least(0), default=0,
                   help="leave out the first N requests (then --limit), e.g. to check a setting on "
                        "requests it was not tuned on")
    p.add_argument("--max-new-tokens", type=at_least(1), default=default_max,
                   help=max_help or f"new tokens per request at most (default {default_max})")
    model_options(p, state_layer)


def model_options(p: argparse.ArgumentParser, state_layer: bool = True) -> None:
    p.add_argument("--model", default=None, help="local HF model dir or .gguf file (default: SmolLM2-135M-Instruct)")
    if state_layer:     # serve-bench's proposer takes its layer from --oilbird-config's "state_layer"
        p.add_argument("--state-layer", type=at_least(0), default=None,
                       help="the hidden-state layer the semantic key reads: 0 = embeddings, L = the last "
                            "layer (default round(0.85 * L), the paper's)")


def force_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="replace the results an earlier run left at --out")


def fresh_out(command: str, data: str) -> str:
    """The default ``--out`` of bench, diagnose, replay and serve-bench: a new folder per run,
    ``runs/COMMAND-DATA-YYYYmmdd-HHMMSS-PID``, so that running twice (even two runs started in
    the same second) never replaces a result."""
    import os
    import time
    name = Path(str(data)).stem if str(data) not in NAMED_SETS else str(data)
    return f"runs/{command}-{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
