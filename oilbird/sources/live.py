"""Requests running at the same time as draft sources for each other (an engine's batch).

The store takes a request only when it finishes, so requests an engine serves together cannot
draft from each other's outputs while they run: at batch 8 the first eight requests all start
from an empty store. vLLM's ``suffix`` proposer has no such gap (arctic's global tree holds
every active response as it grows). This source closes it: a :class:`LiveOutputs` registry,
shared by one engine's requests, keeps a :class:`~oilbird.suffix_index.SuffixIndex` over each
running request's generated tokens; each request's source copies what followed the longest
suffix of its context found in *another* running request's output, as prompt lookup does in
its own request. A request's entry opens with it, grows with every commit (``update``) and
closes when it ends. With one request at a time (batch 1, replay, the local decoder) there is
no other entry, and the source proposes nothing.

Example: request A has generated [5, 6, 7, 8]; request B's context ends [..., 5, 6]: B's
source proposes [7, 8] (match length 2).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..suffix_index import SuffixIndex
from ._lexical import confidence
from .base import Chain, DraftContext, DraftSource, Proposal, Verdict


class LiveOutputs:
    """The generated tokens of the requests running now, one index each (by request id)."""

    def __init__(self, gram: int = 4):
        self.gram = gram
        self.indexes: dict[str, SuffixIndex] = {}

    def open(self, request_id: str) -> None:
        self.indexes[request_id] = SuffixIndex(gram=self.gram)

    def extend(self, request_id: str, tokens: list[int]) -> None:
        idx = self.indexes.get(request_id)
        if idx is not None:
            idx.extend(tokens)

    def close(self, request_id: str) -> None:
        self.indexes.pop(request_id, None)

    def keep(self, request_ids) -> None:
        """Drop every entry but these (an engine's running requests: a request that failed and
        was dropped without ending leaves nothing behind)."""
        for rid in [r for r in self.indexes if r not in request_ids]:
            del self.indexes[rid]


@dataclass
class LiveConfig:
    max_match: int = 16      # longest context suffix looked up
    min_match: int = 2       # shortest (one token matches too much in another request's text)
    num_tokens: int = 16     # continuation length
    max_chains: int = 2      # distinct continuations, longest match first


class LiveOutputsSource(DraftSource):
    name = "live"
    lexical = True

    def __init__(self, outputs: LiveOutputs, config: LiveConfig | None = None):
        self.outputs = outputs
        self.cfg = config or LiveConfig()
        self.request_id: str | None = None
        self.n_prompt = 0
        self.n_indexed = 0

    def start_request(self, tokens, request_id):
        self.request_id, self.n_prompt, self.n_indexed = request_id, len(tokens), 0
        self.outputs.open(request_id)

    def end_request(self, request_id):
        self.outputs.close(request_id)

    def propose(self, ctx: DraftContext, budget: int) -> Proposal:
        found = []
        for rid, idx in self.outputs.indexes.items():
            if rid == ctx.request_id or not len(idx):
                continue
            hits = idx.match(ctx.tokens, max_len=self.cfg.max_match, min_len=self.cfg.min_match, limit=8)
            if hits:
                p, L = hits[0]
                cont = idx.continuation(p, self.cfg.num_tokens)
                if cont:
                    found.append((L, cont))
        found.sort(key=lambda f: -f[0])
        chains, seen = [], set()
        for L, cont in found:
            if tuple(cont) in seen:
                continue
            seen.add(tuple(cont))
            chains.append(Chain(cont, confidence(1, len(cont)) * min(1.0, L / 3 + 0.34), match=L))
            if len(chains) >= self.cfg.max_chains:
                break
        return Proposal(chains, match_len=chains[0].match if chains else 0)

    def update(self, verdict: Verdict) -> None:
        """Index what this request committed (its generated tokens only)."""
        new = verdict.tokens[self.n_prompt + self.n_indexed:]
        if new:
            self.outputs.extend(self.request_id, list(new))
            self.n_indexed += len(new)
