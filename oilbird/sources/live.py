"""Requests running at the same time as draft sources for each other (an engine's batch).

The store takes a request only when it finishes, so requests an engine serves together cannot
draft from each other's outputs while they run: at batch 8 the first eight requests all start
from an empty store. vLLM's ``suffix`` proposer has no such gap (arctic's global tree holds
every active response as it grows). This source closes it: a :class:`LiveOutputs` registry,
shared by one engine's requests, keeps one n-gram map over the running requests' generated
tokens; each request's source copies what followed the longest
suffix of its context found in *another* running request's output, as prompt lookup does in
its own request. A request's entry opens with it, grows with every commit (``update``) and
closes when it ends. With one request at a time (batch 1, replay, the local decoder) there is
no other entry, and the source proposes nothing.

Example: request A has generated [5, 6, 7, 8]; request B's context ends [..., 5, 6]: B's
source proposes [7, 8] (match length 2).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..suffix_index import extend_back
from ._lexical import confidence
from .base import Chain, DraftContext, DraftSource, Proposal, Verdict


class LiveOutputs:
    """The generated tokens of the requests running now, in one n-gram map over all of them:
    a lookup costs the same however many requests run (a map per request would make every
    request search every other one's each step). N-grams of ``min_gram`` to ``gram`` tokens are
    kept (a shorter match is never asked for: one token matches too much of another request)."""

    def __init__(self, gram: int = 4, max_positions: int = 64, min_gram: int = 2):
        if not 1 <= min_gram <= gram:
            raise ValueError(f"n-grams of min_gram={min_gram} to gram={gram} tokens: need 1 <= min_gram <= gram")
        self.gram, self.max_positions, self.min_gram = gram, max_positions, min_gram
        self.tokens: dict[str, list[int]] = {}
        self.grams: dict[tuple, list[tuple[str, int]]] = {}    # n-gram -> (request, end position)

    def open(self, request_id: str) -> None:
        self.close(request_id)
        self.tokens[request_id] = []

    def extend(self, request_id: str, new: list[int]) -> None:
        toks = self.tokens.get(request_id)
        if toks is None:
            return
        for t in new:
            toks.append(int(t))
            p = len(toks) - 1
            for n in range(self.min_gram, min(self.gram, p + 1) + 1):
                lst = self.grams.setdefault(tuple(toks[p - n + 1:p + 1]), [])
                lst.append((request_id, p))
                if len(lst) > 2 * self.max_positions:           # keep the most recent
                    del lst[:self.max_positions]

    def close(self, request_id: str) -> None:
        toks = self.tokens.pop(request_id, None)
        if not toks:
            return
        keys = {tuple(toks[p - n + 1:p + 1]) for p in range(len(toks))
                for n in range(self.min_gram, min(self.gram, p + 1) + 1)}
        for key in keys:                        # each n-gram once, however often the request repeated it
            lst = self.grams.get(key)
            if lst is not None:
                lst[:] = [h for h in lst if h[0] != request_id]
                if not lst:
                    del self.grams[key]

    def match(self, context: list[int], exclude: str, max_len: int = 16, min_len: int = 2,
              limit: int = 16) -> list[tuple[str, int, int]]:
        """Occurrences, in other requests than ``exclude``, of the longest suffix of ``context``
        (at least ``min_len`` tokens) that has a token after it: ``[(request, end position,
        match length)]``, longest first, then most recent."""
        if min_len < self.min_gram:
            raise ValueError(f"a match of {min_len} tokens is shorter than this registry keeps ({self.min_gram})")
        for n in range(min(self.gram, len(context)), min_len - 1, -1):
            lst = self.grams.get(tuple(context[-n:]))
            hits = []
            for rid, p in reversed((lst or [])[-limit:]):
                toks = self.tokens.get(rid)
                if rid == exclude or toks is None or p + 1 >= len(toks):
                    continue
                hits.append((rid, p, extend_back(toks, context, p, n, max_len) if n == self.gram else n))
            if hits:
                hits.sort(key=lambda h: -h[2])
                return hits
        return []


@dataclass
class LiveConfig:
    max_match: int = 16      # longest context suffix looked up
    min_match: int = 2       # shortest (one token matches too much in another request's text)
    num_tokens: int = 16     # continuation length
    max_chains: int = 2      # distinct continuations, longest match first


class LiveOutputsSource(DraftSource):
    name = "live"

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
        chains, seen = [], set()
        for rid, p, L in self.outputs.match(ctx.tokens, ctx.request_id, self.cfg.max_match, self.cfg.min_match):
            cont = self.outputs.tokens[rid][p + 1: p + 1 + self.cfg.num_tokens]
            if tuple(cont) in seen:
                continue
            seen.add(tuple(cont))
            # longer matches say more (2 tokens: half); GOOSE's confidence in the chain's length
            chains.append(Chain(cont, confidence(1, len(cont)) * min(1.0, L / 4), match=L))
            if len(chains) >= self.cfg.max_chains:
                break
        return Proposal(chains, match_len=chains[0].match if chains else 0)

    def update(self, verdict: Verdict) -> None:
        """Index what this request committed (its generated tokens only)."""
        new = verdict.tokens[self.n_prompt + self.n_indexed:]
        if new:
            self.outputs.extend(self.request_id, list(new))
            self.n_indexed += len(new)
