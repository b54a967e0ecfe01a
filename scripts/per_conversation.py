"""Tau ratios between methods of one replay, pooled and per conversation.

    python scripts/per_conversation.py runs/tau100-b24/results.json oilbird goose oilbird oilbird-no-semantic
    python scripts/per_conversation.py runs/a/results.json,runs/b/results.json oilbird goose

Reads ``results.json`` of ``python -m oilbird replay`` (several, comma-separated, when the methods
were replayed in separate runs of the same data) (its ``per_request`` rows: tokens and
forwards of every turn, keyed ``CONVERSATION#TURN``) and prints, for each pair A B, tau A / tau B
pooled over the run and on how many conversations A's tau (its turns' tokens over forwards) is
higher and lower than B's: the "(higher / lower of 100)" columns of docs/results.md.
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict


def per_conversation(rows: list[dict]) -> dict[str, float]:
    tokens, forwards = defaultdict(int), defaultdict(int)
    for r in rows:
        conv = r["request"].rsplit("#", 1)[0]
        tokens[conv] += r["tokens"]
        forwards[conv] += r["forwards"]
    return {c: tokens[c] / forwards[c] for c in tokens if forwards[c]}


def main(argv: list[str]) -> int:
    if len(argv) < 3 or len(argv) % 2 == 0:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    methods = {}
    for path in argv[0].split(","):
        methods.update(json.load(open(path))["methods"])
    for a, b in zip(argv[1::2], argv[2::2]):
        missing = [m for m in (a, b) if m not in methods]
        if missing:
            print(f"{argv[0]} has no method {missing[0]!r}; it has {', '.join(methods)}", file=sys.stderr)
            return 2
        A, B = per_conversation(methods[a]["per_request"]), per_conversation(methods[b]["per_request"])
        hi = sum(A[c] > B[c] for c in A if c in B)
        lo = sum(A[c] < B[c] for c in A if c in B)
        ta, tb = methods[a]["tau"], methods[b]["tau"]
        print(f"{a} / {b}: {ta:.3f} / {tb:.3f} = {ta / tb:.3f}x; higher on {hi}, lower on {lo} "
              f"of {len(A)} conversations")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
