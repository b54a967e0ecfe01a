"""Each draft source pinned on tiny literal token sequences."""
import numpy as np
import pytest

from oilbird.drafter import Drafter, TreeConfig
from oilbird.sources.base import Chain, DraftContext, DraftSource, Verdict
from oilbird.sources.prompt_lookup import PromptLookupSource
from oilbird.sources.recycling import RecyclingSource
from oilbird.sources.rejected import RejectedPoolSource
from oilbird.sources.semantic import SemanticConfig, SemanticSource, copy_depth
from oilbird.sources.suffix import SuffixSource
from oilbird.store import SEP, Store, SuffixIndex
from oilbird.tree import DraftTree

D = 4


def unit(*v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def fill(store: Store, request_id: str, tokens: list[int], states=None):
    for i, t in enumerate(tokens):
        store.add(request_id, i, t, None if states is None else states[i])
    store.end_request()


# -- suffix index ------------------------------------------------------------------------------
def test_suffix_index_docstring_example():
    ix = SuffixIndex(gram=4)
    ix.extend([5, 6, 7, 5, 6, 8])
    hits = ix.match([9, 5, 6])
    assert sorted(hits) == [(1, 2), (4, 2)]
    assert ix.continuation(1, 10) == [7, 5, 6, 8]
    assert ix.continuation(4, 10) == [8]


def test_suffix_index_backs_off_to_shorter_suffix():
    ix = SuffixIndex(gram=4)
    ix.extend([1, 2, 3, 4, SEP, 9, 3, 4, 7])
    # [8, 3, 4]: "8 3 4" never occurs, "3 4" does twice
    hits = ix.match([8, 3, 4])
    assert {p for p, _ in hits} == {3, 7} and all(L == 2 for _, L in hits)


def test_suffix_index_extends_beyond_gram_exactly():
    ix = SuffixIndex(gram=2)
    ix.extend([1, 2, 3, 4, 5, 0, 9, 4, 5, 6])
    hits = ix.match([2, 3, 4, 5], max_len=16)
    assert hits[0] == (4, 4)        # longest first: "2 3 4 5" ends at 4
    assert (8, 2) in hits           # "4 5" elsewhere matches only 2


def test_continuation_stops_at_request_boundary():
    ix = SuffixIndex()
    ix.extend([1, 2, SEP, 3])
    assert ix.continuation(0, 5) == [2]


# -- prompt lookup ------------------------------------------------------------------------------
def test_prompt_lookup_docstring_example():
    src = PromptLookupSource()
    ctx = [4, 5, 6, 9, 4, 5]
    src.start_request(ctx, "r")
    chains = src.propose(DraftContext(tokens=ctx, n_prompt=6, request_id="r"))
    assert chains[0].tokens == [6, 9, 4, 5]
    assert chains[0].meta["match_len"] == 2


def test_prompt_lookup_nothing_to_copy():
    src = PromptLookupSource()
    src.start_request([1, 2, 3], "r")
    assert src.propose(DraftContext(tokens=[1, 2, 3], n_prompt=3, request_id="r")) == []


# -- suffix source over the store ---------------------------------------------------------------
def test_suffix_source_weights_continuations_by_count():
    store = Store(dim=D)
    for rid, toks in (("a", [1, 2, 3, 4]), ("b", [1, 2, 3, 5]), ("c", [1, 2, 3, 4])):
        fill(store, rid, toks)
    src = SuffixSource(store)
    ctx = [8, 1, 2, 3]
    src.start_request(ctx, "d")
    chains = src.propose(DraftContext(tokens=ctx, n_prompt=4, request_id="d"))
    assert chains[0].tokens == [4] and chains[1].tokens == [5]
    assert chains[0].score > chains[1].score
    assert chains[0].meta["match_len"] == 3


def _trie(paths):
    """A weighted continuation trie from ``[(tokens, weight)]``."""
    from oilbird.sources.suffix import _Node
    root = _Node()
    for toks, w in paths:
        node = root
        node.w += w
        for t in toks:
            node = node.kids.setdefault(t, _Node())
            node.w += w
    return root


def test_best_first_keeps_the_heaviest_subtree_and_branches_where_evidence_splits():
    from oilbird.sources.suffix import best_first
    root = _trie([([1, 2, 3, 4, 5], 3.0), ([1, 2, 3, 4, 6], 3.0), ([7, 8, 9], 4.0)])
    # shares: 1,2,3,4: 0.6; 7,8,9: 0.4; 5, 6: 0.3 each. Budget 6 takes the 0.6 path, then the
    # 0.4 path's nodes, never 5 or 6: a single most-frequent path would have spent all 6 on 1..6
    paths = best_first(root, 6, 0.0)
    assert paths == [([1, 2, 3, 4], pytest.approx(0.6)), ([7, 8], pytest.approx(0.4))]
    assert sum(len(p) for p, _ in paths) == 6
    # a large budget keeps every node once, heavier child first (5 and 6 tie: insertion order)
    full = best_first(root, 100, 0.0)
    assert [p for p, _ in full] == [[1, 2, 3, 4, 5], [1, 2, 3, 4, 6], [7, 8, 9]]
    # min_share cuts the light nodes; budget 0 or an empty trie give nothing
    assert [p for p, _ in best_first(root, 100, 0.35)] == [[1, 2, 3, 4], [7, 8, 9]]
    assert best_first(root, 0, 0.0) == [] and best_first(_trie([]), 5, 0.0) == []


def test_suffix_source_weights_occurrences_by_match_length_and_fits_the_budget():
    from oilbird.sources.suffix import SuffixConfig
    store = Store(dim=D)
    # one occurrence of the whole 9-token context continues with 7; two occurrences that match
    # only its last 4 tokens continue with 8: weight 9 vs 4 + 4, so 7 is not outvoted
    # (counting occurrences alone, 8 would win 2 to 1)
    ctx = [20, 21, 22, 23, 24, 1, 2, 3, 4]
    for rid, toks in (("a", ctx + [7]), ("b", [5, 1, 2, 3, 4, 8, 8]), ("c", [6, 1, 2, 3, 4, 8, 9])):
        fill(store, rid, toks)
    src = SuffixSource(store, SuffixConfig(min_prob=0.0))
    src.start_request(ctx, "d")
    chains = src.propose(DraftContext(tokens=ctx, n_prompt=len(ctx), request_id="d", budget=3))
    assert [c.tokens for c in chains] in ([[7], [8, 8]], [[7], [8, 9]])
    assert chains[0].meta["match_len"] == 9
    assert chains[0].score >= chains[-1].score


# -- token adjacency ------------------------------------------------------------------------------
def _verdict(tree, argmax, topk_ids, topk_probs, states=None, accepted=(0,), tokens=(0,)):
    n = len(tree)
    return Verdict(tree=tree, argmax=np.asarray(argmax), topk_ids=np.asarray(topk_ids),
                   topk_probs=np.asarray(topk_probs, dtype=np.float32),
                   states=np.asarray(states if states is not None else np.ones((n, D)), dtype=np.float32),
                   accepted=list(accepted), bonus=int(argmax[accepted[-1]]), tokens=list(tokens),
                   request_id="r")


def test_recycling_refreshes_from_every_node_and_proposes():
    src = RecyclingSource(vocab_size=20)
    tree = DraftTree(tokens=[7, 8], parents=[-1, 0])
    src.update(_verdict(tree, [8, 9], [[8, 3], [9, 4]], [[0.7, 0.2], [0.6, 0.3]]))
    assert src.table[7][:2].tolist() == [8, 3] and src.table[8][:2].tolist() == [9, 4]
    chains = src.propose(DraftContext(tokens=[1, 7], n_prompt=1, request_id="r", tree=DraftTree.root(7)))
    assert chains[0].tokens[:2] == [8, 9]           # its own top-1 spine
    assert [3] == chains[1].tokens[:1]              # the alternative at the root


def test_recycling_later_forward_overwrites_row():
    src = RecyclingSource(vocab_size=20)
    t = DraftTree.root(7)
    src.update(_verdict(t, [8], [[8, 3]], [[0.7, 0.2]]))
    src.update(_verdict(t, [5], [[5, 6]], [[0.9, 0.05]]))
    assert src.table[7][:2].tolist() == [5, 6]


# -- semantic source --------------------------------------------------------------------------------
@pytest.mark.parametrize("sim,depth", [(0.95, 48), (0.90, 48), (0.85, 8), (0.82, 8), (0.81, 0)])
def test_copy_depth_by_similarity(sim, depth):
    assert copy_depth(sim) == depth


def _semantic_store():
    store = Store(dim=D)
    # past request: tokens 10 11 12 13 14 15 with states; record 1 has state e1
    states = [unit(1, 0, 0, 0), unit(0, 1, 0, 0), unit(0, 0, 1, 0), unit(0, 0, 0, 1),
              unit(1, 1, 0, 0), unit(0, 1, 1, 0)]
    fill(store, "past", [10, 11, 12, 13, 14, 15], states)
    return store


def test_semantic_lag_neighbour_at_i_proposes_from_i_plus_2():
    store = _semantic_store()
    src = SemanticSource(store)
    # query equals record 1's state: record 2 (token 12) plays our root; propose 13, 14, 15
    chains = src.propose(DraftContext(tokens=[99, 98], n_prompt=1, request_id="now",
                                      query_state=unit(0, 1, 0, 0), lexical_match_len=1))
    best = max(chains, key=lambda c: c.score)
    assert best.meta["record"] == 1 and best.tokens == [13, 14, 15]


def test_semantic_needs_lexical_match_and_entry_floor():
    store = _semantic_store()
    src = SemanticSource(store)
    q = unit(0, 1, 0, 0)
    assert src.propose(DraftContext(tokens=[1], n_prompt=1, request_id="n", query_state=q,
                                    lexical_match_len=0)) == []
    far = unit(1, -1, 1, 1)   # best cosine 0.5 < floor 0.8
    assert src.propose(DraftContext(tokens=[1], n_prompt=1, request_id="n", query_state=far,
                                    lexical_match_len=3)) == []


def test_ungated_semantic_fires_without_a_lexical_match():
    """``require_lexical=False`` (preset ``oilbird-ungated``) drops only the gate: the same
    chains as the gated source with a match, and still nothing below the entry floor."""
    store = _semantic_store()
    gated = SemanticSource(store).propose(DraftContext(tokens=[1], n_prompt=1, request_id="n",
                                                       query_state=unit(0, 1, 0, 0), lexical_match_len=1))
    src = SemanticSource(store, SemanticConfig(require_lexical=False))
    chains = src.propose(DraftContext(tokens=[1], n_prompt=1, request_id="n",
                                      query_state=unit(0, 1, 0, 0), lexical_match_len=0))
    assert chains and [c.tokens for c in chains] == [c.tokens for c in gated]
    assert src.propose(DraftContext(tokens=[1], n_prompt=1, request_id="n",
                                    query_state=unit(1, -1, 1, 1), lexical_match_len=0)) == []


def test_semantic_self_calibration_mutes_and_recovers():
    store = _semantic_store()
    src = SemanticSource(store, SemanticConfig(calib_alpha=0.5, mute_below=0.3, unmute_above=0.6))
    ctx = DraftContext(tokens=[99, 98], n_prompt=1, request_id="now", query_state=unit(0, 1, 0, 0),
                       lexical_match_len=1)
    tree = DraftTree.root(98)

    def step(next_token):
        src.propose(ctx)
        v = _verdict(tree, [next_token], [[next_token]], [[1.0]], tokens=[99, 98, next_token])
        v.root_index = 1
        src.update(v)

    step(50)   # wrong first token: ema 0.5
    step(50)   # 0.25 -> muted
    assert src.muted and src.propose(ctx) == []
    step(13)   # shadow hit: 0.625 -> unmuted
    assert not src.muted and src.propose(ctx)


# -- rejected-branch pool ------------------------------------------------------------------------------
def test_rejected_pool_docstring_example_and_lookup():
    src = RejectedPoolSource(dim=D)
    # root 1 (accepted) -> r (token 5, rejected) -> c (token 9); argmax(r)=9, argmax(c)=2
    tree = DraftTree(tokens=[1, 5, 9], parents=[-1, 0, 1])
    states = np.stack([unit(1, 0, 0, 0), unit(0, 1, 0, 0), unit(0, 0, 1, 0)])
    src.update(_verdict(tree, [7, 9, 2], [[7], [9], [2]], [[1.0]] * 3, states=states, accepted=[0]))
    # r's key is (state of its parent = root, token 5) -> [9, 2]; c is keyed on r's state
    chains = src.propose(DraftContext(tokens=[3, 5], n_prompt=1, request_id="x", query_state=unit(1, 0, 0, 0)))
    assert chains[0].tokens == [9, 2]
    assert src.propose(DraftContext(tokens=[3, 6], n_prompt=1, request_id="x", query_state=unit(1, 0, 0, 0))) == []


# -- tenants -----------------------------------------------------------------------------------------
def test_tenant_isolation_secret_never_drafted_for_another_tenant():
    secret = [900, 901, 902]
    a, b = Store(dim=D, tenant="a"), Store(dim=D, tenant="b")
    frame = [10, 11, 12]
    fill(a, "a1", frame + secret + [13], [unit(1, i, 0, 0) for i in range(7)])
    fill(b, "b1", frame + [500, 501, 502, 13], [unit(1, i, 0, 0) for i in range(7)])
    ctx = DraftContext(tokens=[1] + frame, n_prompt=1, request_id="b2", query_state=unit(1, 2, 0, 0),
                       lexical_match_len=3)
    for src in (SuffixSource(b), SemanticSource(b)):
        src.start_request(ctx.tokens, "b2")
        proposed = {t for c in src.propose(ctx) for t in c.tokens}
        assert proposed and not proposed & set(secret)
    # the same query on tenant a does reach the secret (the test can fail)
    sa = SuffixSource(a)
    sa.start_request(ctx.tokens, "a2")
    assert set(secret) & {t for c in sa.propose(ctx) for t in c.tokens}


# -- merged tree -----------------------------------------------------------------------------------------
# the pass each built-in source declares, so a stub named like one is drafted where it would be
ROLE_OF = {c.name: c.role for c in (PromptLookupSource, SuffixSource, RecyclingSource, SemanticSource,
                                    RejectedPoolSource)}


class _Fixed:
    """A stub source returning fixed chains."""
    lexical = True

    def __init__(self, name, chains):
        self.name, self._chains = name, chains
        self.role = ROLE_OF.get(name, "spine")
        self.muted = False

    def start_request(self, *a):
        pass

    def end_request(self, *a):
        pass

    def propose(self, ctx):
        return self._chains

    def knows(self, tok):
        return False

    def update(self, v):
        pass


def test_drafter_semantic_chain_rewalks_spine_and_respects_budgets():
    from oilbird.sources.base import Chain
    spine = _Fixed("suffix", [Chain([5, 6, 7], 0.9, meta={"match_len": 4})])
    sem = _Fixed("semantic", [Chain([5, 6, 8, 9, 10, 11], 0.95,
                                    meta={"record": 0, "request_id": "p", "position": 0,
                                          "similarity": 0.95, "proposed": [5, 6, 8, 9, 10, 11]})])
    sem.lexical = False
    d = Drafter([spine, sem], TreeConfig(budget=8, semantic_budget=3))
    tree, info = d.draft([1, 2], 1, "r", np.ones(D, dtype=np.float32))
    assert len(tree) <= 8
    # spine 5 6 7 (3 nodes); semantic re-walks 5 6 for free and pays 8 9 10 (3 = its budget)
    assert tree.tokens == [2, 5, 6, 7, 8, 9, 10]
    assert info.neighbours[0]["paid"] == [4, 5, 6] and info.neighbours[0]["walked"] == [1, 2, 4, 5, 6]
    assert tree.sources[1] == {"suffix", "semantic"}


def test_drafter_gives_suffix_the_lexical_budget_and_keeps_source_order():
    """The suffix source sizes its subtree to the lexical budget it is told; its first path is
    the spine even when a prompt-lookup chain scores higher, and that chain pays only where
    it leaves the suffix subtree."""
    from oilbird.sources.base import Chain

    class _Sized(_Fixed):
        def propose(self, ctx):
            self.budget_seen = ctx.budget
            return self._chains

    suffix = _Sized("suffix", [Chain([5, 6], 0.5, meta={"match_len": 4}), Chain([7], 0.3)])
    pld = _Fixed("pld", [Chain([5, 6, 8, 9], 1.0, meta={"match_len": 2})])
    d = Drafter([suffix, pld], TreeConfig(budget=7, semantic_budget=0))
    tree, info = d.draft([1, 2], 1, "r", None)
    assert suffix.budget_seen == 6                       # no branch source: all of budget - 1
    assert tree.tokens == [2, 5, 6, 7, 8, 9] and info.spine == [1, 2]
    assert tree.sources[1] == {"suffix", "pld"} and tree.sources[4] == {"pld"}


def test_adjacency_row_for_the_root_opens_the_semantic_gate():
    """No suffix match, but the token-adjacency table has a row for the root token: the lexical
    key matched (paper Fig. 2), so the semantic key may fire; without the row it may not."""
    class _Seen(_Fixed):
        last_chains: list = []

        def propose(self, ctx):
            self.gate = ctx.lexical_match_len
            return []

    for known in (True, False):
        rec = RecyclingSource(vocab_size=20)
        if known:
            rec.update(_verdict(DraftTree(tokens=[7], parents=[-1]), [8], [[8]], [[0.9]]))
        sem = _Seen("semantic", [])
        sem.lexical = False
        d = Drafter([_Fixed("suffix", []), rec, sem], TreeConfig(budget=6, semantic_budget=2))
        _, info = d.draft([3, 7], 1, "r", np.ones(D, dtype=np.float32))
        assert rec.knows(7) is known
        assert sem.gate == int(known) and info.lexical_match_len == 0


def test_fill_by_value_docstring_example_and_prefixes_are_trees():
    from oilbird.drafter import fill_by_value
    from oilbird.acceptance import AcceptanceRates
    from oilbird.sources.base import Chain
    tree = DraftTree.root(1)
    a = tree.add(0, 10, "suffix", 1.0)
    rates = AcceptanceRates()
    sem, rec = Chain([10, 11], 0.9), Chain([20], 0.5)
    (w_sem, p_sem), (w_rec, p_rec) = fill_by_value(tree, [("semantic", sem), ("recycling", rec)], 1, rates)
    assert w_sem == [a] and p_sem == [] and p_rec == [2] and tree.tokens == [1, 10, 20]
    assert tree.sources[a] == {"suffix", "semantic"}            # the free re-walk leaves provenance

    # learned rates decide: semantic nodes at depth 2 always accepted, adjacency at depth 1 never
    for _ in range(30):
        t = DraftTree([1, 10, 11, 20], [-1, 0, 1, 0], [set(), {"suffix"}, {"semantic"}, {"recycling"}])
        rates.observe(t, [0, 1, 2], argmax=[10, 11, 0, 0])
    tree = DraftTree.root(1)
    tree.add(0, 10, "suffix", 1.0)
    chains = [("recycling", Chain([20, 21], 0.5)), ("semantic", Chain([10, 11, 12], 0.9))]
    (_, p_rec), (_, p_sem) = fill_by_value(tree, chains, 2, rates)
    assert p_rec == [] and tree.tokens[2:] == [11, 12]           # both nodes to the semantic chain
    # a parent always comes first
    assert all(p < i for i, p in enumerate(tree.parents) if i)
    assert rates.path_probs(tree)[2] > rates.path_probs(DraftTree([1, 20], [-1, 0], [set(), {"recycling"}]))[1]


def test_acceptance_cells_split_by_score_bin():
    """With score bins, a likely adjacency candidate (p 0.6) and an unlikely one (p 0.05) learn
    separate rates, so the fill can prefer the first; without bins they share one cell."""
    from oilbird.acceptance import AcceptanceRates
    binned, flat = AcceptanceRates(score_bins=(0.5, 0.2)), AcceptanceRates()
    t = DraftTree([1, 8, 9], [-1, 0, 0], [set(), {"recycling"}, {"recycling"}],
                  [{}, {"recycling": 0.6}, {"recycling": 0.05}])
    for r in (binned, flat):
        for _ in range(10):
            r.observe(t, [0, 1], argmax=[8, 0, 0])     # the likely one is always the answer
    hi, lo = binned.cell({"recycling"}, 1, 0.6), binned.cell({"recycling"}, 1, 0.05)
    assert hi != lo and binned.rate(hi) > 0.9 and binned.rate(lo) < 0.1
    assert flat.cell({"recycling"}, 1, 0.6) == flat.cell({"recycling"}, 1, 0.05)
    assert flat.rate(flat.cell({"recycling"}, 1)) == pytest.approx(0.5)


def test_expected_fill_lets_a_semantic_chain_take_more_than_the_reservation():
    """fill="expected": no nodes are reserved; where the semantic chain is worth more than the
    adjacency branches (learned), it takes them; in "reserved" mode it stops at semantic_budget."""
    from oilbird.sources.base import Chain
    sem_chain = Chain([5, 6, 7, 8], 0.95, meta={"record": 0})
    trees = {}
    for fill in ("reserved", "expected"):
        sem = _Fixed("semantic", [sem_chain])
        sem.lexical = False
        rec = _Fixed("recycling", [Chain([30 + k], 0.2, attach=0) for k in range(6)])
        d = Drafter([_Fixed("suffix", [Chain([4], 1.0, meta={"match_len": 3})]), sem, rec],
                    TreeConfig(budget=8, semantic_budget=2, fill=fill))
        if fill == "expected":
            for _ in range(30):   # semantic nodes were accepted, adjacency branches never
                t = DraftTree([3, 4, 5, 6, 30], [-1, 0, 0, 2, 0], [set(), {"suffix"}, {"semantic"},
                                                                   {"semantic"}, {"recycling"}],
                              [{}, {"suffix": 1.0}, {"semantic": 0.95}, {"semantic": 0.95}, {"recycling": 0.2}])
                d.rates.observe(t, [0, 2, 3], argmax=[5, 0, 6, 0, 0])
        tree, info = d.draft([1, 3], 1, "r", np.ones(D, dtype=np.float32))
        assert len(tree) == 8
        trees[fill] = sum("semantic" in s for s in tree.sources)
        assert info.neighbours[0]["paid"] == [i for i, s in enumerate(tree.sources) if "semantic" in s]
    assert trees == {"reserved": 2, "expected": 4}


# -- a source of one's own: routed by its declared role, checked where it errs -----------------

class _OneChain(DraftSource):
    """Proposes one fixed chain from the root; remembers the budgets it was offered."""

    def __init__(self, name, tokens, role="spine", attach=0):
        self.name, self.role, self.tokens, self.attach, self.budgets = name, role, tokens, attach, []

    def propose(self, ctx):
        self.budgets.append(ctx.budget)
        return [Chain(list(self.tokens), 1.0, self.attach)]


@pytest.mark.parametrize("role, pass_budget", [("spine", 11), ("chains", 2)])
def test_a_new_source_is_asked_in_the_pass_its_role_names(role, pass_budget):
    """Any name works: the role, not the name, decides the pass; ctx.budget is that pass's."""
    mine = _OneChain("oracle", [5, 6, 7], role)
    tree, info = Drafter([mine], TreeConfig(budget=12, semantic_budget=2)).draft([1, 2, 3], 2, "r", None)
    assert mine.budgets == [pass_budget]
    assert info.chains["oracle"] and {"oracle"} in tree.sources
    assert tree.tokens[1:] == [5, 6, 7][:min(3, pass_budget)]


def test_sources_that_cannot_be_routed_or_merged_are_refused():
    with pytest.raises(ValueError, match="two draft sources named 'pld'"):
        Drafter([PromptLookupSource(), PromptLookupSource()])
    with pytest.raises(ValueError, match="role 'extender'; a role is one of spine, chains, branches"):
        Drafter([_OneChain("x", [5], role="extender")])
    with pytest.raises(ValueError, match="a 'x' chain attaches below node 4, but the tree has 1 nodes"):
        Drafter([_OneChain("x", [5], attach=4)]).draft([1, 2, 3], 2, "r", None)
    for tokens, parents in (([1, 2], [0, 0]), ([1, 2, 3], [-1, 2, 0]), ([1, 2], [-1, -1])):
        with pytest.raises(ValueError, match="root|earlier node"):
            DraftTree(tokens=tokens, parents=parents)
