"""Token adjacency (Token Recycling, Luo et al. 2025): the top-k next tokens the verifier
computed at every tree node, kept per token and reused as drafts.

Every verification forward refreshes ``table[token]`` with the top-k ids the model computed at
a node carrying ``token`` (accepted and rejected nodes alike), and a bigram tier
``(previous, token)`` that is consulted first. The table persists across requests.

Proposals extend the tree built so far: below the root and below each spine node (the
first-child path), ``ceil(width / (d + 1))`` alternatives at spine depth d (the root is depth
0: ``width`` there, half as many below it, ...), each continued greedily through the table up
to ``max_depth`` tokens. If the tree is still bare, the source first lays its own top-1 chain
as the spine (its first token is then not offered again as an alternative).

Example: table[7] = [8, 3, ...], table[8] = [9, ...], root token 7, bare tree, width 1 ->
spine chain [8, 9, ...] and an alternative [3, ...] at the root.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .base import Chain, DraftContext, DraftSource, Proposal, Verdict


@dataclass
class RecyclingConfig:
    topk: int = 10          # candidates kept per token
    width: int = 4          # alternatives at the root; ceil(width / (d + 1)) at spine depth d
    max_depth: int = 6      # longest branch
    min_score: float = 0.01
    max_bigrams: int = 200_000   # bigram rows kept; past it the one written longest ago goes


class RecyclingSource(DraftSource):
    name = "recycling"
    role = "branches"

    def __init__(self, vocab_size: int, config: RecyclingConfig | None = None):
        self.cfg = config or RecyclingConfig()
        self.table = np.full((vocab_size, self.cfg.topk), -1, dtype=np.int64)
        self.probs = np.zeros((vocab_size, self.cfg.topk), dtype=np.float32)
        self.bigram: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def next_tokens(self, prev: int | None, tok: int) -> tuple[np.ndarray, np.ndarray]:
        """Candidate next tokens after ``tok`` (bigram tier first), ids and probabilities."""
        if prev is not None:
            hit = self.bigram.get((prev, tok))
            if hit is not None:
                return hit
        row = self.table[tok]
        keep = row >= 0
        return row[keep], self.probs[tok][keep]

    def knows(self, tok: int) -> bool:
        """Whether the table has a row for ``tok`` (the adjacency key matches it)."""
        return bool(self.table[tok, 0] >= 0)

    def _greedy(self, prev: int | None, tok: int, depth: int) -> list[int]:
        out = []
        for _ in range(depth):
            ids, _p = self.next_tokens(prev, tok)
            if len(ids) == 0:
                break
            prev, tok = tok, int(ids[0])
            out.append(tok)
        return out

    def propose(self, ctx: DraftContext, budget: int) -> Proposal:
        tree = ctx.tree
        prev_root = ctx.tokens[-2] if len(ctx.tokens) > 1 else None
        chains: list[Chain] = []
        # the spine: first-child path of the tree so far, or our own top-1 chain
        spine = [0]
        while True:
            kids = [i for i in range(spine[-1] + 1, len(tree)) if tree.parents[i] == spine[-1]]
            if not kids:
                break
            spine.append(kids[0])
        if len(spine) == 1:
            own = self._greedy(prev_root, tree.tokens[0], self.cfg.max_depth)
            if own:
                chains.append(Chain(own, 1.0, attach=0))
        for i, node in enumerate(spine):
            width = math.ceil(self.cfg.width / (i + 1))
            prev = prev_root if node == 0 else tree.tokens[tree.parents[node]]
            ids, probs = self.next_tokens(prev, tree.tokens[node])
            taken = 0
            for t, p in zip(ids.tolist(), probs.tolist()):
                if taken >= width or p < self.cfg.min_score:
                    break
                if tree.child(node, t) is not None or (chains and node == 0 and chains[0].tokens[:1] == [t]):
                    continue
                rest = self._greedy(tree.tokens[node], t, self.cfg.max_depth - 1)
                chains.append(Chain([t] + rest, p / (i + 1), attach=node))
                taken += 1
        return Proposal(chains)

    def update(self, verdict: Verdict) -> None:
        tree = verdict.tree
        k = min(self.cfg.topk, verdict.topk_ids.shape[1])
        ids, probs = verdict.topk_ids[:, :k], verdict.topk_probs[:, :k]
        toks = np.asarray(tree.tokens)
        # a token seen at several nodes keeps the last node's row (numpy: last write wins)
        self.table[toks, :k] = ids
        self.table[toks, k:] = -1
        self.probs[toks, :k] = probs
        for i, p in enumerate(tree.parents):
            if p < 0:
                continue   # the root's predecessor is not in the tree; the unigram row covers it
            key = (tree.tokens[p], tree.tokens[i])
            if self.bigram.pop(key, None) is None and len(self.bigram) >= self.cfg.max_bigrams:
                self.bigram.pop(next(iter(self.bigram)))   # full: the row written longest ago goes
            # (re)inserted last, so the dict's order is the order of the last write; copies: a row
            # of the verdict's arrays would keep the whole verdict alive for as long as it lives
            self.bigram[key] = (ids[i].copy(), probs[i].copy())
