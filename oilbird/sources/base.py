"""The draft-source interface: propose chains for this cycle, then learn from the verdict.

Every source lives in a file of its own and implements :class:`DraftSource`:

* ``propose(ctx) -> list[Chain]``: candidate continuations for this cycle. A chain hangs below
  tree node ``attach`` (0 = the root, the newest committed token). Sources that extend an
  existing tree (token adjacency) read ``ctx.tree``, the tree built so far this cycle.
* ``update(verdict)``: what the verifier said (accepted path, per-node argmax / top-k / states).
* ``start_request(tokens, request_id)`` / ``end_request(...)``: per-request setup and teardown.

A source never touches the model or the KV cache.

**Where its chains go: ``role``.** The drafter (:class:`oilbird.drafter.Drafter`) builds each
tree in three passes and asks every source in the pass its ``role`` names, in the order the
sources were given:

* ``"spine"`` (the default): lexical chains from the root, merged first (prompt lookup, the
  suffix index). Put the length of the context suffix your key matched in ``meta["match_len"]``:
  the longest one opens the semantic key's gate.
* ``"chains"``: chains that re-walk the tree from the root after the spine and pay for nodes
  out of ``TreeConfig.semantic_budget`` (the semantic key, the rejected-branch pool). They are
  told in ``ctx.lexical_match_len`` how far the lexical keys matched.
* ``"branches"``: sources that extend the tree built so far (token adjacency) fill the nodes
  left. ``knows(token)`` says whether their key has a row for the root token, which also
  opens the semantic key's gate.

``ctx.budget`` is the number of nodes the pass can still pay for. Names must be unique in one
drafter. The name ``semantic`` is the one the trace's nearest-neighbour records are read from
(its chains' ``meta`` carry the neighbour: see :mod:`oilbird.sources.semantic`).

To decode with a source of your own, give it to a drafter beside the others::

    from oilbird.decoding import SpeculativeDecoder
    from oilbird.drafter import Drafter, TreeConfig
    from oilbird.sources.prompt_lookup import PromptLookupSource
    dec = SpeculativeDecoder(verifier, Drafter([PromptLookupSource(), MySource()], TreeConfig()))
    trace = dec.run("r0", ids, 64)        # lossless whatever MySource proposes
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..tree import DraftTree


@dataclass
class Chain:
    """A proposed continuation: ``tokens`` hang below tree node ``attach``.

    ``score`` is the source's confidence in (0, 1]; ``meta`` carries source-specific details
    the trace wants (e.g. the semantic neighbour a chain came from).
    """
    tokens: list[int]
    score: float
    attach: int = 0
    meta: dict = field(default_factory=dict)


@dataclass
class DraftContext:
    """What a source may look at when proposing.

    tokens: prompt + generated so far; ``tokens[-1]`` is the tree root (committed, not cached).
    n_prompt: how many of ``tokens`` are prompt.
    query_state: L2-normalised hidden state at position ``len(tokens) - 2`` (the newest
        position that has one: the root's own state is computed by this cycle's forward), or None.
    tree: the tree built so far this cycle (read-only for sources).
    lexical_match_len: longest context suffix the lexical sources matched this cycle.
    budget: nodes the builder will give this source at most (a hint).
    """
    tokens: list[int]
    n_prompt: int
    request_id: str
    query_state: np.ndarray | None = None
    tree: DraftTree | None = None
    lexical_match_len: int = 0
    budget: int = 0


@dataclass
class Verdict:
    """The outcome of one verification forward, as sources see it.

    argmax / topk_ids / topk_probs: numpy arrays per tree node; states: float32 [n, d] (raw).
    accepted: node indices root first; bonus: the verifier's token after the last one.
    tokens: the context after the commit (``tokens[root_index + 1:]`` were committed now).
    """
    tree: DraftTree
    argmax: np.ndarray
    topk_ids: np.ndarray
    topk_probs: np.ndarray
    states: np.ndarray
    accepted: list[int]
    bonus: int
    tokens: list[int]
    request_id: str
    chains: dict[str, list[Chain]] = field(default_factory=dict)
    root_index: int = -1   # index of the tree root in ``tokens``


class DraftSource:
    """Base class; override ``propose`` and, when the source learns, ``update``."""

    name = "source"
    role = "spine"    # which pass of the tree asks it: "spine" | "chains" | "branches" (module doc)
    lexical = False   # its nodes count as lexically reachable in the trace's neighbour records

    def start_request(self, tokens: list[int], request_id: str) -> None:
        """A new request begins with prompt ``tokens``."""

    def propose(self, ctx: DraftContext) -> list[Chain]:
        raise NotImplementedError

    def knows(self, token: int) -> bool:
        """Whether this source's key matches a root of ``token`` (branch sources; the drafter's
        gate for the semantic key)."""
        return False

    def update(self, verdict: Verdict) -> None:
        """Learn from one verification forward."""

    def end_request(self, request_id: str) -> None:
        """The request is finished."""
