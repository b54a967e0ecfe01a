"""Tau ratios between methods of one replay, pooled and per conversation.

    python scripts/per_conversation.py runs/tau100-b24/results.json oilbird goose oilbird oilbird-no-semantic
    python scripts/per_conversation.py runs/a/results.json,runs/b/results.json oilbird goose
    python scripts/per_conversation.py runs/a/results.json,runs/b/results.json oilbird@2 goose   # oilbird of b
    python scripts/per_conversation.py --blocks 20 runs/tau100/results.json oilbird oilbird-no-semantic

Reads ``results.json`` of ``python -m oilbird replay`` (several, comma-separated, when the methods
were replayed in separate runs of the same data; ``NAME@K`` is the method of the K-th file, for a
name in several) (its ``per_request`` rows: tokens and
forwards of every turn, keyed ``CONVERSATION#TURN``) and prints, for each pair A B, tau A / tau B
pooled over the run and on how many conversations A's tau (its turns' tokens over forwards) is
higher and lower than B's: the "(higher / lower of 100)" columns of docs/results.md.

``--blocks N`` also prints the pooled ratio over each block of N conversations in the order they
were replayed, with its 95% interval over the block's conversations where it has at least ten
(:mod:`oilbird.evaluation.intervals`): the store grows as a replay goes on, so a ratio that rises
from block to block is a source that buys more the more traffic it has seen.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oilbird.evaluation.intervals import pooled_ratio, unit_of  # noqa: E402


def conversation_sums(rows: list[dict]) -> dict[str, list[int]]:
    """[tokens, forwards] of each conversation's turns, in the order they were replayed."""
    out: dict[str, list[int]] = {}
    for r in rows:
        t = out.setdefault(unit_of(r, replay=True), [0, 0])
        t[0] += r["tokens"]
        t[1] += r["forwards"]
    return out


def per_conversation(rows: list[dict]) -> dict[str, float]:
    return {c: t / f for c, (t, f) in conversation_sums(rows).items() if f}


def block_interval(a_rows: list[dict], b_rows: list[dict], first: int, last: int) -> str:
    """The 95% interval of tau A / tau B over the conversations ``first`` to ``last`` (from 1, in
    A's replay order), as " (low-high)", or "" where the block holds fewer than ten."""
    order = list(dict.fromkeys(unit_of(r, replay=True) for r in a_rows))
    block = set(order[first - 1:last])

    def rows(rs):
        return {"per_request": [r for r in rs if unit_of(r, replay=True) in block]}
    r = pooled_ratio({"replay": {"blocks": True}, "methods": {"a": rows(a_rows), "b": rows(b_rows)}}, "a", "b")
    return f" ({r['low']:.3f}-{r['high']:.3f})" if r and r["low"] is not None else ""


def pooled_blocks(a_rows: list[dict], b_rows: list[dict], size: int) -> list[tuple[int, int, float]]:
    """Tau A / tau B pooled over each block of ``size`` conversations, in the order A's turns were
    replayed: (first, last conversation number from 1, ratio)."""
    A, B = conversation_sums(a_rows), conversation_sums(b_rows)
    order = [c for c in A if c in B]
    blocks = []
    for i in range(0, len(order), size):
        part = order[i:i + size]
        ta = sum(A[c][0] for c in part) / max(1, sum(A[c][1] for c in part))
        tb = sum(B[c][0] for c in part) / max(1, sum(B[c][1] for c in part))
        blocks.append((i + 1, i + len(part), ta / tb if tb else float("nan")))
    return blocks


def load_methods(paths: list[str]) -> tuple[dict, str | None]:
    """Every method of the results files, and the reason they cannot be compared (None if they
    can): a run stopped early (``complete`` false), or runs of other data, tool-call form or node
    budget. A method in two files maps to None: asking for it is refused."""
    methods: dict = {}
    seen: dict = {}
    seen_files: list[str] = []
    for path in paths:
        doc = json.load(open(path))
        if doc.get("complete") is False:
            return {}, (f"{path}: the run stopped early ({doc.get('n_requests')} of {doc.get('n_requests_planned')} "
                        "turns): its tau is not the whole set's")
        # the node budget, not the whole tree: a reserve only changes the methods that draw on it
        facts = {"data": doc.get("data"), "tool_calls": doc.get("tool_calls"),
                 "node budget": (doc.get("tree") or {}).get("budget")}
        for key, value in facts.items():
            if value is not None:
                if key in seen and seen[key][1] != value:
                    return {}, f"{seen[key][0]} and {path} differ in {key}: their methods are not comparable"
                seen.setdefault(key, (path, value))
        for name, m in doc["methods"].items():
            # in two files: ambiguous, so asking for it is refused (main); NAME@K names file K's
            methods[name] = None if name in methods else m
            methods[f"{name}@{len(seen_files) + 1}"] = m
        seen_files.append(path)
    return methods, None


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
    methods, problem = load_methods(argv[0].split(","))
    if problem:
        print(problem, file=sys.stderr)
        return 2
    for a, b in zip(argv[1::2], argv[2::2]):
        missing = [m for m in (a, b) if m not in methods]
        if missing:
            print(f"{argv[0]} has no method {missing[0]!r}; it has "
                  f"{', '.join(n for n in methods if '@' not in n)}", file=sys.stderr)
            return 2
        twice = [m for m in (a, b) if methods[m] is None]
        if twice:
            print(f"method {twice[0]!r} is in more than one of {argv[0]}: name the file's, {twice[0]}@K for the "
                  "K-th file given", file=sys.stderr)
            return 2
        A, B = per_conversation(methods[a]["per_request"]), per_conversation(methods[b]["per_request"])
        if set(A) != set(B):
            print(f"{a} and {b} replayed different conversations ({len(A)} and {len(B)}): compare runs of the "
                  "same data", file=sys.stderr)
            return 2
        hi = sum(A[c] > B[c] for c in A)
        lo = sum(A[c] < B[c] for c in A)
        ta, tb = methods[a]["tau"], methods[b]["tau"]
        print(f"{a} / {b}: {ta:.3f} / {tb:.3f} = {ta / tb:.3f}x; higher on {hi}, lower on {lo} "
              f"of {len(A)} conversations" + (f" ({len(A) - hi - lo} equal)" if len(A) - hi - lo else ""))
        if size:
            ra, rb = methods[a]["per_request"], methods[b]["per_request"]
            print("  by replay order: " + ", ".join(
                f"{first}-{last} {r:.3f}x{block_interval(ra, rb, first, last)}"
                for first, last, r in pooled_blocks(ra, rb, size)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
