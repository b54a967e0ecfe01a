"""Tau ratios between methods of one replay, pooled and per conversation.

    python scripts/per_conversation.py runs/tau100-b24/results.json oilbird goose oilbird oilbird-no-semantic
    python scripts/per_conversation.py runs/a/results.json,runs/b/results.json oilbird goose
    python scripts/per_conversation.py --blocks 20 runs/tau100/results.json oilbird oilbird-no-semantic

Reads ``results.json`` of ``python -m oilbird replay`` (several, comma-separated, when the methods
were replayed in separate runs of the same data) (its ``per_request`` rows: tokens and
forwards of every turn, keyed ``CONVERSATION#TURN``) and prints, for each pair A B, tau A / tau B
pooled over the run and on how many conversations A's tau (its turns' tokens over forwards) is
higher and lower than B's: the "(higher / lower of 100)" columns of docs/results.md.

``--blocks N`` also prints the pooled ratio over each block of N conversations in the order they
were replayed: the store grows as a replay goes on, so a ratio that rises from block to block is a
source that buys more the more traffic it has seen.
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


def pooled_blocks(a_rows: list[dict], b_rows: list[dict], size: int) -> list[tuple[int, int, float]]:
    """Tau A / tau B pooled over each block of ``size`` conversations, in the order A's turns were
    replayed: (first, last conversation number from 1, ratio)."""
    def sums(rows):
        out: dict[str, list[int]] = {}
        for r in rows:
            t = out.setdefault(r["request"].rsplit("#", 1)[0], [0, 0])
            t[0] += r["tokens"]
            t[1] += r["forwards"]
        return out
    A, B = sums(a_rows), sums(b_rows)
    order = [c for c in A if c in B]
    blocks = []
    for i in range(0, len(order), size):
        part = order[i:i + size]
        ta = sum(A[c][0] for c in part) / max(1, sum(A[c][1] for c in part))
        tb = sum(B[c][0] for c in part) / max(1, sum(B[c][1] for c in part))
        blocks.append((i + 1, i + len(part), ta / tb if tb else float("nan")))
    return blocks


def main(argv: list[str]) -> int:
    size = None
    if argv[:1] == ["--blocks"] and len(argv) > 1:
        if not argv[1].isdigit() or int(argv[1]) < 1:
            print(f"--blocks takes a whole number >= 1, not {argv[1]!r}", file=sys.stderr)
            return 2
        size, argv = int(argv[1]), argv[2:]
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
        if size:
            print("  by replay order: " + ", ".join(
                f"{first}-{last} {r:.3f}x" for first, last, r in
                pooled_blocks(methods[a]["per_request"], methods[b]["per_request"], size)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
