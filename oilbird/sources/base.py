"""The draft-source interface: propose chains for this cycle, then learn from the verdict.

Every source lives in a file of its own and implements :class:`DraftSource`:

* ``propose(ctx, budget) -> Proposal``: candidate continuations for this cycle, and what the
  source found (:class:`Proposal`). A chain hangs below tree node ``attach`` (0 = the root, the
  newest committed token). ``budget`` is the number of new nodes this pass can still pay for
  (a hint: the drafter enforces it). Sources that extend an existing tree (token adjacency)
  read ``ctx.tree``, the tree built so far this cycle.
* ``update(verdict)``: what the verifier said (accepted path, per-node argmax / top-k / states).
* ``start_request(tokens, request_id)`` / ``end_request(request_id)``: per-request setup and
  teardown.
* ``knows(token)``: branch sources only: whether their key has a row for the root token.

A source never touches the model or the KV cache.

**Where its chains go: ``role``.** The drafter (:class:`oilbird.drafter.Drafter`) builds each
tree in three passes and asks every source in the pass its ``role`` names, in the order the
sources were given:

* ``"spine"`` (the default): lexical chains from the root, merged first (prompt lookup, the
  suffix index). Put the length of the context suffix your key matched in
  ``Proposal.match_len``: the longest one opens the semantic key's gate. The views count the
  spine as the exact-match keys the hidden state is set against (the funnel's "a lexical source
  had it", the neighbour table's "lexical key?"; a trace names them in
  ``meta["lexical_sources"]``), so a source that does not copy matching text, a small model's
  guesses say, belongs in ``"chains"``.
* ``"chains"``: chains that re-walk the tree from the root after the spine and pay for nodes
  out of ``TreeConfig.semantic_budget`` under the reserved fill, or compete node by node by
  learned acceptance under the ``expected`` and ``open`` fills (the semantic key, the
  rejected-branch pool). They are
  told in ``ctx.lexical_match_len`` how far the lexical keys matched.
* ``"branches"``: sources that extend the tree built so far (token adjacency) fill the nodes
  left. ``knows(token)`` says whether their key has a row for the root token, which also
  opens the semantic key's gate.

A source that ``retrieves`` (the semantic key) carries, in each chain's ``meta``, the store
record it came from (a :class:`Retrieved`) and says in ``Proposal.retrieval`` how the lookup
went; the drafter adds what the tree did with it (a :class:`LookedUp`, in ``DraftInfo.neighbours``)
and the decoder makes the trace's :class:`~oilbird.trace.Neighbour` of it, the cycle's nearest
neighbours. Names must be unique in one drafter.

To decode with a source of your own, give it to a drafter beside the others (a preset's
sources, over one store, come from :func:`oilbird.presets.make_sources`)::

    from oilbird.audit import audit
    from oilbird.data.requests import builtin_requests, encode
    from oilbird.decoding import SpeculativeDecoder
    from oilbird.drafter import Drafter, TreeConfig
    from oilbird.model import load_model
    from oilbird.presets import make_sources
    from oilbird.store import Store
    from oilbird.trace import save_traces
    from oilbird.verifier import Verifier

    lm = load_model()                                  # SmolLM2-135M-Instruct, offline
    store = Store(dim=lm.model.config.hidden_size, state_key=lm.state_key)
    sources = make_sources(["suffix", "pld", "semantic", "recycling"], store, store.dim,
                           lm.model.config.vocab_size) + [MySource()]
    dec = SpeculativeDecoder(Verifier(lm), Drafter(sources, TreeConfig(fill="expected")), store=store)
    traces = []
    for req in builtin_requests()[:4]:
        ids = encode(lm.tokenizer, req)
        tr = dec.run(req.id, ids, 64)                  # lossless whatever MySource proposes
        tr.lossless = audit(lm, ids, tr.output_ids, 64).lossless   # checked, for report and the app
        traces.append(tr)
    save_traces(traces, "runs/mine.jsonl")             # python -m workbench.app --traces runs/mine.jsonl

The decoder fills the store it is given (without one, the store its sources read), a request's
records joining it when the request ends. A source names itself (``name``; not ``bonus`` or
``root``, which the trace keeps for the verifier's tokens) and proposes token ids of the model's
vocabulary with finite scores: a chain that breaks either is refused naming the source. Its
chains are drawn under its name, in grey with an ``x`` marker (:mod:`workbench.palette`), and a
node it shares with another source takes that source's colour. To measure it on recorded
traffic, see docs/replay.md ("A drafter of your own").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from ..trace import RETRIEVAL_OUTCOMES as TRACE_RETRIEVAL_OUTCOMES
from ..tree import DraftTree


class Retrieved(TypedDict, total=False):
    """What a retrieving source puts in a chain's ``meta``: the store record it copies."""
    record: int              # the store's record index (the state the query was nearest)
    request_id: str          # the stored request it lies in, and its position among that request's tokens
    position: int
    similarity: float        # cosine of the query state and the record's
    proposed: list[int]      # the continuation the chain drafts (its copy depth)
    withheld: list[int]      # the continuation past it, up to REACH tokens: for the trace alone
    agreement: int           # context agreement (= Chain.match)


class LookedUp(Retrieved, total=False):
    """A retrieved record as the drafter recorded it (``DraftInfo.neighbours``): with the tree
    nodes its chain walked and paid for, and why it got none ("" if it did; else a key of
    :data:`oilbird.trace.NO_NODE_REASONS`)."""
    walked: list[int]
    paid: list[int]
    why_no_node: str
    left_out: float | None      # its first token the fill left out, priced (oilbird.drafter.FillPrices)


@dataclass
class Chain:
    """A proposed continuation: ``tokens`` hang below tree node ``attach``.

    ``score`` is the source's confidence in (0, 1]; ``match``: a copying source's context
    agreement, how many tokens of the context (the root included) equal the tokens before the
    occurrence it copies (0: not known); ``meta`` carries source-specific details the trace
    wants (a retrieving source's: :class:`Retrieved`, the neighbour a chain came from).
    """
    tokens: list[int]
    score: float
    attach: int = 0
    meta: dict = field(default_factory=dict)
    match: int = 0


# how a retrieving source's lookup went this cycle (Proposal.retrieval): the words are defined,
# with what each means, in oilbird.trace.RETRIEVAL_OUTCOMES ("no-source" is the drafter's own)
RETRIEVAL_OUTCOMES = tuple(k for k in TRACE_RETRIEVAL_OUTCOMES if k != "no-source")


@dataclass
class Proposal:
    """What one source offers for this cycle's tree.

    chains: the continuations to merge into the tree.
    match_len: lexical sources: the longest context suffix their key matched (0: none); the
        longest over the spine sources opens the semantic key's gate.
    looked_up: chains the source computed but withholds (a muted retrieving source): the
        trace shows them, the tree never gets them.
    retrieval / floor: a retrieving source's outcome (:data:`RETRIEVAL_OUTCOMES`) and the
        similarity floor it applied; None for other sources.
    muted: self-calibration has muted the source (it may still look up, in shadow).
    """
    chains: list[Chain] = field(default_factory=list)
    match_len: int = 0
    looked_up: list[Chain] = field(default_factory=list)
    retrieval: str | None = None
    floor: float | None = None
    muted: bool = False


@dataclass(frozen=True)
class DraftContext:
    """What a source may look at when proposing (read-only).

    tokens: prompt + generated so far; ``tokens[-1]`` is the tree root (committed, not cached).
    query_state: L2-normalised hidden state at position ``len(tokens) - 2`` (the newest
        position that has one: the root's own state is computed by this cycle's forward), or None.
    tree: the tree built so far this cycle (sources read it, only the drafter adds to it).
    lexical_match_len: longest context suffix the lexical sources matched this cycle (0 in the
        spine pass, which is where it is found).
    """
    tokens: list[int]
    request_id: str
    query_state: np.ndarray | None = None
    tree: DraftTree | None = None
    lexical_match_len: int = 0


@dataclass
class Verdict:
    """The outcome of one verification forward, as sources see it.

    argmax / topk_ids / topk_probs: numpy arrays per tree node; states: float32 [n, d] (raw).
    accepted: node indices root first. tokens: the context after the commit
    (``tokens[root_index + 1:]`` were committed now).
    """
    tree: DraftTree
    argmax: np.ndarray
    topk_ids: np.ndarray
    topk_probs: np.ndarray
    states: np.ndarray
    accepted: list[int]
    tokens: list[int]
    request_id: str
    root_index: int = -1   # index of the tree root in ``tokens``


class DraftSource:
    """Base class; override ``propose`` and, when the source learns, ``update``."""

    name = "source"
    role = "spine"      # which pass of the tree asks it: "spine" | "chains" | "branches" (module doc)
    retrieves = False   # its chains carry store records: the trace's nearest neighbours (module doc)

    def start_request(self, tokens: list[int], request_id: str) -> None:
        """A new request begins with prompt ``tokens``."""

    def propose(self, ctx: DraftContext, budget: int) -> Proposal:
        raise NotImplementedError

    def knows(self, token: int) -> bool:
        """Whether this source's key matches a root of ``token`` (branch sources; the drafter's
        gate for the semantic key)."""
        return False

    def update(self, verdict: Verdict) -> None:
        """Learn from one verification forward."""

    def end_request(self, request_id: str) -> None:
        """The request is finished."""
