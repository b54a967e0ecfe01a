"""The semantic source (Oilbird): past positions retrieved by the verifier's hidden state.

Query: the L2-normalised state of the newest position that has one (``ctx.query_state``,
position t-1: the root x_t gets its state only in this cycle's forward). Retrieve the top-k
store records by cosine; use them only if the best similarity reaches the entry floor. A
neighbour at record i had state h_i ~ h_{t-1}, so its token i+1 plays the role of our root and
it proposes the tokens from i+2 on, as many as its own similarity allows (copy depth).

Fires only where the lexical match is non-empty (paper Fig. 2 (ii)). Self-calibration: an
exponential average of whether the source's chains got their first token accepted (counted in
shadow while muted, from the committed text, so it can recover); below ``mute_below`` the
source stops proposing, above ``unmute_above`` it resumes.

Example (floor 0.80, depth 48 at >= 0.90, 8 at >= 0.82): neighbours with similarity
0.95, 0.85, 0.81 propose up to 48, 8 and 0 tokens.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..store import Store
from .base import Chain, DraftContext, DraftSource, Proposal, Verdict


@dataclass
class SemanticConfig:
    top_k: int = 8
    entry_floor: float = 0.80        # use retrieval only if the best similarity >= this
    depth_tiers: tuple = ((0.90, 48), (0.82, 8))   # (min similarity, copy depth), highest first
    lag: int = 2                     # neighbour at record i proposes from i + lag on
    require_lexical: bool = True     # fire only where the lexical match is non-empty
    calib_alpha: float = 0.2         # EMA weight of the newest outcome
    mute_below: float = 0.15
    unmute_above: float = 0.30
    # agreement: when >= 2 neighbours propose the same first ``agree_len`` tokens, ask the
    # drafter for ``agree_claim`` nodes beyond the reserve (0: never)
    agree_claim: int = 0
    agree_len: int = 2


# tokens of a retrieved record's continuation the trace keeps past its copy depth ("withheld")
REACH = 16


def copy_depth(similarity: float, tiers=SemanticConfig.depth_tiers) -> int:
    """Tokens a neighbour may propose, by its own similarity."""
    for floor, depth in tiers:
        if similarity >= floor:
            return depth
    return 0


class SemanticSource(DraftSource):
    name = "semantic"
    role = "chains"
    retrieves = True

    def __init__(self, store: Store, config: SemanticConfig | None = None):
        self.cfg = config or SemanticConfig()
        self.store = store
        self.ema = 1.0
        self.muted = False
        self.last_chains: list[Chain] = []     # chains computed this cycle (proposed or shadow)

    def neighbours(self, query) -> list[tuple[int, float]]:
        """Top-k (record, similarity) above nothing; empty if the best is below the floor."""
        hits = self.store.search(query, self.cfg.top_k)
        if not hits or hits[0][1] < self.cfg.entry_floor:
            return []
        return hits

    def propose(self, ctx: DraftContext, budget: int) -> Proposal:
        self.last_chains = []
        said = {"floor": self.cfg.entry_floor, "muted": self.muted}
        if self.cfg.require_lexical and ctx.lexical_match_len <= 0:
            return Proposal(retrieval="gate-closed", **said)
        if ctx.query_state is None:
            return Proposal(retrieval="no-query", **said)
        if len(self.store) == 0:
            return Proposal(retrieval="empty-store", **said)
        hits = self.store.search(ctx.query_state, self.cfg.top_k)
        below = bool(hits) and hits[0][1] < self.cfg.entry_floor
        chains = []
        for rec, sim in hits:
            depth = 0 if below else copy_depth(sim, self.cfg.depth_tiers)
            # the record's continuation past its copy depth too (up to REACH tokens), for the
            # trace alone: it tells a copy-depth or floor cut from a wrong neighbour
            cont = self.store.continuation(rec, self.cfg.lag, max(depth, REACH))
            r = self.store.record(rec)
            chains.append(Chain(cont[:depth], sim, meta={"record": rec, "request_id": r.request_id,
                                                         "position": r.position, "similarity": sim,
                                                         "proposed": cont[:depth], "withheld": cont[depth:]}))
        if below:                      # looked up, not drafted: the trace shows them, the tree does not
            return Proposal(looked_up=chains, retrieval="below-floor", **said)
        self.last_chains = chains
        if not chains:
            return Proposal(retrieval="below-floor", **said)
        if self.muted:                 # looked up in shadow: the trace shows it, the tree does not
            return Proposal(looked_up=chains, retrieval="muted", **said)
        return Proposal(chains, retrieval="retrieved", claim=self._claim(chains), **said)

    def _claim(self, chains: list[Chain]) -> int:
        """``agree_claim`` when two or more neighbours agree on their first ``agree_len`` tokens."""
        n = self.cfg.agree_len
        heads = [tuple(c.tokens[:n]) for c in chains if len(c.tokens) >= n]
        if not self.cfg.agree_claim or not heads:
            return 0
        top = max(set(heads), key=heads.count)
        return self.cfg.agree_claim if heads.count(top) >= 2 else 0

    def update(self, verdict: Verdict) -> None:
        live = [c for c in self.last_chains if c.tokens]
        if not live:
            return
        # did any chain's first token get committed right after the root?
        r = verdict.root_index
        nxt = verdict.tokens[r + 1] if 0 <= r < len(verdict.tokens) - 1 else None
        hit = float(any(c.tokens[0] == nxt for c in live))
        a = self.cfg.calib_alpha
        self.ema = (1 - a) * self.ema + a * hit
        if self.muted and self.ema >= self.cfg.unmute_above:
            self.muted = False
        elif not self.muted and self.ema < self.cfg.mute_below:
            self.muted = True
