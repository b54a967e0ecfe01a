"""Rejected-branch pool: what the verifier endorsed below nodes it rejected.

Every verification forward computes argmax and a hidden state at every tree node, rejected
ones included. For a rejected node r with parent p we keep the record
``key = (state at p, token at r)`` -> ``value = the continuation the model endorses after r``,
read from the same forward: argmax(r), then, while a child of the current node carries exactly
that argmax, the child's argmax, up to ``max_depth`` tokens. Records live in a ring buffer.

At draft time the key is (query state, root token): a past rejected node that sat in the same
situation with the same token offers its endorsed continuation as a chain below the root.

Example: r (token 5) under p, argmax(r) = 9, r has a child c with token 9 and argmax(c) = 2,
c has no child with token 2 -> value [9, 2].
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Chain, DraftContext, DraftSource, Proposal, Verdict


@dataclass
class RejectedConfig:
    capacity: int = 4096
    max_depth: int = 6
    min_similarity: float = 0.90
    max_chains: int = 2


class RejectedPoolSource(DraftSource):
    name = "rejected"
    role = "chains"

    def __init__(self, dim: int, config: RejectedConfig | None = None):
        self.cfg = config or RejectedConfig()
        cap = self.cfg.capacity
        self.keys = np.zeros((cap, dim), dtype=np.float32)
        self.key_tok = np.full(cap, -1, dtype=np.int64)
        self.values: list[list[int]] = [[] for _ in range(cap)]
        self.head = 0
        self.size = 0

    def propose(self, ctx: DraftContext, budget: int) -> Proposal:
        if ctx.query_state is None or self.size == 0:
            return Proposal()
        rows = np.nonzero(self.key_tok[: self.size] == ctx.tokens[-1])[0]
        if len(rows) == 0:
            return Proposal()
        sims = self.keys[rows] @ np.asarray(ctx.query_state, dtype=np.float32)
        order = np.argsort(-sims)
        chains, seen = [], set()
        for j in order:
            if sims[j] < self.cfg.min_similarity or len(chains) >= self.cfg.max_chains:
                break
            val = self.values[rows[j]]
            if val and tuple(val) not in seen:
                seen.add(tuple(val))
                chains.append(Chain(list(val), float(sims[j])))
        return Proposal(chains)

    def update(self, verdict: Verdict) -> None:
        tree, argmax = verdict.tree, verdict.argmax
        accepted = set(verdict.accepted)
        kids: dict[int, list[int]] = {}
        for i, p in enumerate(tree.parents):
            if p >= 0:
                kids.setdefault(p, []).append(i)
        states = verdict.states
        for r in range(1, len(tree)):
            if r in accepted:
                continue
            cont, node = [], r
            while len(cont) < self.cfg.max_depth:
                want = int(argmax[node])
                cont.append(want)
                node = next((c for c in kids.get(node, ()) if tree.tokens[c] == want), None)
                if node is None:
                    break
            key = states[tree.parents[r]]
            norm = float(np.linalg.norm(key))
            if norm == 0:
                continue
            h = self.head
            self.keys[h] = key / norm
            self.key_tok[h] = tree.tokens[r]
            self.values[h] = cont
            self.head = (h + 1) % self.cfg.capacity
            self.size = min(self.size + 1, self.cfg.capacity)
