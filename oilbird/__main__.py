"""Command line: ``python -m oilbird {bench,trace,decode,diagnose} ...``.

    python -m oilbird decode "List three colours."                 # one prompt, oilbird vs greedy
    python -m oilbird bench --data builtin --methods ar,hf-greedy,goose,oilbird --limit 8
    python -m oilbird trace --data builtin --methods goose,oilbird --out runs/builtin.jsonl
    python -m oilbird diagnose --data builtin --out runs/diag

Every subcommand works offline on the built-in workload; ``--data api-bank`` reads
``../shared/data/api-bank`` (or ``$OILBIRD_DATA/api-bank``), ``--data PATH`` a folder or a JSONL file.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .drafter import FILLS
from .model import ModelError
from .requests import NAMED_SETS, DataError
from .trace import TraceError


def _at_least(low: int):
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


def _common(p: argparse.ArgumentParser, default_max: int = 128) -> None:
    p.add_argument("--data", default="builtin", help="builtin | api-bank | humaneval | gsm8k | mt-bench | PATH")
    p.add_argument("--limit", type=_at_least(1), default=None, help="serve only the first N requests")
    p.add_argument("--skip", type=_at_least(0), default=0,
                   help="leave out the first N requests (then --limit), e.g. to check a setting on "
                        "requests it was not tuned on")
    p.add_argument("--max-new-tokens", type=_at_least(1), default=default_max)
    p.add_argument("--model", default=None, help="local HF model dir or .gguf file (default: SmolLM2-135M-Instruct)")


def _force(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="replace the results an earlier run left at --out")


def fresh_out(command: str, data: str) -> str:
    """The default ``--out`` of bench and diagnose: a new folder per run,
    ``runs/COMMAND-DATA-YYYYmmdd-HHMMSS-PID``, so that running twice (even two runs started in
    the same second) never replaces a result."""
    import os
    import time
    name = Path(str(data)).stem if str(data) not in NAMED_SETS else str(data)
    return f"runs/{command}-{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def check_out(out: str, force: bool, writes: tuple[str, ...] = ()) -> None:
    """Refuse an ``--out`` that would lose what is stored there, before any model loads.

    ``writes``: the files the command writes inside the folder ``out``; empty when ``out`` is
    itself the one file it writes. A folder where a file is expected (or the reverse) is
    refused always; earlier results only without ``--force``."""
    p = Path(out)
    if writes:
        if p.exists() and not p.is_dir():
            raise ValueError(f"--out {out} is a file; this command writes a folder ({', '.join(writes)})")
        held = [f for f in writes if (p / f).exists()]
    else:
        if p.is_dir():
            raise ValueError(f"--out {out} is a folder; this command writes one file, e.g. runs/traces.jsonl")
        held = [p.name] if p.exists() else []
    if held and not force:
        where = f"{out} already holds {', '.join(held)}" if writes else f"{out} already exists"
        raise ValueError(f"--out {where} (an earlier run's): pass --force to replace it, or choose another --out")


def _tree_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget", type=_at_least(1), default=None,
                   help="tree nodes per cycle, root included (default 12)")
    p.add_argument("--semantic-budget", type=_at_least(0), default=None,
                   help="nodes reserved for semantic chains, below --budget (default 2)")
    p.add_argument("--tree-size", choices=("fixed", "cost-aware"), default=None,
                   help="verify the whole tree (fixed, the default) or only the prefix whose expected "
                        "tokens pay for its verify cost (cost-aware; see oilbird/sizing.py)")
    p.add_argument("--fill", choices=FILLS, default=None,
                   help="semantic chains out of --semantic-budget, then adjacency branches (reserved, "
                        "the default), or both competing node by node by estimated acceptance "
                        "(expected; see oilbird/drafter.py)")


def _decode(args) -> int:
    from .audit import audit
    from .model import load_model
    from .presets import make_decoder, parse_preset
    from .requests import PromptError, Request, encode
    from .verifier import Verifier
    parse_preset(args.method)                            # checked before the model loads
    if not args.prompt.strip():
        raise PromptError("the prompt is empty: give some text to answer.")
    lm = load_model(args.model)
    req = Request("prompt", [{"role": "user", "content": args.prompt}])
    ids = encode(lm.tokenizer, req)
    dec = make_decoder(args.method, Verifier(lm))
    tr = dec.run("prompt", ids, args.max_new_tokens)
    print(lm.tokenizer.decode(tr.output_ids))
    res = audit(lm, ids, tr.output_ids, args.max_new_tokens)
    print(f"\n[{args.method}] {len(tr.output_ids)} tokens in {tr.forwards} forwards "
          f"(tau {tr.tau:.2f}); {res.message()}", file=sys.stderr)
    return 0 if res.lossless else 1


def _trace(args) -> int:
    from .bench import parse_methods, run_bench, tree_config
    from .model import load_model
    from .requests import load_requests
    from .verifier import Verifier
    methods = parse_methods(args.methods, traced=True)
    tree = tree_config(args)
    check_out(args.out, args.force)
    requests = load_requests(args.data, limit=args.limit, skip=args.skip)
    lm = load_model(args.model)
    res = run_bench(requests, methods, Verifier(lm), args.max_new_tokens, trace_out=args.out, tree=tree)
    for m, r in res["methods"].items():
        print(f"{m}: tau {r['tau']:.2f}, lossless {r['lossless']}")
    if args.diagnose:
        from .diagnose import attach_labels
        attach_labels(args.out, requests, lm, max_new_tokens=args.max_new_tokens)
    print(f"wrote {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m oilbird", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("bench", help="serve requests through several methods; results.json")
    _common(p)
    p.add_argument("--methods", default="ar,hf-greedy",
                   help="comma-separated method names; a tree method may add tree variants after "
                        "colons: ':cost-aware' / ':fixed', ':expected' / ':reserved' "
                        "(e.g. oilbird,oilbird:cost-aware,oilbird:expected)")
    p.add_argument("--out", default=None, help="the folder to write (default: a new runs/bench-DATA-TIME-PID)")
    p.add_argument("--traces", action="store_true", help="also write traces.jsonl")
    _force(p)
    _tree_options(p)
    p.add_argument("--store-capacity", type=_at_least(1), default=None,
                   help="cap the cross-request store at N records (oldest requests evicted)")
    p.add_argument("--state-dtype", choices=("fp16", "int8", "pq"), default="fp16",
                   help="how the store keeps hidden states")
    p.add_argument("--store-index", choices=("flat", "ivf"), default="flat",
                   help="cosine index: exhaustive, or IVF (approximate; for >= 100k records)")

    p = sub.add_parser("trace", help="decode requests and save per-cycle traces (JSONL)")
    _common(p, default_max=64)
    p.add_argument("--methods", default="goose,oilbird",
                   help="comma-separated tree methods (presets or suffix-arctic), each with optional "
                        "tree variants after colons, e.g. goose,oilbird:expected")
    p.add_argument("--out", required=True, help="the JSONL file to write")
    p.add_argument("--diagnose", action="store_true", help="attach per-position gap labels")
    _force(p)
    _tree_options(p)

    p = sub.add_parser("decode", help="decode one prompt and audit it against greedy")
    p.add_argument("prompt")
    p.add_argument("--method", default="oilbird",
                   help="a preset (oilbird, goose, pld, suffix, ...; see oilbird/presets.py), optionally "
                        "with tree variants after colons, e.g. oilbird:expected")
    p.add_argument("--max-new-tokens", type=_at_least(1), default=64)
    p.add_argument("--model", default=None, help="local HF model dir or .gguf file (default: SmolLM2-135M-Instruct)")

    p = sub.add_parser("diagnose", help="the identifiability-gap diagnosis (paper section 3)")
    _common(p)
    p.add_argument("--out", default=None, help="the folder to write (default: a new runs/diagnose-DATA-TIME-PID)")
    _force(p)

    args = ap.parse_args(argv)
    try:
        if args.cmd == "bench":
            from .bench import main as bench_main
            args.out = args.out or fresh_out("bench", args.data)
            check_out(args.out, args.force, ("results.json", "traces.jsonl"))
            return bench_main(args)
        if args.cmd == "trace":
            return _trace(args)
        if args.cmd == "decode":
            return _decode(args)
        if args.cmd == "diagnose":
            from .diagnose import main as diagnose_main
            args.out = args.out or fresh_out("diagnose", args.data)
            check_out(args.out, args.force, ("diagnosis.json",))
            return diagnose_main(args)
    except (ModelError, DataError, TraceError, ValueError, ImportError) as exc:
        # ImportError: an optional peer (suffix-arctic) whose package is not installed
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
