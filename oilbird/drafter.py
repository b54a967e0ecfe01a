"""The merged multi-source draft tree (GOOSE host + Oilbird's semantic chains).

One cycle's tree is filled in three passes under one node budget (root included), then
verified whole:

1. **lexical spine** (suffix, then prompt lookup): the suffix source returns its best-first
   subtree sized to the lexical budget (its first path is the spine); prompt-lookup chains
   then join by merge cost, paying only where they diverge. The lexical share of the budget
   follows an EMA of how much of the spine the verifier accepted (GOOSE's anisotropy).
2. **semantic chains** (the semantic key and the rejected-branch pool). The semantic key has
   its own gate: it proposes only where the lexical match is non-empty (a suffix or
   prompt-lookup match, or a token-adjacency row for the root). The rejected pool proposes
   wherever it matches. Each chain re-walks the tree from the root and pays only for the nodes after it diverges,
   ``cost(chain, T) = |chain| - pi(chain, T)``, out of a reserved sub-budget. Unspent
   reserved nodes go to pass 3.
3. **branches** (token adjacency): alternatives below the root and along the spine, until the
   budget is spent.

   With ``fill="expected"`` passes 2 and 3 are one: nothing is reserved, and semantic chains,
   adjacency branches and the lexical chains' tails that pass 1's share cut off compete for
   the nodes left, node by node, by the estimated probability that the node is accepted
   (:func:`fill_by_value`): a node several chains propose is priced with all of them, and by
   the longest context agreement among them (how far the copied occurrence's preceding tokens
   equal ours, :attr:`Chain.match <oilbird.sources.base.Chain>`). The Oilbird presets use it
   (:data:`oilbird.methods.PRESET_FILLS`). ``fill="open"`` is the same competition with the
   lexical sources proposing for the whole budget instead of their share, so that the
   alternatives the share leaves out (the suffix subtree's lower branches) compete too: the
   strongest tree without the key (docs/results.md, "The strongest tree without the key").
Every node records the set of sources that proposed it, each one's score and that agreement.
Which sources run is decided by the preset (see :mod:`oilbird.presets`).
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field, replace

import numpy as np

from .acceptance import AcceptanceRates
from .methods import TreeConfig
from .sources.base import Chain, DraftContext, DraftSource, LookedUp, Proposal
from .trace import BONUS
from .tree import DraftTree
from .verdict import TreeVerdict


@dataclass
class FillPrices:
    """What :func:`fill_by_value` priced, for the trace (why a chain stopped where it did): a
    node's price is the chance the fill gave its path of being accepted."""
    nodes: list[float] = field(default_factory=list)    # per tree node, after the fill
    start: int = 0                 # the tree's nodes before the fill (the exact-match head's: priced, never contested)
    bar: float | None = None       # the last node the fill added (None: it added none)
    # per chain (input order): its first token the tree left out, priced (None: nothing left out)
    left_out: list[float | None] = field(default_factory=list)


@dataclass
class DraftInfo:
    """What the drafter decided this cycle, recorded as it happened (the trace copies it; the
    views only read it)."""
    lexical_match_len: int = 0
    adjacency_row: bool = False   # the adjacency table had a row for the root: the semantic gate opens too
    # the semantic key's outcome (a key of oilbird.trace.RETRIEVAL_OUTCOMES) and the floor it applied
    retrieval: str = "no-source"
    retrieval_floor: float | None = None
    semantic_muted: bool = False  # self-calibration had muted the retrieving source
    # each retrieved record: its chain's meta, the tree nodes it walked and paid for, and why it
    # got no node ("" when it got one; else a key of oilbird.trace.NO_NODE_REASONS)
    neighbours: list[LookedUp] = field(default_factory=list)
    spine: list[int] = field(default_factory=list)
    prices: FillPrices | None = None   # what the expected and open fills priced (None: reserved)


def _attach(tree: DraftTree, source: str, chain: Chain) -> int:
    """The node ``chain`` hangs below, checked: a source's bad index is named here, not later
    as a malformed tree in the verifier."""
    if not 0 <= chain.attach < len(tree):
        raise ValueError(f"a {source!r} chain attaches below node {chain.attach}, but the tree has "
                         f"{len(tree)} nodes (0 = the root)")
    return chain.attach


def check_chains(source: str, chains, vocab_size: int | None = None) -> None:
    """Raise ValueError naming ``source`` for a chain no tree can hold: a score that is not a
    finite number (a trace file nothing reads back), a negative token id, or one past the
    model's vocabulary (an IndexError deep in another source's table or the embedding)."""
    for c in chains:
        if not math.isfinite(c.score):
            raise ValueError(f"a {source!r} chain has score {c.score}: a score is a finite number")
        if len(c.tokens) and min(c.tokens) < 0:
            raise ValueError(f"a {source!r} chain proposes token id {min(c.tokens)}: token ids are >= 0")
        if vocab_size and len(c.tokens) and max(c.tokens) >= vocab_size:
            raise ValueError(f"a {source!r} chain proposes token id {max(c.tokens)}, past the model's "
                             f"vocabulary of {vocab_size}")


def add_chain(tree: DraftTree, chain: Chain, source: str, budget: int) -> tuple[list[int], list[int]]:
    """Merge ``chain`` into ``tree`` below ``chain.attach``, paying at most ``budget`` nodes.

    The chain first re-walks existing nodes (free: it only adds its name to their sources),
    then pays one node per token after it diverges, until the budget runs out. Every node it
    walks keeps the chain's context agreement if longer (:attr:`DraftTree.match`).
    Returns (walked node indices, newly paid node indices).

    Example: tree root->A->B, chain [A, B, C, D], budget 1 -> walks A, B (free), pays C;
    D is cut: walked [a, b, c], paid [c].
    """
    walked, paid = [], []
    node = _attach(tree, source, chain)
    for tok in chain.tokens:
        nxt = tree.child(node, tok)
        if nxt is None:
            if len(paid) >= budget:
                break
            nxt = tree.add(node, tok, source, chain.score, chain.match)
            paid.append(nxt)
        else:
            tree.add(node, tok, source, chain.score, chain.match)   # re-walk: provenance only
        walked.append(nxt)
        node = nxt
    return walked, paid


# fill="expected" splits each acceptance cell by the proposer's score at these edges: semantic and
# rejected-pool similarities (0.95, 0.9), adjacency probabilities (0.5, 0.2); and by the node's
# context agreement (Chain.match: 1, 2-3, 4-7, 8 or more tokens). What they bought is in
# docs/results.md ("a tree filled by expected acceptance", "context agreement")
SCORE_BINS = (0.95, 0.9, 0.5, 0.2)
MATCH_BINS = (1, 2, 4, 8)


def value_rates(sources: list[DraftSource]) -> AcceptanceRates:
    """The acceptance rates the ``expected`` fill learns for a drafter of ``sources`` (its cells
    split as above, and runs from branches; the ones that retrieve by state named as such); the
    vLLM proposer's chains use the same."""
    return AcceptanceRates(score_bins=SCORE_BINS, match_bins=MATCH_BINS, runs=True,
                           retrievers=[s.name for s in sources if s.retrieves])


@dataclass
class _Candidate:
    """A node some chains propose beyond the tree: its token, depth, each proposer's best
    score, the longest context agreement among them, the chains (indices into the input)."""
    token: int
    depth: int
    scores: dict[str, float] = field(default_factory=dict)
    match: int = 0
    chains: list[int] = field(default_factory=list)


def fill_by_value(tree: DraftTree, chains: list[tuple[str, Chain]], room: int,
                  rates: AcceptanceRates, prices: FillPrices | None = None) -> list[tuple[list[int], list[int]]]:
    """Merge ``(source, chain)`` pairs into ``tree`` one node at a time, most likely first.

    First each chain re-walks the nodes it shares with the tree (free: its source joins their
    provenance). What the chains propose beyond the tree is merged into one trie of candidates,
    so a node several chains propose is priced with all of them: its cell is "multi" when the
    proposers are several sources, and its context agreement is the longest of theirs
    (:attr:`Chain.match`). A candidate is worth P(its parent is accepted) * the learned
    acceptance rate of its cell (source, depth, warm, score bin, agreement bin;
    :class:`AcceptanceRates`); the one worth most is added next, and its
    children become candidates. A child is never worth more than its parent (rates are <= 1),
    so nodes are added in non-increasing value, each after its parent. Ties go to the candidate
    an earlier chain proposed first. Stops after ``room`` new nodes. Returns (walked, paid) per
    chain, in input order; a node several chains propose is walked by all, paid by the first.

    ``prices``: filled in with what the fill priced (:class:`FillPrices`), where given.

    Example: tree root->A, chains [("semantic", [A, B]), ("recycling", [C])], room 1: the
    semantic chain re-walks A and offers B at depth 2 (worth P(A) * rate), the adjacency
    chain offers C at depth 1 (worth 1 * rate); with equal unseen rates (0.5), C wins.
    """
    walked: list[list[int]] = [[] for _ in chains]
    paid: list[list[int]] = [[] for _ in chains]
    starts = []
    for k, (name, chain) in enumerate(chains):
        node, j = _attach(tree, name, chain), 0
        while j < len(chain.tokens) and tree.child(node, chain.tokens[j]) is not None:
            node = tree.add(node, chain.tokens[j], name, chain.score, chain.match)   # re-walk: provenance only
            walked[k].append(node)
            j += 1
        starts.append((node, j))
    probs = rates.path_probs(tree)
    depths = tree.depths()
    cands: list[_Candidate] = []
    index: dict[tuple, int] = {}
    kids: dict[tuple[str, int], list[int]] = {}
    along: list[list[int]] = [[] for _ in chains]     # each chain's candidates, in its order
    for k, (name, chain) in enumerate(chains):
        node, j = starts[k]
        ref, depth = ("tree", node), depths[node]
        for tok in chain.tokens[j:]:
            depth += 1
            cid = index.get((ref, tok))
            if cid is None:
                cid = index[(ref, tok)] = len(cands)
                cands.append(_Candidate(tok, depth))
                kids.setdefault(ref, []).append(cid)
            c = cands[cid]
            c.scores[name] = max(chain.score, c.scores.get(name, chain.score))
            c.match = max(c.match, chain.match)
            c.chains.append(k)
            along[k].append(cid)
            ref = ("cand", cid)

    heap: list[tuple[float, int, int]] = []
    value: dict[int, float] = {}        # each offered candidate's worth
    added: set[int] = set()

    def offer(cid: int, parent: int) -> None:
        value[cid] = probs[parent] * rates.rate(rates.candidate_cell(tree, parent, cands[cid]))
        heapq.heappush(heap, (-value[cid], cid, parent))

    for (kind, node), ids in kids.items():
        for cid in ids if kind == "tree" else ():
            offer(cid, node)
    while heap and room > 0:
        neg, cid, parent = heapq.heappop(heap)
        c = cands[cid]
        i = -1
        for name, score in c.scores.items():
            i = tree.add(parent, c.token, name, score, c.match)
        probs.append(-neg)
        for k in c.chains:
            walked[k].append(i)
        paid[c.chains[0]].append(i)
        added.add(cid)
        room -= 1
        for kid in kids.get(("cand", cid), ()):
            offer(kid, i)
    if prices is not None:        # (a chain's first candidate left out was offered: its parent is in the tree)
        prices.nodes, prices.start = list(probs), len(probs) - len(added)
        prices.bar = probs[-1] if added else None
        # a chain cut where the fill added nothing (the exact-match head took every node) lost no contest
        prices.left_out = [next((value[cid] for cid in ids if cid not in added), None) if added else None
                           for ids in along]
    return list(zip(walked, paid))


# names no source may take: the trace credits these tokens to the verifier, not to a drafter
RESERVED_NAMES = {BONUS: "verifier's bonus token", "root": "tree's root (the last committed token)"}

# the three passes of a tree, by the ``role`` a source declares (oilbird/sources/base.py)
ROLES = ("spine", "chains", "branches")


def _unit(state: np.ndarray | None) -> np.ndarray | None:
    """The L2-normalised query state (None for none, or a zero vector)."""
    if state is None:
        return None
    n = float(np.linalg.norm(state))
    return (state / n).astype(np.float32) if n > 0 else None


class Drafter:
    """Builds one merged tree per cycle from its sources and feeds them the verdict."""

    def __init__(self, sources: list[DraftSource], config: TreeConfig | None = None,
                 rates: AcceptanceRates | None = None):
        """``rates``: learned acceptance rates to share with other drafters (an engine's requests
        learn together); by default the ``expected`` and ``open`` fills keep their own, the reserved
        fill none."""
        self.cfg = config or TreeConfig()       # validated by TreeConfig itself
        self.sources = sources
        names = [s.name for s in sources]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two draft sources named {twice[0]!r}: names must be unique (the trace credits "
                             f"tokens by name)")
        taken = next((n for n in names if n in RESERVED_NAMES), None)
        if taken:
            raise ValueError(f"a draft source is named {taken!r}, which the trace keeps for the "
                             f"{RESERVED_NAMES[taken]}: name it otherwise")
        roles = {s.name: getattr(s, "role", "spine") for s in sources}
        bad = next((n for n, r in roles.items() if r not in ROLES), None)
        if bad:
            raise ValueError(f"draft source {bad!r} has role {roles[bad]!r}; a role is one of {', '.join(ROLES)} "
                             f"(see oilbird/sources/base.py)")
        # each pass asks its sources in the order given (the presets: suffix before pld)
        self.spine_sources = [s for s in sources if roles[s.name] == "spine"]
        self.chain_sources = [s for s in sources if roles[s.name] == "chains"]
        self.branch_sources = [s for s in sources if roles[s.name] == "branches"]
        # the exact-match sources, as every view counts them: the spine's (oilbird.trace.lexical_sources)
        self.lexical_names = frozenset(s.name for s in self.spine_sources)
        self.spine_share = self.cfg.spine_share
        # GOOSE's share of the lexical head applies where something else competes for the rest:
        # branches, or under ``expected`` / ``open`` the chain sources (without it a tree with no
        # branch source gave its whole budget to the lexical pass and the key's chains found no
        # room: docs/results.md, "The paper's own pairs"). It goes by the sources a tree has, not
        # by what they proposed in a cycle: where the key is gated or muted, the lexical tails
        # compete for the rest alone
        self.shares_head = bool(self.branch_sources) or (self.cfg.valued and bool(self.chain_sources))
        # what a node is worth (fill "expected" or "open"), learned from every verdict
        if rates is None and self.cfg.valued:
            rates = value_rates(sources)
        self.rates = rates
        # the verifier's vocabulary, which every proposed token id must fall in (the decoder sets it)
        self.vocab_size: int | None = None

    def start_request(self, tokens: list[int], request_id: str) -> None:
        for s in self.sources:
            s.start_request(tokens, request_id)

    def end_request(self, request_id: str) -> None:
        for s in self.sources:
            s.end_request(request_id)

    # ---------------------------------------------------------------- one cycle's tree
    def draft(self, context: list[int], request_id: str,
              query_state: np.ndarray | None) -> tuple[DraftTree, DraftInfo]:
        """The tree for the context whose last token is the root, and what was decided (the
        passes are the module docstring's)."""
        cfg = self.cfg
        tree = DraftTree.root(context[-1])
        info = DraftInfo()
        ctx = DraftContext(tokens=context, request_id=request_id, query_state=_unit(query_state), tree=tree)
        left = cfg.budget - 1
        valued = cfg.valued
        reserved = min(cfg.semantic_budget, left) if self.chain_sources and not valued else 0
        lex_budget = round(self.spine_share * (left - reserved)) if self.shares_head else left - reserved
        lexical_rest = self._spine_pass(ctx, info, lex_budget)
        # the gate of pass 2: the host's lexical key is the suffix index *and* the token-adjacency
        # table (paper Fig. 2 (i)), so a table row for the root token is a non-empty match too
        info.adjacency_row = any(s.knows(context[-1]) for s in self.branch_sources)
        if not self.spine_sources and info.adjacency_row:
            info.lexical_match_len = 1     # a Token Recycling host: the table is its only key
        ctx = replace(ctx, lexical_match_len=max(info.lexical_match_len, int(info.adjacency_row)))
        room = cfg.budget - len(tree)
        semantic = self._chain_pass(ctx, info, room if valued else min(reserved, room))
        if valued:
            info.prices = FillPrices()
            merged = self._fill_expected(ctx, semantic, lexical_rest, info.prices)
        else:
            merged = self._fill_reserved(ctx, semantic, min(reserved, room))
        left_out = info.prices.left_out if info.prices is not None else [None] * len(semantic)
        for (source, c), (walked, paid), price in zip(semantic, merged, left_out):
            if source.retrieves:
                why = "" if walked else ("no-tokens" if not c.tokens else "budget")
                info.neighbours.append(LookedUp(**c.meta, walked=walked, paid=paid, why_no_node=why, left_out=price))
        return tree, info

    def _spine_pass(self, ctx: DraftContext, info: DraftInfo, budget: int) -> list[tuple[str, Chain]]:
        """1) lexical chains in source order (suffix's best-first subtree, then prompt lookup),
        each paying only after it leaves the tree; the first chain is the spine. Returns what
        the budget cut off each chain (a chain below the last node it reached) under the
        ``expected`` and ``open`` fills, which let it compete for the nodes left; nothing under
        ``reserved``."""
        lex, rest = [], []
        # "open": each lexical source proposes for every node left, the share only places its head
        ask = self.cfg.budget - len(ctx.tree) if self.cfg.fill == "open" else budget
        for s in self.spine_sources:
            p = self._ask(s, ctx, ask, info)
            lex += [(s.name, c) for c in p.chains]
            info.lexical_match_len = max(info.lexical_match_len, p.match_len)
        for i, (name, c) in enumerate(lex):
            if i == 0:
                c = replace(c, tokens=c.tokens[: self.cfg.max_spine_len])
            walked, paid = add_chain(ctx.tree, c, name, budget)
            budget -= len(paid)
            if i == 0:
                info.spine = walked
            if self.cfg.valued and len(walked) < len(c.tokens):
                tail = replace(c, tokens=c.tokens[len(walked):], attach=walked[-1] if walked else c.attach)
                rest.append((name, tail))
        return rest

    def _chain_pass(self, ctx: DraftContext, info: DraftInfo, budget: int) -> list[tuple[DraftSource, Chain]]:
        """2) the semantic key and the rejected pool: their chains, best first per source. A muted
        retrieving source's looked-up records go to the trace with no node."""
        out = []
        for s in self.chain_sources:
            p = self._ask(s, ctx, budget, info)
            out += [(s, c) for c in sorted(p.chains, key=lambda c: -c.score)]
            if s.retrieves:
                why = "below-floor" if p.retrieval == "below-floor" else "muted"     # looked up, not drafted
                info.neighbours += [LookedUp(**c.meta, walked=[], paid=[], why_no_node=why) for c in p.looked_up]
        return out

    def _fill_reserved(self, ctx: DraftContext, semantic, reserved: int) -> list[tuple[list[int], list[int]]]:
        """2) semantic chains out of the reserve, each paying only after it diverges; then
        3) adjacency branches fill what is left. Returns (walked, paid) per semantic chain."""
        tree, merged = ctx.tree, []
        for s, c in semantic:
            walked, paid = add_chain(tree, c, s.name, reserved)
            reserved -= len(paid)
            merged.append((walked, paid))
        for b in self.branch_sources:
            for name, c in self._branches(b, ctx):
                room = self.cfg.budget - len(tree)
                if room <= 0:
                    break
                add_chain(tree, c, name, room)
        return merged

    def _fill_expected(self, ctx: DraftContext, semantic, lexical_rest=(),
                       prices: FillPrices | None = None) -> list[tuple[list[int], list[int]]]:
        """2+3) semantic chains, what the spine pass cut off the lexical chains, and adjacency
        branches compete node by node (fill_by_value, pricing into ``prices``, kept for the
        semantic chains). Returns (walked, paid) per semantic chain."""
        branches = [pair for b in self.branch_sources for pair in self._branches(b, ctx)]
        pairs = [(s.name, c) for s, c in semantic] + list(lexical_rest) + branches
        out = fill_by_value(ctx.tree, pairs, self.cfg.budget - len(ctx.tree), self.rates, prices)
        if prices is not None:
            prices.left_out = prices.left_out[: len(semantic)]
        return out[: len(semantic)]

    def _branches(self, source: DraftSource, ctx: DraftContext) -> list[tuple[str, Chain]]:
        """A branch source's proposals for the tree built so far, best score first."""
        p = source.propose(ctx, self.cfg.budget - len(ctx.tree))
        check_chains(source.name, p.chains, self.vocab_size)
        return [(source.name, c) for c in sorted(p.chains, key=lambda c: -c.score)]

    def _ask(self, source: DraftSource, ctx: DraftContext, budget: int, info: DraftInfo) -> Proposal:
        """One source's proposal; a retrieving source's outcome goes to ``info`` (the first
        retrieving source's, where a method had several)."""
        p = source.propose(ctx, budget)
        check_chains(source.name, p.chains, self.vocab_size)
        if source.retrieves and info.retrieval == "no-source":
            info.retrieval, info.retrieval_floor, info.semantic_muted = p.retrieval, p.floor, p.muted
        return p

    # ---------------------------------------------------------------- learning
    def update(self, tree: DraftTree, verdict: TreeVerdict, info: DraftInfo, tokens: list[int],
               request_id: str, root_index: int) -> None:
        """Feed one tree's verdict to every source, the acceptance rates and the spine share.

        ``tokens``: the context after the commit; ``root_index``: the tree root's index in it.
        The sources see the nodes whose outputs the judge knows (:meth:`TreeVerdict.for_sources`);
        the rates learn from ``verdict.targets`` over the whole tree.
        """
        accepted = verdict.accepted
        seen = verdict.for_sources(tree, tokens, request_id, root_index)
        for s in self.sources:
            s.update(seen)
        if self.rates is not None:
            self.rates.observe(tree, accepted, verdict.targets)
        # GOOSE anisotropy: the lexical share follows how much of the spine was accepted
        if len(info.spine) > 0:
            acc = len(set(info.spine) & set(accepted)) / len(info.spine)
            a = self.cfg.spine_alpha
            share = (1 - a) * self.spine_share + a * acc
            self.spine_share = min(self.cfg.max_spine_share, max(self.cfg.min_spine_share, share))
