"""Probe: the fill's acceptance cells split by whether a node's n-gram (its token and the n-1
before it on its path, into the context above the root) already occurs in the request's context
(docs/results.md, "An n-gram seen in the context as a cell": nothing at 12 nodes, +0.7-0.8% at 24
on the whole set; not the default yet).

    python scripts/seen_ngram_probe.py --n 2 replay --data agent-transcripts --limit 20 \\
        --methods oilbird,oilbird-no-semantic --cache runs/tcache --out runs/seen2 --force

The thought: a neighbour from another conversation copies its own values (an airport, a
reservation id); where the value's n-gram occurs in this conversation (the user said it, a tool
returned it) the copy is more likely right, where it does not it is more likely another
conversation's value. Structural tokens occur everywhere, so the split is about the values.
Everything after ``--n N`` (and ``--stats``) is ``python -m oilbird``'s command line. For that run every cell of
the ``expected`` fill (:meth:`AcceptanceRates.candidate_cell`, :meth:`AcceptanceRates.node_cell`)
gets one more field, that flag; the n-grams are those of the context the drafter was given for
the cycle, kept incrementally. Nothing of the library changes on disk. ``--stats`` prints, at
the end, how often the nodes of each (proposer, depth up to 3, agreement bin) were accepted with
the flag and without it: whether it separates at all.
"""
from __future__ import annotations

import atexit
import runpy
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class ContextGrams:
    """The n-grams of one growing context, kept incrementally (started afresh when the context
    is not the last one extended: another request, or a window that moved)."""

    def __init__(self, n: int):
        if n < 1:
            raise ValueError(f"n is at least 1, not {n}")
        self.n = n
        self.grams: set[tuple[int, ...]] = set()
        self.context: list[int] = []

    def update(self, context: list[int]) -> None:
        n, old = self.n, len(self.context)
        if context[:old] != self.context:
            self.grams, old = set(), 0
        for j in range(max(old - n + 1, 0), len(context) - n + 1):
            self.grams.add(tuple(context[j:j + n]))
        self.context = list(context)

    def seen(self, tree, parent: int, token: int) -> bool:
        """Does the n-gram ending at ``token`` below tree node ``parent`` occur in the context?
        The path above the node runs through the root (the context's last token) into the context."""
        tail, node = [token], parent
        while len(tail) < self.n and node > 0:
            tail.append(tree.tokens[node])
            node = tree.parents[node]
        k = self.n - len(tail)
        if k:
            if k > len(self.context):
                return False
            tail += self.context[len(self.context) - k:][::-1]
        return tuple(reversed(tail)) in self.grams


def by_flag(rates, min_tested: int = 200) -> list[tuple]:
    """From learned rates whose cells end with the flag: (proposer, depth capped at 3, agreement
    bin, flag, tested, accepted share) for every group tested at least ``min_tested`` times."""
    full = 3 + bool(rates.score_bins) + bool(rates.match_bins) + bool(rates.runs) + 1
    groups = defaultdict(lambda: [0, 0])
    for cell, tested in rates.tested.items():
        if len(cell) == full:       # the finest cells only (the coarser ones count the same nodes again)
            agree = cell[3 + bool(rates.score_bins)] if rates.match_bins else None     # (after the score bin)
            g = groups[(cell[0], min(cell[1], 3), agree, cell[-1])]
            g[0] += tested
            g[1] += rates.hits[cell]
    return [(*k, t, h / t) for k, (t, h) in sorted(groups.items(), key=str) if t >= min_tested]


def install(n: int, stats: bool = False) -> None:
    """Patch the acceptance cells (one more field, the flag) and :meth:`Drafter.draft` (it hands
    its rates the cycle's context) in this process; ``stats``: print :func:`by_flag` of every
    drafter's rates at exit."""
    from oilbird import acceptance, drafter
    rates_cls, draft = acceptance.AcceptanceRates, drafter.Drafter.draft
    candidate_cell, node_cell = rates_cls.candidate_cell, rates_cls.node_cell

    def grams(rates) -> ContextGrams:
        if not hasattr(rates, "_probe_grams"):
            rates._probe_grams = ContextGrams(n)
        return rates._probe_grams

    def cand(self, tree, parent, c):
        return candidate_cell(self, tree, parent, c) + (grams(self).seen(tree, parent, c.token),)

    def node(self, tree, i, depth):
        return node_cell(self, tree, i, depth) + (grams(self).seen(tree, tree.parents[i], tree.tokens[i]),)

    seen_rates = []

    def drafting(self, context, request_id, query_state):
        if self.rates is not None:
            grams(self.rates).update(context)
            if stats and not any(r is self.rates for r in seen_rates):
                seen_rates.append(self.rates)
        return draft(self, context, request_id, query_state)

    def report():
        for rates in seen_rates:
            print("proposer | depth | agreement bin | n-gram seen | tested | accepted")
            for row in by_flag(rates):
                print(" | ".join(map(str, row[:-1])) + f" | {row[-1]:.3f}")
    if stats:
        atexit.register(report)

    rates_cls.candidate_cell, rates_cls.node_cell, drafter.Drafter.draft = cand, node, drafting


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] != "--n":
        raise SystemExit("usage: seen_ngram_probe.py --n N [--stats] <python -m oilbird arguments>")
    stats = argv[2:3] == ["--stats"]
    install(int(argv[1]), stats)
    sys.argv = ["oilbird"] + argv[2 + stats:]
    runpy.run_module("oilbird", run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
