"""The merged multi-source draft tree (GOOSE host + Oilbird's semantic chains).

One cycle's tree is filled in three passes under one node budget (root included), then
optionally cut:

1. **lexical spine** (suffix, then prompt lookup): the suffix source returns its best-first
   subtree sized to the lexical budget (its first path is the spine); prompt-lookup chains
   then join by merge cost, paying only where they diverge. The lexical share of the budget
   follows an EMA of how much of the spine the verifier accepted (GOOSE's anisotropy).
2. **semantic chains** (semantic key, rejected-branch pool), only where the lexical match is
   non-empty (a suffix / prompt-lookup match, or a token-adjacency row for the root): each
   chain re-walks the tree from the root and pays only for the nodes after it diverges,
   ``cost(chain, T) = |chain| - pi(chain, T)``, out of a reserved sub-budget. Unspent
   reserved nodes go to pass 3.
3. **branches** (token adjacency): alternatives below the root and along the spine, until the
   budget is spent.
4. **size** (``cost_aware``, off by default): verify only the prefix of the tree, in the order
   above, whose expected accepted tokens pay for its verify cost (:mod:`oilbird.sizing`).

Every node records the set of sources that proposed it and each one's score. Which sources run
is decided by the preset (see :mod:`oilbird.presets`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .sizing import TreeSizer
from .sources.base import Chain, DraftContext, DraftSource, Verdict
from .tree import DraftTree


@dataclass
class TreeConfig:
    # On a GPU the paper uses 60 nodes (16 semantic): a forward costs about the same for 1 or
    # 60 positions there. On this project's 2-core CPU it does not: with the oneDNN linears
    # (oilbird.cpu_gemm) a 12-node verify of SmolLM2-135M costs ~1.3-1.5 AR steps, 24 nodes ~1.8,
    # and budgets 12, 16 and 24 tie on tokens/s on API-Bank. The CPU default keeps trees
    # small; sweep with `bench --budget N` (docs/results.md, "CPU tree budget").
    budget: int = 12               # nodes per tree, root included
    # nodes reserved for semantic / rejected-pool chains (the paper: 16 of 60 on a GPU). 2 of 12
    # on CPU: with the best-first suffix subtree, 4 took more from it and from the adjacency
    # branches than the chains returned (docs/results.md, "Best-first suffix tree")
    semantic_budget: int = 2
    spine_share: float = 0.6       # initial share of the remaining budget for lexical chains
    spine_alpha: float = 0.3       # EMA weight of the newest spine acceptance
    min_spine_share: float = 0.3
    max_spine_share: float = 0.9
    max_spine_len: int = 20
    # verify only the prefix of the tree whose expected tokens pay for its verify cost
    # (oilbird.sizing). Off by default: on 10 API-Bank requests it verified ~20% fewer nodes,
    # lost 5-7% of tau and tied on tokens/s (docs/results.md, "Cost-aware tree size")
    cost_aware: bool = False


@dataclass
class DraftInfo:
    """What the drafter did this cycle, for the trace."""
    lexical_match_len: int = 0
    semantic_muted: bool = False
    neighbours: list[dict] = field(default_factory=list)
    spine: list[int] = field(default_factory=list)
    chains: dict[str, list[Chain]] = field(default_factory=dict)
    drafted: int = 0              # nodes drafted before cost-aware sizing cut the tree
    full_tree: DraftTree | None = None   # the tree before the cut (None: not cut)

    def keep_prefix(self, n: int) -> None:
        """Forget node indices >= ``n`` (the tree was cut to its first ``n`` nodes)."""
        self.spine = [i for i in self.spine if i < n]
        for nb in self.neighbours:
            nb["walked"] = [i for i in nb.get("walked", []) if i < n]
            nb["paid"] = [i for i in nb.get("paid", []) if i < n]


def add_chain(tree: DraftTree, chain: Chain, source: str, budget: int) -> tuple[list[int], list[int]]:
    """Merge ``chain`` into ``tree`` below ``chain.attach``, paying at most ``budget`` nodes.

    The chain first re-walks existing nodes (free: it only adds its name to their sources),
    then pays one node per token after it diverges, until the budget runs out.
    Returns (walked node indices, newly paid node indices).

    Example: tree root->A->B, chain [A, B, C, D], budget 1 -> walks A, B (free), pays C;
    D is cut: walked [a, b, c], paid [c].
    """
    walked, paid = [], []
    node = chain.attach
    for tok in chain.tokens:
        nxt = tree.child(node, tok)
        if nxt is None:
            if len(paid) >= budget:
                break
            nxt = tree.add(node, tok, source, chain.score)
            paid.append(nxt)
        else:
            tree.add(node, tok, source, chain.score)   # re-walk: provenance only
        walked.append(nxt)
        node = nxt
    return walked, paid


class Drafter:
    """Builds one merged tree per cycle from its sources and feeds them the verdict."""

    def __init__(self, sources: list[DraftSource], config: TreeConfig | None = None):
        self.cfg = config or TreeConfig()
        if self.cfg.budget < 1:
            raise ValueError("budget must be >= 1 (the root)")
        self.sources = sources
        by = {s.name: s for s in sources}
        self.spine_sources = [by[n] for n in ("suffix", "pld") if n in by]
        self.semantic_sources = [by[n] for n in ("semantic", "rejected") if n in by]
        self.branch_sources = [by[n] for n in ("recycling",) if n in by]
        self.lexical_names = {s.name for s in sources if s.lexical}
        self.spine_share = self.cfg.spine_share
        self.sizer = TreeSizer() if self.cfg.cost_aware else None

    def start_request(self, tokens: list[int], request_id: str) -> None:
        for s in self.sources:
            s.start_request(tokens, request_id)

    def end_request(self, request_id: str) -> None:
        for s in self.sources:
            s.end_request(request_id)

    def draft(self, context: list[int], n_prompt: int, request_id: str,
              query_state: np.ndarray | None) -> tuple[DraftTree, DraftInfo]:
        cfg = self.cfg
        tree = DraftTree.root(context[-1])
        info = DraftInfo()
        q = None
        if query_state is not None:
            n = float(np.linalg.norm(query_state))
            q = (query_state / n).astype(np.float32) if n > 0 else None
        ctx = DraftContext(tokens=context, n_prompt=n_prompt, request_id=request_id,
                           query_state=q, tree=tree)
        left = cfg.budget - 1
        reserved = min(cfg.semantic_budget, left) if self.semantic_sources else 0

        # 1) lexical chains in source order (suffix's best-first subtree, then prompt lookup),
        #    each paying only after it leaves the tree; the first chain is the spine
        lex = []
        lex_budget = round(self.spine_share * (left - reserved)) if self.branch_sources else left - reserved
        ctx.budget = lex_budget
        for s in self.spine_sources:
            chains = info.chains[s.name] = s.propose(ctx)
            lex += [(s.name, c) for c in chains]
            info.lexical_match_len = max([info.lexical_match_len] + [c.meta.get("match_len", 0) for c in chains])
        for i, (name, c) in enumerate(lex):
            if i == 0:
                c = Chain(c.tokens[: cfg.max_spine_len], c.score, c.attach, c.meta)
            walked, paid = add_chain(tree, c, name, lex_budget)
            lex_budget -= len(paid)
            if i == 0:
                info.spine = walked
        # the gate of pass 2: the host's lexical key is the suffix index *and* the token-adjacency
        # table (paper Fig. 2 (i)), so a table row for the root token is a non-empty match too
        adjacency = any(s.knows(context[-1]) for s in self.branch_sources)
        if not self.spine_sources and adjacency:
            info.lexical_match_len = 1     # a Token Recycling host: the table is its only key
        used = len(tree) - 1

        # 2) semantic chains re-walk the tree from the root, paying only after they diverge
        ctx.lexical_match_len = max(info.lexical_match_len, int(adjacency))
        sem_left = min(reserved, cfg.budget - 1 - used)
        for s in self.semantic_sources:
            chains = s.propose(ctx)
            info.chains[s.name] = chains
            if getattr(s, "muted", False):
                info.semantic_muted = True
            for c in sorted(chains, key=lambda c: -c.score):
                walked, paid = add_chain(tree, c, s.name, sem_left) if c.tokens else ([], [])
                sem_left -= len(paid)
                if s.name == "semantic":
                    info.neighbours.append({**c.meta, "walked": walked, "paid": paid})
            if s.name == "semantic" and not chains and s.last_chains:   # muted: still show what it saw
                info.neighbours.extend({**c.meta, "walked": [], "paid": []} for c in s.last_chains)

        # 3) branches fill what is left
        for s in self.branch_sources:
            ctx.budget = cfg.budget - len(tree)
            chains = s.propose(ctx)
            info.chains[s.name] = chains
            for c in sorted(chains, key=lambda c: -c.score):
                room = cfg.budget - len(tree)
                if room <= 0:
                    break
                add_chain(tree, c, s.name, room)

        # 4) cost-aware size: keep the prefix whose expected tokens pay for its verify cost
        info.drafted = len(tree)
        if self.sizer is not None and len(tree) > 1:
            n = self.sizer.choose(tree)
            if n < len(tree):
                info.full_tree = tree
                tree = tree.prefix(n)
                info.keep_prefix(n)
        return tree, info

    def update(self, tree: DraftTree, res, accepted: list[int], bonus: int, tokens: list[int],
               request_id: str, info: DraftInfo, root_index: int, verify_seconds: float | None = None) -> None:
        verdict = Verdict(tree=tree, argmax=res.argmax.numpy(), topk_ids=res.topk_ids.numpy(),
                          topk_probs=res.topk_probs.numpy(), states=res.states.numpy(),
                          accepted=accepted, bonus=bonus, tokens=tokens, request_id=request_id,
                          chains=info.chains, root_index=root_index)
        for s in self.sources:
            s.update(verdict)
        if self.sizer is not None:
            self.sizer.update(info.full_tree or tree, accepted, verdict.argmax, len(tree), verify_seconds)
        # GOOSE anisotropy: the lexical share follows how much of the spine was accepted
        if len(info.spine) > 0:
            acc = len(set(info.spine) & set(accepted)) / len(info.spine)
            a = self.cfg.spine_alpha
            share = (1 - a) * self.spine_share + a * acc
            self.spine_share = min(self.cfg.max_spine_share, max(self.cfg.min_spine_share, share))
