"""The semantic source (Oilbird): past positions retrieved by the verifier's hidden state.

Query: the L2-normalised state of the newest position that has one (``ctx.query_state``,
position t-1: the root x_t gets its state only in this cycle's forward). Retrieve the top-k
store records by cosine among those whose own next token is the root (the root check,
``root_check``: a record at i with h_i ~ h_{t-1} whose token i+1 is not x_t answered another
question; the lexical index lists them, so the check is exact and only they are scored); use
them only if the best similarity reaches the entry floor. A
kept neighbour's token i+1 is our root, and it proposes the tokens from i+2 on, as many as its
own similarity allows (copy depth). Why the check: docs/results.md ("The whole recorded set").

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
from ..trace import common_prefix
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
    # root agreement: the query is the state *before* the root (module doc), so a neighbour whose
    # own next token is not the root token is answering another question. ``root_check`` keeps
    # the ``top_k`` nearest of the records followed by the root: of all of them (``root_widen``
    # 0, exact; the store scores only those), or of the ``top_k * root_widen`` nearest records
    # (the first version's cut: it lost a fifth of the exact check's reach, docs/results.md)
    root_check: bool = True
    root_widen: int = 0

    def __post_init__(self):
        if self.root_widen < 0:
            raise ValueError(f"root_widen must be >= 0 (0: every record followed by the root), not {self.root_widen}")


# tokens of a retrieved record's continuation the trace keeps past its copy depth ("withheld")
REACH = 16
# the longest context agreement a neighbour's chain is credited with (Chain.match)
AGREEMENT_CAP = 16


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

    def _search(self, query, root: int | None) -> list[tuple[int, float]]:
        """The top-k records by similarity; with the root check and a root token, the top-k of
        those whose next token (the one before their continuation) is the root: of all of them,
        or with ``root_widen`` > 0 of the ``top_k * root_widen`` nearest records."""
        k, widen = self.cfg.top_k, self.cfg.root_widen
        if not self.cfg.root_check or root is None:
            return self.store.search(query, k)
        if widen <= 0:
            return self.store.search(query, k, followed_by=root, step=self.cfg.lag - 1)
        hits = self.store.search(query, k * widen)
        nxt = self.store.next_tokens([rec for rec, _ in hits], self.cfg.lag - 1)
        return [h for h, t in zip(hits, nxt) if t == root][:k]

    def _read(self, rec: int, n: int, context: list[int]) -> tuple[list[int], int]:
        """One store read per neighbour: its continuation (``n`` tokens from the lag on) and its
        context agreement (:attr:`Chain.match`): how many of our tokens, the root first, equal
        the record's own, read backwards from its successor (the root's counterpart, the lag's
        step), at most :data:`AGREEMENT_CAP`; 0 when the record's successor is not the root."""
        lag = self.cfg.lag
        toks, at = self.store.context(rec, before=AGREEMENT_CAP, after=lag - 1 + n)
        agree = common_prefix(toks[: at + lag][::-1], context[::-1][:AGREEMENT_CAP])
        return toks[at + lag: at + lag + n], agree

    def propose(self, ctx: DraftContext, budget: int) -> Proposal:
        self.last_chains = []
        said = {"floor": self.cfg.entry_floor, "muted": self.muted}
        if self.cfg.require_lexical and ctx.lexical_match_len <= 0:
            return Proposal(retrieval="gate-closed", **said)
        if ctx.query_state is None:
            return Proposal(retrieval="no-query", **said)
        if len(self.store) == 0:
            return Proposal(retrieval="empty-store", **said)
        hits = self._search(ctx.query_state, ctx.tokens[-1] if ctx.tokens else None)
        if not hits and self.cfg.root_check:
            return Proposal(retrieval="no-root-match", **said)
        below = bool(hits) and hits[0][1] < self.cfg.entry_floor
        chains = []
        for rec, sim in hits:
            depth = 0 if below else copy_depth(sim, self.cfg.depth_tiers)
            # the record's continuation past its copy depth too (up to REACH tokens), for the
            # trace alone: it tells a copy-depth or floor cut from a wrong neighbour
            cont, agree = self._read(rec, max(depth, REACH), ctx.tokens)
            r = self.store.record(rec)
            chains.append(Chain(cont[:depth], sim, match=agree,
                                meta={"record": rec, "request_id": r.request_id, "position": r.position,
                                      "similarity": sim, "proposed": cont[:depth], "withheld": cont[depth:],
                                      "agreement": agree}))
        if below:                      # looked up, not drafted: the trace shows them, the tree does not
            return Proposal(looked_up=chains, retrieval="below-floor", **said)
        self.last_chains = chains
        if not chains:
            return Proposal(retrieval="below-floor", **said)
        if self.muted:                 # looked up in shadow: the trace shows it, the tree does not
            return Proposal(looked_up=chains, retrieval="muted", **said)
        return Proposal(chains, retrieval="retrieved", **said)

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
