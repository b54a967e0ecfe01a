"""Cost-aware tree size: verify only the part of the draft tree that pays for itself.

On a GPU one forward over 1 or 60 positions costs about the same, so a drafter fills its node
budget. On a CPU it does not: ``python -m oilbird.verify_cost`` measured SmolLM2-135M on 2
cores at 106 ms for a 1-node verify, 176 / 198 / 221 ms at 4 / 8 / 12 nodes. Most of that is the
step from one row to several (a GEMV becomes a GEMM in every linear layer), then ~5 ms a node.
A 12-node tree therefore loses time in every cycle where it commits fewer than ~2 tokens.

The drafter adds nodes in priority order (lexical spine, other lexical chains, semantic chains,
adjacency branches), and a node's parent is always added before it, so every prefix of that
order is itself a tree with the same node indices. :class:`TreeSizer` keeps the prefix of
``n`` nodes with the most expected tokens per unit of verify cost::

    n* = argmax_n  (1 + sum_{i < n} P(node i is accepted)) / c(n)        (node 0 = the root)

* ``P(node accepted)`` is the product, along the node's path, of the acceptance rate of each
  node's cell: (which source proposed it, or "multi" when several did; depth, capped; whether
  a drafted token was, or would have been, accepted in the previous cycle). Rates are counted
  online with a Beta(1, 1) prior, so an unseen cell starts at 0.5. A node is *tested* when its
  parent was accepted, and a *hit* when its token is the parent's argmax: that is known for
  the nodes the cut left out too (the parent was verified), so a cut tree still teaches the
  rates. Counting only verified nodes would trap the sizer: once it verifies the root alone,
  it never sees a draft accepted again.
* ``c(n)`` is the verify time of an ``n``-node tree relative to a 1-node one: learned online
  from this decoder's own verify timings (an average per size, interpolated between the sizes
  timed, extended beyond the largest with :attr:`SizerConfig.slope`). Until 1-node verifies
  (cycles with nothing to draft, or cut to the root) and one bigger size have been timed a few
  times, it is :attr:`SizerConfig.jump` + :attr:`SizerConfig.slope` per node, the CPU shape
  above. Where a bigger tree costs nothing extra, the learned ``c(n)`` flattens once both
  have been timed, and the sizer then keeps the whole tree.

Pruning drafts never changes the output: the verifier still commits exactly what greedy
decoding would (the tests check it on the real model).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .tree import DraftTree


@dataclass
class SizerConfig:
    jump: float = 0.55       # prior: extra cost of a 2-node verify over a 1-node one, in 1-node verifies
    slope: float = 0.045     # prior: extra cost per further node
    max_depth: int = 6       # depth cells beyond this share one rate
    cost_alpha: float = 0.1  # weight of the newest timing in the per-size average
    min_seen: int = 3        # timings of a size before they replace the prior for it


class AcceptanceRates:
    """P(a drafted node is accepted), learned online per cell (see the module docstring).

    Shared by :class:`TreeSizer` (which prefix to verify) and the drafter's ``fill="expected"``
    mode (which candidate node to add next).
    """

    def __init__(self, max_depth: int = SizerConfig.max_depth, score_bins: tuple = ()):
        self.max_depth = max_depth
        self.score_bins = score_bins            # split cells by the proposer's score (none: one cell)
        self.tested: dict[tuple, int] = defaultdict(int)
        self.hits: dict[tuple, int] = defaultdict(int)
        self.warm = False                       # did the previous cycle accept a drafted token?

    def cell(self, sources, depth: int, score: float | None = None) -> tuple:
        """(proposer, or "multi" when several proposed the node; depth, capped; warm[; score bin])."""
        src = next(iter(sources)) if len(sources) == 1 else ("multi" if sources else "")
        c = (src, min(depth, self.max_depth), self.warm)
        if self.score_bins:
            c += (sum(score >= b for b in self.score_bins) if score is not None else -1,)
        return c

    def node_cell(self, tree: DraftTree, i: int, depth: int) -> tuple:
        return self.cell(tree.sources[i], depth, max(tree.scores[i].values(), default=None))

    def rate(self, cell: tuple) -> float:
        return (self.hits[cell] + 1) / (self.tested[cell] + 2)

    def path_probs(self, tree: DraftTree) -> list[float]:
        """P(node i is accepted) for every node (the root: 1)."""
        depths = tree.depths()
        p = [1.0] * len(tree)
        for i in range(1, len(tree)):
            p[i] = p[tree.parents[i]] * self.rate(self.node_cell(tree, i, depths[i]))
        return p

    def observe(self, drafted: DraftTree, accepted: list[int], argmax) -> None:
        """Count every node whose parent was accepted (tested), and whether its token is the
        parent's argmax (hit). ``argmax`` covers at least the verified nodes."""
        acc = set(accepted)
        depths = drafted.depths()
        warm = False
        for i in range(1, len(drafted)):
            p = drafted.parents[i]
            if p in acc:
                hit = drafted.tokens[i] == int(argmax[p])
                cell = self.node_cell(drafted, i, depths[i])
                self.tested[cell] += 1
                self.hits[cell] += hit
                warm = warm or (hit and p == 0)
        self.warm = warm


class TreeSizer(AcceptanceRates):
    """Chooses how many nodes of each drafted tree to verify, and learns from every verdict."""

    def __init__(self, config: SizerConfig | None = None):
        self.cfg = config or SizerConfig()
        super().__init__(self.cfg.max_depth)
        self.seconds: dict[int, float] = {}     # verify seconds by tree size (running average)
        self.seen: dict[int, int] = defaultdict(int)

    # ---------------------------------------------------------------- the cost model
    def cost(self, n: int) -> float:
        """Verify time of an ``n``-node tree over a 1-node one."""
        seen = sorted(k for k, c in self.seen.items() if c >= self.cfg.min_seen)
        if n <= 1:
            return 1.0
        if 1 in seen and len(seen) >= 2:
            top = seen[-1]
            if n > top:        # beyond the largest size timed: its cost plus the prior slope
                return self.cost(top) + self.cfg.slope * (n - top)
            lo = max(k for k in seen if k <= n)
            hi = min(k for k in seen if k >= n)
            t = self.seconds[lo] if lo == hi else (
                self.seconds[lo] + (self.seconds[hi] - self.seconds[lo]) * (n - lo) / (hi - lo))
            return max(1.0, t / self.seconds[1])
        return 1.0 + self.cfg.jump + self.cfg.slope * (n - 2)

    # ---------------------------------------------------------------- per cycle
    def choose(self, tree: DraftTree) -> int:
        """The number of leading nodes of ``tree`` worth verifying (>= 1: the root)."""
        probs = self.path_probs(tree)
        best_n, best, expected = 1, 1.0 / self.cost(1), 1.0
        for n in range(2, len(tree) + 1):
            expected += probs[n - 1]
            value = expected / self.cost(n)
            if value > best:
                best_n, best = n, value
        return best_n

    def update(self, drafted: DraftTree, accepted: list[int], argmax, verified: int | None = None,
               verify_seconds: float | None = None) -> None:
        """Learn from one verdict.

        ``drafted``: the whole drafted tree (before the cut); ``accepted``: the accepted node
        indices; ``argmax``: the verifier's argmax at each verified node; ``verified``: how many
        leading nodes were verified (default: all); ``verify_seconds``: that forward's time.
        """
        self.observe(drafted, accepted, argmax)
        if verify_seconds is not None and verify_seconds > 0:
            n, a = verified or len(drafted), self.cfg.cost_alpha
            old = self.seconds.get(n)
            self.seconds[n] = verify_seconds if old is None else (1 - a) * old + a * verify_seconds
            self.seen[n] += 1
