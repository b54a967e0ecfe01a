"""Learned acceptance rates: P(a drafted node is accepted), per cell, from every verdict.

The drafter's ``fill="expected"`` (oilbird.drafter.fill_by_value) adds the candidate node worth
most next; a node's worth is the product, along its path, of the acceptance rate of each node's
cell: (which source proposed it, or, when several did, "multi+semantic" if the semantic key is
among them and "multi" if not; depth, capped; whether a drafted token was accepted in the
previous cycle; optionally the proposer's score bin, the bin of the node's context agreement
(:attr:`DraftTree.match`), and whether its parent has the same proposer class: a chain that
continues, or one that branches off where other sources agreed). Rates are counted online with
a Beta(1, 1) prior, so an unseen cell starts at 0.5. A node is *tested* when its parent was
accepted, and a *hit* when its token is the parent's argmax. What each split bought:
docs/results.md ("Context agreement").
"""
from __future__ import annotations

from collections import defaultdict

from .tree import DraftTree

MAX_DEPTH = 6       # depth cells beyond this share one rate
BASE = 3            # a cell's first fields, (proposer, depth, warm): the coarsest cell
BACKOFF = 4.0       # observations a split cell borrows from the cell it splits


class AcceptanceRates:
    """P(a drafted node is accepted), learned online per cell (see the module docstring).

    The drafter's ``fill="expected"`` mode asks it which candidate node to add next.
    """

    def __init__(self, max_depth: int = MAX_DEPTH, score_bins: tuple = (), match_bins: tuple = (),
                 runs: bool = False, retrievers=("semantic",)):
        """``retrievers``: the names of the retrieving sources (a
        :class:`~oilbird.sources.base.DraftSource` with ``retrieves``: its chains are store records
        found by the verifier's state, the semantic key): a node one of them proposes with others
        is "multi+semantic"."""
        self.max_depth = max_depth
        self.retrievers = frozenset(retrievers)
        self.runs = runs                        # split cells by whether the node continues its parent's run
        self.score_bins = score_bins            # split cells by the proposer's score (none: one cell)
        self.match_bins = match_bins            # split cells by the node's context agreement
        self.tested: dict[tuple, int] = defaultdict(int)
        self.hits: dict[tuple, int] = defaultdict(int)
        self.warm = False                       # did the previous cycle accept a drafted token?
        self._memo: dict[tuple, float] = {}     # rate per cell until the next observe()

    def proposer(self, sources) -> str:
        """A node's proposer class: the one source, or "multi+semantic" / "multi" when several
        proposed it (a retrieving source among them, :attr:`retrievers`, or not); "" for the root."""
        if len(sources) <= 1:
            return next(iter(sources), "")
        return "multi+semantic" if self.retrievers.intersection(sources) else "multi"

    def cell(self, sources, depth: int, score: float | None = None, match: int = 0, parent=None) -> tuple:
        """(proposer class; depth, capped; warm[; score bin][; context-agreement bin][; whether
        the parent's proposer class is the node's: a run that continues, or a branch])."""
        src = self.proposer(sources)
        c = (src, min(depth, self.max_depth), self.warm)
        if self.score_bins:
            c += (sum(score >= b for b in self.score_bins) if score is not None else -1,)
        if self.match_bins:
            c += (sum(match >= b for b in self.match_bins),)
        if self.runs:
            c += (parent is not None and self.proposer(parent) == src,)
        return c

    def node_cell(self, tree: DraftTree, i: int, depth: int) -> tuple:
        return self.cell(tree.sources[i], depth, max(tree.scores[i].values(), default=None), tree.match[i],
                         tree.sources[tree.parents[i]])

    def candidate_cell(self, tree: DraftTree, parent: int, cand) -> tuple:
        """The cell of a node the fill may add below ``parent``: ``cand`` has the node's ``token``,
        ``depth``, ``scores`` (each proposer's) and ``match`` (oilbird.drafter's candidate); once
        added, :meth:`node_cell` gives the same cell."""
        return self.cell(cand.scores.keys(), cand.depth, max(cand.scores.values()), cand.match, tree.sources[parent])

    def rate(self, cell: tuple) -> float:
        """The cell's rate, shrunk toward the coarser cell above it: the base cell (proposer,
        depth, warm) starts from Beta(1, 1); each split (score, agreement, run) borrows
        :data:`BACKOFF` observations at the rate of the cell it splits, so a split cell seen
        rarely (a short workload, a rare combination) says what its parent says."""
        r = self._memo.get(cell)
        if r is None:       # the fill asks once per offered candidate: many share a cell
            r = (self.hits.get(cell[:BASE], 0) + 1) / (self.tested.get(cell[:BASE], 0) + 2)
            for n in range(BASE + 1, len(cell) + 1):
                r = (self.hits.get(cell[:n], 0) + BACKOFF * r) / (self.tested.get(cell[:n], 0) + BACKOFF)
            self._memo[cell] = r
        return r

    def path_probs(self, tree: DraftTree) -> list[float]:
        """P(node i is accepted) for every node (the root: 1)."""
        depths = tree.depths()
        p = [1.0] * len(tree)
        for i in range(1, len(tree)):
            p[i] = p[tree.parents[i]] * self.rate(self.node_cell(tree, i, depths[i]))
        return p

    def observe(self, drafted: DraftTree, accepted: list[int], argmax) -> None:
        """Count every node whose parent was accepted (tested), and whether its token is the
        parent's argmax (hit). ``argmax`` covers at least the verified nodes. A parent whose
        argmax is negative is the recording's last token in replay (its end of turn:
        :func:`oilbird.decoding.recorded_targets`): its children count as misses, as live
        decoding counts the children of its end-of-sequence token, since a token drafted past
        the end is never committed (not counting them was tried: the first 20 conversations'
        `oilbird` fell from 3.102 to 3.097, and on all 100 the ratio to `goose` from 1.202 to
        1.1995)."""
        self._memo.clear()
        acc = set(accepted)
        depths = drafted.depths()
        warm = False
        for i in range(1, len(drafted)):
            p = drafted.parents[i]
            if p in acc:
                hit = drafted.tokens[i] == int(argmax[p])
                cell = self.node_cell(drafted, i, depths[i])
                for n in range(BASE, len(cell) + 1):      # the cell and every coarser one above it
                    self.tested[cell[:n]] += 1
                    self.hits[cell[:n]] += hit
                warm = warm or (hit and p == 0)
        self.warm = warm
