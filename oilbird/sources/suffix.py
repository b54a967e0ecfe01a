"""Suffix source (SuffixDecoding-style): the longest context suffix matched in the store and
in the current request, backing off to shorter suffixes, continuations weighted by counts.

The matched occurrences' continuations are merged into a count trie; the proposal is the most
frequent path (child probability = count(child) / count(parent), stop below ``min_prob``),
plus the other frequent paths as alternatives.

Example: store stream [1, 2, 3, 4 | 1, 2, 3, 5 | 1, 2, 3, 4], context [..., 1, 2, 3]:
suffix [1, 2, 3] matches 3 times; continuations [4], [5], [4] -> best chain [4] with
probability 2/3, alternative [5] with 1/3.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..store import Store
from ._lexical import RequestIndex, confidence
from .base import Chain, DraftContext, DraftSource, Verdict


@dataclass
class SuffixConfig:
    max_match: int = 16       # longest context suffix looked up
    max_candidates: int = 16  # occurrences whose continuations feed the trie
    max_depth: int = 32       # longest continuation
    spec_factor: float = 4.0  # continuation <= spec_factor * match length
    min_prob: float = 0.1     # stop a path where the child's share falls below this
    max_chains: int = 4


class SuffixSource(DraftSource):
    name = "suffix"
    lexical = True

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

    def propose(self, ctx: DraftContext) -> list[Chain]:
        self.req.sync(ctx.tokens)
        occ = self._occurrences(ctx.tokens)
        if not occ:
            return []
        best = occ[0][2]
        depth = int(min(self.cfg.max_depth, max(1, self.cfg.spec_factor * best)))
        # count trie over continuations of the longest matches (then shorter ones, back-off)
        trie: dict = {"n": 0, "kids": {}}
        used = 0
        for index, p, L in occ:
            if used >= self.cfg.max_candidates:
                break
            cont = index.continuation(p, depth)
            if not cont:
                continue
            used += 1
            node = trie
            node["n"] += 1
            for t in cont:
                node = node["kids"].setdefault(t, {"n": 0, "kids": {}})
                node["n"] += 1
        if not trie["n"]:
            return []
        chains: list[Chain] = []
        self._paths(trie, [], 1.0, chains)
        chains.sort(key=lambda c: -c.score)
        for c in chains:
            c.meta["match_len"] = best
        top = chains[: self.cfg.max_chains]
        if top:   # the spine's score follows GOOSE's confidence rule
            agree = max(k["n"] for k in trie["kids"].values())
            top[0].score = max(top[0].score, confidence(agree, len(top[0].tokens)) * min(1.0, best / 4))
        return top

    def _paths(self, node: dict, prefix: list[int], prob: float, out: list[Chain]) -> None:
        kids = [(t, k) for t, k in node["kids"].items() if k["n"] / node["n"] >= self.cfg.min_prob]
        if not kids:
            if prefix:
                out.append(Chain(list(prefix), prob))
            return
        kids.sort(key=lambda tk: -tk[1]["n"])
        for t, k in kids:
            self._paths(k, prefix + [t], prob * k["n"] / node["n"], out)

    def update(self, verdict: Verdict) -> None:
        self.req.sync(verdict.tokens)
