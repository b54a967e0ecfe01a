"""Prompt lookup (Saxena 2023): copy what followed the last n-gram earlier in this request.

Example: context [4, 5, 6, 9, 4, 5] with max_ngram 3: the suffix [4, 5] occurred at positions
0..1, followed by [6, 9, 4, 5]; proposed chain [6, 9, 4, 5] (up to ``num_tokens``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ._lexical import RequestIndex, confidence
from .base import Chain, DraftContext, DraftSource, Proposal, Verdict


@dataclass
class PromptLookupConfig:
    max_ngram: int = 3      # longest n-gram tried (then 2, then 1... down to min_ngram)
    min_ngram: int = 1
    num_tokens: int = 10    # continuation length
    max_chains: int = 2     # distinct continuations returned (most recent match first)


class PromptLookupSource(DraftSource):
    name = "pld"

    def __init__(self, config: PromptLookupConfig | None = None):
        self.cfg = config or PromptLookupConfig()
        if self.cfg.min_ngram < 1 or self.cfg.max_ngram < self.cfg.min_ngram:
            raise ValueError("need 1 <= min_ngram <= max_ngram")
        self.req = RequestIndex(gram=self.cfg.max_ngram)

    def start_request(self, tokens, request_id):
        self.req.reset(tokens)

    def propose(self, ctx: DraftContext, budget: int) -> Proposal:
        self.req.sync(ctx.tokens)
        hits = self.req.index.match(ctx.tokens, max_len=self.cfg.max_ngram, min_len=self.cfg.min_ngram,
                                    exclude_from=len(ctx.tokens) - 1)
        chains, seen = [], set()
        best = hits[0][1] if hits else 0
        for p, L in hits:
            if L < best:
                break
            cont = self.req.index.continuation(p, self.cfg.num_tokens)
            if not cont or tuple(cont) in seen:
                continue
            seen.add(tuple(cont))
            agree = sum(1 for q, L2 in hits if L2 == best and self.req.index.continuation(q, 1)[:1] == cont[:1])
            chains.append(Chain(cont, confidence(agree, len(cont)) * min(1.0, L / 3 + 0.34), match=L))
            if len(chains) >= self.cfg.max_chains:
                break
        return Proposal(chains, match_len=best if chains else 0)

    def update(self, verdict: Verdict) -> None:
        self.req.sync(verdict.tokens)
