"""The published SuffixDecoding (Oliaro et al. 2025) as a draft source: a peer, not ours.

Wraps ``arctic_inference.suffix_decoding.SuffixDecodingCache`` (PyPI ``arctic-inference``, an
optional C++ extension; see ``requirements-peers.txt``) so that its drafts run through our
:class:`~oilbird.drafter.Drafter` and verifier under the same node budget and audit as every
other method. We only translate; the matching, scoring and tree shape are arctic's:

* **history**: arctic keeps a *global* suffix tree over the responses of all requests (the
  current one included, as it grows) and a *local* tree over the current request's prompt and
  response. ``start_request`` opens both, every committed token is appended with
  ``add_active_response``, ``end_request`` closes the local tree; the response stays in the
  global tree for later requests (``max_cached_requests=-1``: never evicted). This is the same
  cross-request history our ``suffix`` source reads from the store.
* **draft**: ``speculate`` over the last ``max_tree_depth`` context tokens returns a tree as
  parallel lists (``token_ids``, ``parents`` with -1 = below the newest token, ``probs`` = path
  probability, topologically ordered). We hand the drafter one chain per arctic node: the
  root-to-node path, scored with that node's probability. The drafter merges chains that share
  a prefix for free, so the merged tree has exactly arctic's nodes and edges, each node scored
  with arctic's probability (source name ``"suffix-arctic"``).

``max_spec_tokens`` is always passed explicitly (arctic 0.3.0's default path reads a
non-existent attribute); it caps the number of draft nodes, so set it to the tree budget minus
the root.

Example: arctic returns token_ids [5, 6, 9], parents [-1, 0, -1], probs [1.0, 0.8, 0.2]
-> chains [5] (1.0), [5, 6] (0.8), [9] (0.2) -> tree root -> 5 -> 6 and root -> 9.
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import Chain, DraftContext, DraftSource, Proposal, Verdict

INSTALL_HINT = ("the suffix-arctic peer needs the optional package arctic-inference (a C++ extension "
                "built on this machine): install requirements-peers.txt in two steps, "
                "`grep -v '^arctic' requirements-peers.txt | pip install -r /dev/stdin` then "
                "`pip install --no-build-isolation -r requirements-peers.txt`")


class ArcticUnavailable(ImportError):
    """``arctic-inference`` is not installed (or its C++ extension does not load)."""


def load_cache_class():
    """Return ``SuffixDecodingCache`` or raise :class:`ArcticUnavailable` with the install hint."""
    try:
        from arctic_inference.suffix_decoding import SuffixDecodingCache
    except ImportError as exc:   # missing package, or a _C built for another torch / python
        raise ArcticUnavailable(f"{INSTALL_HINT} ({exc})") from exc
    return SuffixDecodingCache


def arctic_available() -> bool:
    try:
        load_cache_class()
    except ArcticUnavailable:
        return False
    return True


@dataclass
class ArcticConfig:
    """Arctic's own defaults (its simulator and vLLM plugin), except ``max_spec_tokens``."""
    max_spec_tokens: int = 23      # draft nodes per cycle; presets.make_decoder passes budget - 1
    max_tree_depth: int = 64       # suffix-tree depth = longest context suffix matched
    max_spec_factor: float = 1.0   # draft length <= factor * match length + offset
    max_spec_offset: float = 0.0
    min_token_prob: float = 0.1    # stop a path whose estimated probability falls below this
    use_tree_spec: bool = True     # a tree (the paper's), not a single path (the vLLM plugin's)
    max_cached_requests: int = -1  # global tree keeps every past response


class ArcticSuffixSource(DraftSource):
    name = "suffix-arctic"

    def __init__(self, config: ArcticConfig | None = None):
        self.cfg = config or ArcticConfig()
        if self.cfg.max_spec_tokens < 1:
            raise ValueError("max_spec_tokens must be >= 1")
        cache_cls = load_cache_class()
        self.cache = cache_cls(max_tree_depth=self.cfg.max_tree_depth,
                               max_cached_requests=self.cfg.max_cached_requests)
        self._req = None     # the active request id
        self._fed = 0        # tokens of the active request (prompt included) arctic has seen

    # -- history ---------------------------------------------------------------------------
    def start_request(self, tokens: list[int], request_id: str) -> None:
        if request_id in self.cache.active_requests:   # a decode of this id died half-way
            self.cache.stop_request(request_id)
        # a finished request decoded again: arctic evicts its old response itself
        self.cache.start_request(request_id, [int(t) for t in tokens])
        self._req = request_id
        self._fed = len(tokens)

    def _sync(self, tokens: list[int], request_id: str) -> None:
        """Append the committed tokens arctic has not seen yet (prompt + response only grow)."""
        if request_id != self._req:
            raise RuntimeError(f"request {request_id!r} was not started (active: {self._req!r})")
        if len(tokens) > self._fed:
            self.cache.add_active_response(request_id, [int(t) for t in tokens[self._fed:]])
            self._fed = len(tokens)

    def update(self, verdict: Verdict) -> None:
        self._sync(verdict.tokens, verdict.request_id)

    def end_request(self, request_id: str) -> None:
        if request_id in self.cache.active_requests:
            self.cache.stop_request(request_id)
        self._req = None
        self._fed = 0

    # -- drafting --------------------------------------------------------------------------
    def speculate(self, tokens: list[int], request_id: str):
        """Arctic's raw draft for the context ``tokens`` (its last token is the tree root)."""
        ctx = [int(t) for t in tokens[-self.cfg.max_tree_depth:]]
        return self.cache.speculate(request_id, ctx, max_spec_tokens=self.cfg.max_spec_tokens,
                                    max_spec_factor=self.cfg.max_spec_factor,
                                    max_spec_offset=self.cfg.max_spec_offset,
                                    min_token_prob=self.cfg.min_token_prob,
                                    use_tree_spec=self.cfg.use_tree_spec)

    def propose(self, ctx: DraftContext, budget: int) -> Proposal:
        self._sync(ctx.tokens, ctx.request_id)   # the newest committed tokens, root included
        d = self.speculate(ctx.tokens, ctx.request_id)
        chains = draft_to_chains(list(d.token_ids), list(d.parents), list(d.probs))
        return Proposal(chains, match_len=int(d.match_len) if chains else 0)


def draft_to_chains(token_ids: list[int], parents: list[int], probs: list[float]) -> list[Chain]:
    """One root-to-node chain per arctic node, in arctic's (topological) order.

    ``parents[i]`` is the index of node i's parent in the draft, -1 for a child of the root.
    """
    paths: list[list[int]] = []
    for i, (tok, p) in enumerate(zip(token_ids, parents)):
        if not -1 <= p < i:
            raise ValueError(f"arctic draft node {i} has parent {p}; expected -1 <= parent < {i}")
        paths.append((paths[p] if p >= 0 else []) + [int(tok)])
    return [Chain(path, float(prob), attach=0, meta={"node": i})
            for i, (path, prob) in enumerate(zip(paths, probs))]
