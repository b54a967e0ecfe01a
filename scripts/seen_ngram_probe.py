"""Probe: the fill's acceptance cells split by whether a node's n-gram (its token and the n-1
before it on its path, into the context above the root) already occurs in the request's context
(docs/results.md, "An n-gram seen in the context as a cell"; not kept: it lost).

    python scripts/seen_ngram_probe.py --n 2 replay --data agent-transcripts --limit 20 \\
        --methods oilbird,oilbird-no-semantic --cache runs/tcache --out runs/seen2 --force

The thought: a neighbour from another conversation copies its own values (an airport, a
reservation id); where the value's n-gram occurs in this conversation (the user said it, a tool
returned it) the copy is more likely right, where it does not it is more likely another
conversation's value. Structural tokens occur everywhere, so the split is about the values.
Everything after ``--n N`` is ``python -m oilbird``'s command line. For that run every cell of
the ``expected`` fill (:meth:`AcceptanceRates.candidate_cell`, :meth:`AcceptanceRates.node_cell`)
gets one more field, that flag; the n-grams are those of the context the drafter was given for
the cycle, kept incrementally. Nothing of the library changes on disk.
"""
from __future__ import annotations

import runpy
import sys
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


def install(n: int) -> None:
    """Patch the acceptance cells (one more field, the flag) and :meth:`Drafter.draft` (it hands
    its rates the cycle's context) in this process."""
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

    def drafting(self, context, request_id, query_state):
        if self.rates is not None:
            grams(self.rates).update(context)
        return draft(self, context, request_id, query_state)

    rates_cls.candidate_cell, rates_cls.node_cell, drafter.Drafter.draft = cand, node, drafting


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] != "--n":
        raise SystemExit("usage: seen_ngram_probe.py --n N <python -m oilbird arguments>")
    install(int(argv[1]))
    sys.argv = ["oilbird"] + argv[2:]
    runpy.run_module("oilbird", run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
