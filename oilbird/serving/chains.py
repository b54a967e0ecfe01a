"""Oilbird's merged draft tree, reduced to the one chain an engine verifies per request.

This is the only module of the vLLM integration that talks to Oilbird's drafter and sources
(:class:`oilbird.drafter.Drafter`, :mod:`oilbird.sources`, :class:`oilbird.acceptance.AcceptanceRates`,
:class:`oilbird.store.Store`), so a change of their interface is absorbed here.

What it knows: per request, the context (prompt + generated tokens), which of them are prompt,
the chain it sent last step, what the engine committed after it (the accepted draft tokens and
the engine's own next token) and, when the engine lets us see them, the hidden states of the
committed positions. What it does not know: the verifier's logits or top-k anywhere (an engine
like vLLM does not hand them over), so sources learn only from committed text: the adjacency
table (token recycling) gets the one successor the verifier endorsed, not its top-k.

Per step and request:

1. :meth:`RequestDrafter.propose` builds Oilbird's merged tree (suffix over the request and the
   cross-request store, prompt lookup, adjacency, the other running requests' outputs, the
   semantic key when a query state is known),
   scores every node by its learned probability of being accepted (the product of the
   per-node acceptance rates along its path, :meth:`AcceptanceRates.path_probs`), and returns the
   root-to-node path with the highest expected accepted length (:func:`best_chain`).
2. :meth:`RequestDrafter.learn` tells the rates which tree nodes were tested and hit (every node
   whose parent was accepted: its token is compared with the committed successor), the sources
   what was committed, and queues the committed tokens (with states when known) for the store.
3. :meth:`RequestDrafter.end` hands the request's output to the store in one piece (the store
   takes one request at a time; :class:`oilbird.request_records.RequestRecords`, the decoder's own
   bookkeeping), cut after its first EOS (an engine commits a whole accepted chain and cuts the
   output later), so the next requests can draft from it.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from ..drafter import Drafter, TreeConfig, value_rates
from ..errors import repeated
from ..presets import make_sources
from ..sources.live import LiveOutputs
from ..sources.recycling import RecyclingSource
from ..request_records import RequestRecords
from ..store import Store
from ..tree import DraftTree
from ..verdict import TreeVerdict

# the default: the oilbird preset's, less the rejected pool (which needs every tree node's outputs,
# vLLM's proposer sees one chain's), plus "live": the other running requests' outputs so far
# (oilbird.sources.live: the store sees a request only when it ends; inert at batch 1)
SOURCES = ("suffix-state", "pld", "recycling", "semantic", "live")
KNOWN_SOURCES = SOURCES + ("suffix",)                         # "suffix": its index without the state's weighting


def best_chain(tree: DraftTree, probs: list[float], max_len: int, min_prob: float = 0.0) -> list[int]:
    """The root-to-node path of ``tree`` with the highest expected accepted length.

    A chain ``c_1 .. c_m`` is accepted up to ``c_j`` with probability ``probs[c_j]`` (the
    product of the per-node acceptance estimates along the path), so its expected accepted
    length is the sum of ``probs`` over its nodes. Only nodes at depth <= ``max_len`` count, and
    a chain's tail whose nodes fall below ``min_prob`` is cut (each sent token costs the engine
    a verify position). Ties go to the earlier (spine-first) node. Returns node indices, root
    excluded; empty when nothing is worth sending.

    Example: tree root->A->B, root->C with probs [1, .8, .6, .9]: A-B is worth 1.4, C 0.9 ->
    [A, B]; with max_len 1 -> [C].
    """
    n = len(tree)
    if n <= 1 or max_len <= 0:
        return []
    value = [0.0] * n
    depth = tree.depths()
    best, best_value = 0, 0.0
    for i in range(1, n):
        value[i] = value[tree.parents[i]] + probs[i]
        if depth[i] <= max_len and probs[i] >= min_prob and value[i] > best_value + 1e-12:
            best, best_value = i, value[i]
    path = []
    while best > 0:
        path.append(best)
        best = tree.parents[best]
    path.reverse()
    return path


@dataclass
class ChainConfig:
    """How the tree behind each chain is built (see :class:`oilbird.drafter.TreeConfig`)."""
    budget: int = 16               # tree nodes, root included, before the best chain is taken
    # cut a chain's tail below this P(accepted). 0 (the default) sends the best path whole, up to
    # the engine's num_speculative_tokens: each node adds expected tokens; a cut saves verify
    # positions where they cost (docs/serving.md, "The chain's cut")
    min_prob: float = 0.0
    sources: tuple = SOURCES       # which Oilbird sources feed the tree

    def __post_init__(self):
        bad = [s for s in self.sources if s not in KNOWN_SOURCES]
        if bad:
            raise ValueError(f"unknown source {bad[0]!r}; choose from {', '.join(KNOWN_SOURCES)}")
        if not self.sources:
            raise ValueError("sources is empty: name at least one of " + ", ".join(KNOWN_SOURCES))
        names = ["suffix" if s == "suffix-state" else s for s in self.sources]   # one source, two weightings
        twice = repeated(names)
        if twice is not None:
            raise ValueError(f"sources names {twice!r} twice" + (' ("suffix" and "suffix-state" are one source, '
                             'without and with the state\'s weighting: name one)' if twice == "suffix" else ""))
        TreeConfig(budget=self.budget, semantic_budget=0)   # validates the budget
        if isinstance(self.min_prob, bool) or not isinstance(self.min_prob, numbers.Real) \
                or not 0.0 <= self.min_prob <= 1.0:
            raise ValueError(f"min_prob must be a number in [0, 1], not {self.min_prob!r}")


class Shared:
    """What all requests of one engine share: the tenant's store, the adjacency table and the
    learned acceptance rates (None until the first request's drafter makes them: they name the
    sources that retrieve)."""

    def __init__(self, dim: int, vocab_size: int, config: ChainConfig | None = None,
                 store: Store | None = None, eos: tuple = (), **store_kwargs):
        self.cfg = config or ChainConfig()
        self.eos = frozenset(int(t) for t in eos)     # an output ends at its first of these
        self.store = store if store is not None else Store(dim=dim, **store_kwargs)
        self.recycling = RecyclingSource(vocab_size) if "recycling" in self.cfg.sources else None
        self.live = LiveOutputs() if "live" in self.cfg.sources else None
        self.rates = None          # the first request's drafter makes them (they name its sources)


@dataclass
class _Pending:
    """The tree and chain of the last step, kept until the engine says what it accepted."""
    tree: DraftTree
    info: object
    chain: list[int]                   # node indices sent (root excluded)
    n_context: int                     # context length when drafted (the root is its last token)


@dataclass
class RequestDrafter:
    """One request's Oilbird drafter (per-request sources over the shared store and tables)."""
    shared: Shared
    request_id: str
    prompt: list[int]
    warm: bool = False
    pending: _Pending | None = None
    records: RequestRecords = field(init=False)     # generated tokens (with states) for the store

    def __post_init__(self):
        sh, cfg = self.shared, self.shared.cfg
        self.records = RequestRecords(self.request_id)
        sources = make_sources(cfg.sources, sh.store, sh.store.dim, 0,
                               shared={"recycling": sh.recycling, "live-outputs": sh.live})
        # the acceptance rates are learned across requests
        if sh.rates is None:
            sh.rates = value_rates(sources)
        self.drafter = Drafter(sources, TreeConfig(budget=cfg.budget, semantic_budget=0, fill="expected"),
                               rates=sh.rates)
        self.drafter.start_request(list(self.prompt), self.request_id)

    def propose(self, context: list[int], query_state: np.ndarray | None, max_len: int,
                min_prob: float | None = None) -> list[int]:
        """The chain (token ids) to send for ``context`` (whose last token is the newest
        committed); ``min_prob``: this step's cut instead of the configured one."""
        rates = self.shared.rates
        rates.warm = self.warm
        tree, info = self.drafter.draft(context, self.request_id, query_state)
        cut = self.shared.cfg.min_prob if min_prob is None else min_prob
        chain = best_chain(tree, rates.path_probs(tree), max_len, cut)
        self.pending = _Pending(tree, info, chain, len(context))
        return [tree.tokens[i] for i in chain]

    def learn(self, context: list[int], committed: list[int], states: np.ndarray | None) -> int:
        """The engine committed ``committed`` (accepted draft tokens, then its own next token);
        ``context`` is prompt + generated after the commit. ``states`` (optional): hidden states
        of the root and the accepted tokens, one row each. Returns how many drafts were accepted."""
        pend, self.pending = self.pending, None
        n_before = len(context) - len(committed)
        if not committed or pend is None or pend.n_context != n_before:
            return 0          # no draft of ours was verified here, and no state came with it: nothing to learn
        tree = pend.tree
        sent = [tree.tokens[i] for i in pend.chain]
        a = 0
        while a < min(len(sent), len(committed) - 1) and committed[a] == sent[a]:
            a += 1
        accepted = [0] + pend.chain[:a]
        # the verifier's argmax is known at every accepted node: the token committed after it.
        # The rates learn from the whole tree (every node whose parent was accepted is tested);
        # the sources see the accepted path as the verified tree, with that one successor per node
        targets = [-1] * len(tree)
        for node, tok in zip(accepted, committed):
            targets[node] = int(tok)
        succ = np.asarray(committed[:a + 1], dtype=np.int64)
        st = states if states is not None and len(states) == a + 1 else np.zeros((a + 1, 1), np.float32)
        verdict = TreeVerdict(accepted, int(committed[a]), targets, seen=accepted, argmax=succ,
                              topk_ids=succ[:, None], topk_probs=np.ones((a + 1, 1), np.float32),
                              states=np.ascontiguousarray(st, dtype=np.float32))
        rates = self.shared.rates
        rates.warm = self.warm
        self.drafter.update(tree, verdict, pend.info, list(context), self.request_id, root_index=n_before - 1)
        self.warm = rates.warm
        if states is not None and len(states) == a + 1:
            # the root (the last token before this commit) and the accepted tokens, whose states this
            # step's forward computed (none known: those tokens join the store without a state)
            self.records.record(context[len(self.prompt):], n_before - 1 - len(self.prompt), states)
        return a

    def output(self, context: list[int]) -> list[int]:
        """The generated part of ``context``, cut after its first EOS."""
        out = list(context[len(self.prompt):])
        for i, t in enumerate(out):
            if t in self.shared.eos:
                return out[:i + 1]
        return out

    def end(self, context: list[int]) -> None:
        """The request left the batch: its output joins the store as one request."""
        try:
            self.records.close(self.shared.store, self.output(context))
        finally:
            self.drafter.end_request(self.request_id)
