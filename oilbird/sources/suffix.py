"""Suffix source (SuffixDecoding-style): the longest context suffix matched in the store and
in the current request, backing off to shorter suffixes, continuations weighted by evidence.

The matched occurrences' continuations are merged into a weighted trie: an occurrence whose
context matched ``L`` tokens adds weight ``L`` to every node of its continuation (a longer
matched context is stronger evidence). A node's share is its weight over the root's, which
never grows along a path. The proposal is the best-first subtree: the ``budget`` nodes of
largest share (the pass's ``budget``: none at 0), stopping below ``min_prob``; it is returned
as its root-to-leaf paths, the most weighted path first (the spine).

Why best-first: the earlier rule proposed the single most frequent path and let it take the
whole budget, so where the occurrences disagreed on the first token the others never reached
the tree; counting every occurrence alike also let two short matches outvote one long one
(docs/results.md, "Best-first suffix tree", for what it changed on API-Bank).

Example: store stream [1, 2, 3, 4 | 1, 2, 3, 5 | 1, 2, 3, 4], context [..., 1, 2, 3]:
suffix [1, 2, 3] matches 3 times (weight 3 each); continuations [4], [5], [4] -> chains
[4] (share 2/3) and [5] (share 1/3).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ..store import Store
from ._lexical import RequestIndex, confidence
from ._states import occurrence_weights
from .base import Chain, DraftContext, DraftSource, Proposal, Verdict


@dataclass
class SuffixConfig:
    max_match: int = 16       # longest context suffix looked up
    max_candidates: int = 32  # occurrences whose continuations feed the trie
    max_depth: int = 32       # longest continuation
    spec_factor: float = 8.0  # continuation <= spec_factor * match length
    min_prob: float = 0.05    # leave out nodes whose share falls below this
    # weigh each pool occurrence by how close its stored state is to the query state
    # (oilbird.sources._states): None = by match length alone (SuffixDecoding, GOOSE)
    state_temp: float | None = None


class _Node:
    __slots__ = ("w", "kids", "match")

    def __init__(self):
        self.w = 0.0
        self.kids: dict[int, _Node] = {}
        self.match = 0          # the longest context match among the occurrences through it


def best_first(root: _Node, budget: int, min_share: float) -> list[tuple[list[int], float]]:
    """The ``budget`` trie nodes of largest share (weight / root weight), as root-to-leaf paths.

    Shares never grow along a path, so the chosen nodes form a subtree. Paths come in
    depth-first order, heavier child first: the first path is the greedy heaviest one.
    Returns ``[(tokens, share of the path's first token)]``.
    """
    if root.w <= 0 or budget <= 0:
        return []
    heap = [(-k.w, n, t, k, None) for n, (t, k) in enumerate(root.kids.items())]
    heapq.heapify(heap)
    order = len(heap)
    top: list = []                        # chosen first tokens: [token, node, chosen children]
    taken = 0
    while heap and taken < budget:
        negw, _, t, k, parent = heapq.heappop(heap)
        if -negw / root.w < min_share:
            break
        entry = [t, k, []]
        taken += 1
        (parent[2] if parent is not None else top).append(entry)
        for t2, k2 in k.kids.items():
            order += 1
            heapq.heappush(heap, (-k2.w, order, t2, k2, entry))
    paths: list[tuple[list[int], float]] = []

    def walk(entry, prefix, share):
        prefix = prefix + [entry[0]]
        if not entry[2]:
            paths.append((prefix, share))
        for child in sorted(entry[2], key=lambda e: -e[1].w):
            walk(child, prefix, share)

    for entry in sorted(top, key=lambda e: -e[1].w):
        walk(entry, [], entry[1].w / root.w)
    return paths


def _leaf(root: _Node, tokens: list[int]) -> _Node:
    """The trie node at the end of ``tokens`` (a path of the trie): its context match is the
    path's (the occurrences through a node are a subset of its parent's)."""
    for t in tokens:
        root = root.kids[t]
    return root


class SuffixSource(DraftSource):
    name = "suffix"

    def __init__(self, store: Store | None, config: SuffixConfig | None = None):
        self.cfg = config or SuffixConfig()
        self.store = store
        self.req = RequestIndex(gram=4)

    def start_request(self, tokens, request_id):
        self.req.reset(tokens)

    def _occurrences(self, context: list[int]):
        """[(index, end_pos, match_len)] from the request and the store, longest first."""
        occ = [(self.req.index, p, L) for p, L in self.req.index.match(
            context, max_len=self.cfg.max_match, exclude_from=len(context) - 1)]
        if self.store is not None and len(self.store.suffix):
            occ += [(self.store.suffix, p, L) for p, L in self.store.suffix.match(
                context, max_len=self.cfg.max_match)]
        occ.sort(key=lambda o: -o[2])
        return occ

    def propose(self, ctx: DraftContext, budget: int) -> Proposal:
        self.req.sync(ctx.tokens)
        occ = self._occurrences(ctx.tokens)
        if not occ:
            return Proposal()
        best = occ[0][2]
        depth = int(min(self.cfg.max_depth, max(1, self.cfg.spec_factor * best)))
        # weighted trie over the continuations of the matched occurrences, longest match first
        root = _Node()
        firsts: dict[int, int] = {}          # occurrences per first continuation token
        weights = [1.0] * len(occ)
        if self.cfg.state_temp:           # the candidates the trie can take (a few are empty)
            head = occ[: 2 * self.cfg.max_candidates]
            weights[: len(head)] = self._state_weights(head, ctx)
        used = 0
        for (index, p, L), f in zip(occ, weights):
            if used >= self.cfg.max_candidates:
                break
            cont = index.continuation(p, depth)
            if not cont:
                continue
            used += 1
            firsts[cont[0]] = firsts.get(cont[0], 0) + 1
            node = root
            node.w += L * f
            for t in cont:
                node = node.kids.setdefault(t, _Node())
                node.w += L * f
                node.match = max(node.match, L)
        # a budget of 0 pays for no node: no chain, though the match still opens the key's gate
        paths = best_first(root, budget, self.cfg.min_prob)
        chains = [Chain(tokens, share, match=_leaf(root, tokens).match) for tokens, share in paths]
        if chains:   # the spine's score follows GOOSE's confidence rule
            agree = firsts[chains[0].tokens[0]]
            chains[0].score = max(chains[0].score, confidence(agree, len(chains[0].tokens)) * min(1.0, best / 4))
        return Proposal(chains, match_len=best if used else 0)

    def _state_weights(self, occ, ctx: DraftContext) -> list[float]:
        """Each occurrence's evidence multiplier from its stored state's similarity to the query
        (1 for the request's own occurrences and where there is no query state)."""
        pool = [k for k, o in enumerate(occ) if o[0] is not self.req.index]
        if ctx.query_state is None or not pool:
            return [1.0] * len(occ)
        states = self.store.states_before([occ[k][1] for k in pool])
        sims: list[float | None] = [None] * len(occ)
        for k, st in zip(pool, states):
            if st is not None:
                sims[k] = float(np.dot(st, ctx.query_state))
        return occurrence_weights(sims, self.cfg.state_temp)

    def update(self, verdict: Verdict) -> None:
        self.req.sync(verdict.tokens)
