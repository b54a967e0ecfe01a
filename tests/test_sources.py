"""Each draft source pinned on tiny literal token sequences."""
import numpy as np
import pytest

from oilbird.sources.base import DraftContext
from oilbird.sources.prompt_lookup import PromptLookupSource
from oilbird.sources.recycling import RecyclingSource
from oilbird.sources.rejected import RejectedPoolSource
from oilbird.sources.semantic import SemanticConfig, SemanticSource, copy_depth
from oilbird.sources.suffix import SuffixSource
from oilbird.store import SEP, Store, SuffixIndex
from oilbird.tree import DraftTree
from conftest import make_verdict as _verdict

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
def test_request_index_extends_for_the_next_turn_and_rebuilds_otherwise():
    """The next turn of a conversation (a prompt that begins with all that was indexed) is
    indexed incrementally, to the same index a fresh build gives; any other prompt rebuilds."""
    from oilbird.sources._lexical import RequestIndex
    from oilbird.suffix_index import SuffixIndex
    rng = np.random.default_rng(0)
    turn1 = [int(t) for t in rng.integers(0, 6, 300)]
    turn2 = turn1 + [int(t) for t in rng.integers(0, 6, 200)]
    idx = RequestIndex(gram=4)
    idx.reset(turn1)
    idx.sync(turn1 + [1, 2])                  # the answer of turn 1, then turn 2's prompt
    before = idx.index
    idx.reset(turn1 + [1, 2] + turn2[300:])
    fresh = SuffixIndex(gram=4)
    fresh.extend(turn1 + [1, 2] + turn2[300:])
    assert idx.index is before and idx.index.tokens == fresh.tokens and idx.index._grams == fresh._grams
    idx.reset([5, 4, 3])                        # another conversation
    assert idx.index is not before and idx.index.tokens == [5, 4, 3]


def test_prompt_lookup_docstring_example():
    src = PromptLookupSource()
    ctx = [4, 5, 6, 9, 4, 5]
    src.start_request(ctx, "r")
    proposal = src.propose(DraftContext(tokens=ctx, request_id="r"), 0)
    chains = proposal.chains
    assert chains[0].tokens == [6, 9, 4, 5]
    assert proposal.match_len == 2


def test_prompt_lookup_nothing_to_copy():
    src = PromptLookupSource()
    src.start_request([1, 2, 3], "r")
    assert src.propose(DraftContext(tokens=[1, 2, 3], request_id="r"), 0).chains == []


# -- suffix source over the store ---------------------------------------------------------------
def test_suffix_source_weights_continuations_by_count():
    store = Store(dim=D)
    for rid, toks in (("a", [1, 2, 3, 4]), ("b", [1, 2, 3, 5]), ("c", [1, 2, 3, 4])):
        fill(store, rid, toks)
    src = SuffixSource(store)
    ctx = [8, 1, 2, 3]
    src.start_request(ctx, "d")
    proposal = src.propose(DraftContext(tokens=ctx, request_id="d"), 11)
    chains = proposal.chains
    assert chains[0].tokens == [4] and chains[1].tokens == [5]
    assert chains[0].score > chains[1].score
    assert proposal.match_len == 3
    # the budget is the subtree's size: one node is the heavier path's; none at 0, though the
    # match still counts (it opens the semantic key's gate)
    one = src.propose(DraftContext(tokens=ctx, request_id="d"), 1)
    assert [c.tokens for c in one.chains] == [[4]] and one.match_len == 3
    none = src.propose(DraftContext(tokens=ctx, request_id="d"), 0)
    assert none.chains == [] and none.match_len == 3


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
    proposal = src.propose(DraftContext(tokens=ctx, request_id="d"), 3)
    chains = proposal.chains
    assert [c.tokens for c in chains] in ([[7], [8, 8]], [[7], [8, 9]])
    assert proposal.match_len == 9
    assert chains[0].score >= chains[-1].score


def test_suffix_state_temp_lets_the_state_choose_among_equal_occurrences():
    from oilbird.sources.suffix import SuffixConfig
    store = Store(dim=D)
    # three pool occurrences of [1, 2, 3]: two continue with 5, one with 4. By evidence 5 wins
    # (2 to 1); the state before the matched root (token 2's) says the 4 one is this one
    near, far = unit(1, 0, 0, 0), unit(0, 1, 0, 0)
    fill(store, "a", [1, 2, 3, 4], [far, near, far, far])
    fill(store, "b", [1, 2, 3, 5], [far, far, far, far])
    fill(store, "c", [9, 1, 2, 3, 5], [far, far, far, far, far])
    ctx = [7, 1, 2, 3]
    query = unit(1, 0.1, 0, 0)
    plain = SuffixSource(store, SuffixConfig(min_prob=0.0))
    ranked = SuffixSource(store, SuffixConfig(min_prob=0.0, state_temp=0.05))
    for src in (plain, ranked):
        src.start_request(ctx, "d")
    first = [src.propose(DraftContext(tokens=ctx, request_id="d", query_state=query), 2).chains[0].tokens
             for src in (plain, ranked)]
    assert first == [[5], [4]]
    # without a query state the ranked source is the plain one
    assert ranked.propose(DraftContext(tokens=ctx, request_id="d"), 2).chains[0].tokens == [5]
    # the state read back is the record's before the match end (a request's first token has none)
    ends = [p for p, _ in store.suffix.match([1, 2, 3])]
    got = {tuple(np.round(s, 3)) if s is not None else None for s in store.states_before(ends)}
    assert got == {tuple(np.round(near, 3)), tuple(np.round(far, 3))}
    first_tok = [p for p, _ in store.suffix.match([9])]
    assert store.states_before(first_tok) == [None]


# -- token adjacency ------------------------------------------------------------------------------
def test_recycling_refreshes_from_every_node_and_proposes():
    src = RecyclingSource(vocab_size=20)
    tree = DraftTree(tokens=[7, 8], parents=[-1, 0])
    src.update(_verdict(tree, [8, 9], [[8, 3], [9, 4]], [[0.7, 0.2], [0.6, 0.3]]))
    assert src.table[7][:2].tolist() == [8, 3] and src.table[8][:2].tolist() == [9, 4]
    chains = src.propose(DraftContext(tokens=[1, 7], request_id="r", tree=DraftTree.root(7)), 0).chains
    assert chains[0].tokens[:2] == [8, 9]           # its own top-1 spine
    assert [3] == chains[1].tokens[:1]              # the alternative at the root


def test_recycling_later_forward_overwrites_row():
    src = RecyclingSource(vocab_size=20)
    t = DraftTree.root(7)
    src.update(_verdict(t, [8], [[8, 3]], [[0.7, 0.2]]))
    src.update(_verdict(t, [5], [[5, 6]], [[0.9, 0.05]]))
    assert src.table[7][:2].tolist() == [5, 6]


def test_recycling_bigram_table_full_drops_the_row_written_longest_ago():
    from oilbird.sources.recycling import RecyclingConfig
    src = RecyclingSource(vocab_size=20, config=RecyclingConfig(max_bigrams=3))

    def write(parent, child):
        src.update(_verdict(DraftTree(tokens=[parent, child], parents=[-1, 0]), [child, 0],
                            [[child, 1], [2, 3]], [[0.6, 0.3], [0.5, 0.4]]))

    for pair in [(1, 2), (3, 4), (5, 6), (3, 4)]:   # (3, 4) rewritten: the newest row, nothing dropped
        write(*pair)
    assert list(src.bigram) == [(1, 2), (5, 6), (3, 4)]
    write(7, 8)             # full: (1, 2) was written longest ago
    write(9, 10)            # then (5, 6): the rewrite kept (3, 4)
    assert list(src.bigram) == [(3, 4), (7, 8), (9, 10)]


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
    # query equals record 1's state: record 2 (token 12) is our root; propose 13, 14, 15
    chains = src.propose(DraftContext(tokens=[99, 12], request_id="now",
                                      query_state=unit(0, 1, 0, 0), lexical_match_len=1), 0).chains
    best = max(chains, key=lambda c: c.score)
    assert best.meta["record"] == 1 and best.tokens == [13, 14, 15]


def test_semantic_needs_lexical_match_and_entry_floor_and_says_which_held():
    store = _semantic_store()
    src = SemanticSource(store)
    q = unit(0, 1, 0, 0)
    gate = src.propose(DraftContext(tokens=[12], request_id="n", query_state=q, lexical_match_len=0), 0)
    assert (gate.chains, gate.retrieval, gate.floor) == ([], "gate-closed", 0.80)
    far = unit(1, -1, 1, 1)   # best cosine 0.5 < floor 0.8
    low = src.propose(DraftContext(tokens=[12], request_id="n", query_state=far, lexical_match_len=3), 0)
    assert (low.chains, low.retrieval) == ([], "below-floor")
    hit = src.propose(DraftContext(tokens=[12], request_id="n", query_state=q, lexical_match_len=3), 0)
    assert hit.chains and hit.retrieval == "retrieved" and not hit.muted
    empty = SemanticSource(Store(dim=D)).propose(
        DraftContext(tokens=[1], request_id="n", query_state=q, lexical_match_len=3), 0)
    assert (empty.chains, empty.retrieval) == ([], "empty-store")
    none = src.propose(DraftContext(tokens=[1], request_id="n", lexical_match_len=3), 0)
    assert (none.chains, none.retrieval) == ([], "no-query")


def test_ungated_semantic_fires_without_a_lexical_match():
    """``require_lexical=False`` (preset ``oilbird-ungated``) drops only the gate: the same
    chains as the gated source with a match, and still nothing below the entry floor."""
    store = _semantic_store()
    gated = SemanticSource(store).propose(DraftContext(tokens=[12], request_id="n",
                                                       query_state=unit(0, 1, 0, 0), lexical_match_len=1), 0).chains
    src = SemanticSource(store, SemanticConfig(require_lexical=False))
    chains = src.propose(DraftContext(tokens=[12], request_id="n",
                                      query_state=unit(0, 1, 0, 0), lexical_match_len=0), 0).chains
    assert chains and [c.tokens for c in chains] == [c.tokens for c in gated]
    assert src.propose(DraftContext(tokens=[12], request_id="n",
                                    query_state=unit(1, -1, 1, 1), lexical_match_len=0), 0).chains == []


def test_semantic_root_check_keeps_the_neighbours_whose_next_token_is_the_root():
    """The query is the state before the root: the key keeps the ``top_k`` nearest of the records
    whose own next token is the root (``root_check=False``: the plain top-k)."""
    store = Store(dim=D)
    s, near, other = unit(1, 0, 0, 0), unit(1, 0.2, 0, 0), unit(0, 0, 0, 1)
    # "a": record 0 is the query's state, but 11 follows it; "b": a near state, then 12 (our root)
    fill(store, "a", [10, 11, 13, 14], [s, other, other, other])
    fill(store, "b", [20, 12, 15, 16], [near, other, other, other])
    ctx = DraftContext(tokens=[5, 12], request_id="n", query_state=s, lexical_match_len=2)
    plain = SemanticSource(store, SemanticConfig(top_k=1, root_check=False)).propose(ctx, 0).chains
    assert [c.tokens for c in plain] == [[13, 14]]            # the nearest, answering another root
    root = SemanticSource(store, SemanticConfig(top_k=1)).propose(ctx, 0).chains     # the default
    assert [c.tokens for c in root] == [[15, 16]] and root[0].meta["request_id"] == "b"
    # no record continues with the root: nothing to propose, and the lookup says so
    none = SemanticSource(store, SemanticConfig(top_k=1)).propose(
        DraftContext(tokens=[5, 99], request_id="n", query_state=s, lexical_match_len=2), 0)
    assert none.chains == [] and none.retrieval == "no-root-match"


def test_semantic_root_check_is_exact_where_the_cut_loses_the_neighbour():
    """The exact check finds the record followed by the root however many nearer records are
    followed by something else; the first version's cut (``root_widen``: among the
    ``top_k * root_widen`` nearest) does not, once more than that many are nearer."""
    store = Store(dim=D)
    s = unit(1, 0, 0, 0)
    # 6 records nearer to the query than "b"'s, none followed by the root 12
    for i in range(6):
        fill(store, f"a{i}", [10, 11, 13], [unit(1, 0.01 * i, 0, 0), s, s])
    fill(store, "b", [20, 12, 15, 16], [unit(1, 0.3, 0.2, 0), s, s, s])
    ctx = DraftContext(tokens=[5, 12], request_id="n", query_state=s, lexical_match_len=2)
    exact = SemanticSource(store, SemanticConfig(top_k=1)).propose(ctx, 0)
    assert [c.tokens for c in exact.looked_up or exact.chains] == [[15, 16]]
    cut = SemanticSource(store, SemanticConfig(top_k=1, root_widen=4)).propose(ctx, 0)
    assert cut.chains == [] and cut.retrieval == "no-root-match"
    with pytest.raises(ValueError, match="root_widen must be >= 0"):
        SemanticConfig(root_widen=-1)
    wide = SemanticSource(store, SemanticConfig(top_k=1, root_widen=64)).propose(ctx, 0)
    assert [c.meta["record"] for c in wide.looked_up or wide.chains] == \
        [c.meta["record"] for c in exact.looked_up or exact.chains]


def test_semantic_chain_carries_its_context_agreement():
    """Chain.match: our context read backwards from the root against the record's, from its
    successor (our root's counterpart) back: [11, 12] agree with record 1 and its successor,
    [99, 12] only at the root; capped at AGREEMENT_CAP."""
    from oilbird.sources.semantic import AGREEMENT_CAP
    store = _semantic_store()
    src = SemanticSource(store, SemanticConfig(top_k=1))
    q = unit(0, 1, 0, 0)                   # record 1 (token 11); record 2 (12) is the root's counterpart
    for tokens, match in (([99, 12], 1), ([11, 12], 2), ([10, 11, 12], 3), ([7, 10, 11, 12], 3)):
        (c,) = src.propose(DraftContext(tokens=tokens, request_id="n", query_state=q, lexical_match_len=1), 0).chains
        assert c.meta["record"] == 1 and c.tokens == [13, 14, 15] and c.match == match, tokens
    long = Store(dim=D)
    run = list(range(100, 100 + 2 * AGREEMENT_CAP))
    fill(long, "past", run + [7, 8, 9], [unit(0, 1, 0, 0)] * len(run) + [unit(1, 0, 0, 0)] * 3)
    (c,) = SemanticSource(long, SemanticConfig(top_k=1)).propose(
        DraftContext(tokens=run + [7, 8], request_id="n", query_state=unit(1, 0, 0, 0), lexical_match_len=1), 0).chains
    assert c.tokens == [9] and c.match == AGREEMENT_CAP


def test_lexical_chains_carry_their_match_length():
    """The suffix source's chains carry the longest context match behind their path; prompt
    lookup's the n-gram it matched."""
    store = Store(dim=D)
    fill(store, "a", [1, 2, 3, 4, 5, 6, 7])    # [1 .. 6] then 7: a 6-token match
    fill(store, "b", [9, 2, 3, 4, 5, 6, 8])    # [2 .. 6] then 8: a 5-token match
    src = SuffixSource(store)
    ctx = [0, 1, 2, 3, 4, 5, 6]
    src.start_request(ctx, "d")
    chains = src.propose(DraftContext(tokens=ctx, request_id="d"), 11).chains
    assert {tuple(c.tokens): c.match for c in chains} == {(7,): 6, (8,): 5}
    pld = PromptLookupSource()
    toks = [4, 5, 6, 9, 4, 5]
    pld.start_request(toks, "r")
    assert [c.match for c in pld.propose(DraftContext(tokens=toks, request_id="r"), 0).chains] == [2]


def test_semantic_self_calibration_mutes_and_recovers():
    store = _semantic_store()
    src = SemanticSource(store, SemanticConfig(calib_alpha=0.5, mute_below=0.3, unmute_above=0.6))
    ctx = DraftContext(tokens=[99, 12], request_id="now", query_state=unit(0, 1, 0, 0),
                       lexical_match_len=1)
    tree = DraftTree.root(12)

    def step(next_token):
        src.propose(ctx, 0)
        v = _verdict(tree, [next_token], [[next_token]], [[1.0]], tokens=[99, 12, next_token])
        v.root_index = 1
        src.update(v)

    step(50)   # wrong first token: ema 0.5
    step(50)   # 0.25 -> muted
    muted = src.propose(ctx, 0)
    assert src.muted and muted.chains == [] and muted.retrieval == "muted" and muted.muted
    assert [c.meta["record"] for c in muted.looked_up] == [c.meta["record"] for c in src.last_chains]
    step(13)   # shadow hit: 0.625 -> unmuted
    assert not src.muted and src.propose(ctx, 0).chains


# -- rejected-branch pool ------------------------------------------------------------------------------
def test_rejected_pool_docstring_example_and_lookup():
    src = RejectedPoolSource(dim=D)
    # root 1 (accepted) -> r (token 5, rejected) -> c (token 9); argmax(r)=9, argmax(c)=2
    tree = DraftTree(tokens=[1, 5, 9], parents=[-1, 0, 1])
    states = np.stack([unit(1, 0, 0, 0), unit(0, 1, 0, 0), unit(0, 0, 1, 0)])
    src.update(_verdict(tree, [7, 9, 2], [[7], [9], [2]], [[1.0]] * 3, states=states, accepted=[0]))
    # r's key is (state of its parent = root, token 5) -> [9, 2]; c is keyed on r's state
    chains = src.propose(DraftContext(tokens=[3, 5], request_id="x", query_state=unit(1, 0, 0, 0)), 0).chains
    assert chains[0].tokens == [9, 2]
    assert src.propose(DraftContext(tokens=[3, 6], request_id="x", query_state=unit(1, 0, 0, 0)), 0).chains == []


# -- tenants -----------------------------------------------------------------------------------------
def test_tenant_isolation_secret_never_drafted_for_another_tenant():
    secret = [900, 901, 902]
    a, b = Store(dim=D, tenant="a"), Store(dim=D, tenant="b")
    frame = [10, 11, 12]
    fill(a, "a1", frame + secret + [13], [unit(1, i, 0, 0) for i in range(7)])
    fill(b, "b1", frame + [500, 501, 502, 13], [unit(1, i, 0, 0) for i in range(7)])
    ctx = DraftContext(tokens=[1] + frame, request_id="b2", query_state=unit(1, 2, 0, 0),
                       lexical_match_len=3)
    for src in (SuffixSource(b), SemanticSource(b)):
        src.start_request(ctx.tokens, "b2")
        proposed = {t for c in src.propose(ctx, 11).chains for t in c.tokens}
        assert proposed and not proposed & set(secret)
    # the same query on tenant a does reach the secret (the test can fail)
    sa = SuffixSource(a)
    sa.start_request(ctx.tokens, "a2")
    assert set(secret) & {t for c in sa.propose(ctx, 11).chains for t in c.tokens}


def test_make_sources_builds_live_sources_over_the_registry_it_is_given():
    """"live" is a source name like the others: two requests' sources made with one registry
    draft from each other; one made without a registry has nobody to copy from."""
    from types import SimpleNamespace
    from oilbird.presets import make_sources
    from oilbird.sources.live import LiveOutputs
    store = Store(dim=4)
    reg = LiveOutputs()
    a, b = (make_sources(["live"], store, 4, 0, shared={"live-outputs": reg})[0] for _ in range(2))
    a.start_request([1, 2], "a")
    b.start_request([1, 2], "b")
    a.update(SimpleNamespace(tokens=[1, 2, 5, 6, 7, 8]))   # a has generated 5 6 7 8 (its verdict's tokens)
    prop = b.propose(DraftContext(tokens=[1, 2, 5, 6], request_id="b"), 8)
    assert [c.tokens for c in prop.chains] == [[7, 8]]
    alone = make_sources(["live"], store, 4, 0)[0]
    alone.start_request([1, 2], "c")
    assert alone.propose(DraftContext(tokens=[1, 2, 5, 6], request_id="c"), 8).chains == []
    with pytest.raises(ValueError, match="unknown draft source 'lively'"):
        make_sources(["lively"], store, 4, 0)
