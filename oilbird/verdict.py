"""The verdict on one cycle's draft tree: what was committed, and what the model said.

A judge (:mod:`oilbird.decoding`: live greedy, replay exact, replay fast; an engine such as
vLLM in :mod:`oilbird.serving.chains`) returns one :class:`TreeVerdict` per tree; the decoder
commits from it and the drafter learns from it (:meth:`oilbird.drafter.Drafter.update`). It is
plain data (numpy, no torch): a judge that saw only some nodes (fast replay knows the model's
outputs on the recorded path alone; an engine reports only what it committed) says which in
``seen``, and the sources then learn from those nodes as the verified tree.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .sources.base import Verdict
from .tree import DraftTree


@dataclass
class TreeVerdict:
    """One tree's outcome.

    accepted: node indices of the accepted root path, root first.
    bonus: the token committed after it (the model's next token at the last accepted node).
    targets: per node, the token its child had to be to be accepted (the argmax live, the
        recorded token in replay; -1 where unknown): what the acceptance rates learn from.
    seen: the nodes the rows below belong to, in order; None: every node of the tree.
    argmax, topk_ids, topk_probs, states: the model's outputs at the ``seen`` nodes, one row
        each: int [m], int [m, k], float [m, k], float32 [m, d] (raw hidden states at the key layer).
    decisions: per tried node, how a sampled verdict decided it (the probability that decided
        and the residual mass; see :mod:`oilbird.sampling`); None for greedy and replay, a list
        (empty when the tree had no child to try) for a sampled verdict.

    >>> v = TreeVerdict([0, 2], 7, [5, 1, 6], None, np.array([5, 1, 6]), np.zeros((3, 1), int),
    ...                 np.ones((3, 1)), np.zeros((3, 2), np.float32))
    >>> v.node_argmax(3), v.path_states().shape
    ([5, 1, 6], (2, 2))
    """
    accepted: list[int]
    bonus: int
    targets: list[int]
    seen: list[int] | None
    argmax: np.ndarray
    topk_ids: np.ndarray
    topk_probs: np.ndarray
    states: np.ndarray
    decisions: list[dict] | None = None

    def _row(self, node: int) -> int | None:
        if self.seen is None:
            return node
        try:
            return self.seen.index(node)
        except ValueError:
            return None

    def node_argmax(self, n: int) -> list[int]:
        """The model's next token at each of the tree's ``n`` nodes (-1 where not seen)."""
        out = [-1] * n
        for node in range(n):
            r = self._row(node)
            if r is not None:
                out[node] = int(self.argmax[r])
        return out

    def path_states(self) -> np.ndarray:
        """The states of the accepted nodes, root first: the records the store receives."""
        if self.seen is None:
            return self.states[self.accepted]
        return self.states[[self._row(i) for i in self.accepted]]

    def for_sources(self, tree: DraftTree, tokens: list[int], request_id: str, root_index: int) -> Verdict:
        """What the sources see (:class:`oilbird.sources.base.Verdict`): the tree and outputs
        of the seen nodes; a partial view is the seen nodes as a chain (they form the
        accepted path), with the accepted path re-indexed onto it."""
        vtree, accepted = tree, self.accepted
        if self.seen is not None:
            vtree = DraftTree([tree.tokens[i] for i in self.seen], [-1] + list(range(len(self.seen) - 1)),
                              [set(tree.sources[i]) for i in self.seen], [dict(tree.scores[i]) for i in self.seen])
            accepted = [self.seen.index(i) for i in self.accepted]
        return Verdict(tree=vtree, argmax=self.argmax, topk_ids=self.topk_ids, topk_probs=self.topk_probs,
                       states=self.states, accepted=accepted, tokens=tokens, request_id=request_id,
                       root_index=root_index)
