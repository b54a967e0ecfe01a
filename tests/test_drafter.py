"""The merged tree (oilbird.drafter): passes, budgets, fills, and what each cycle records."""
import numpy as np
import pytest

from oilbird.drafter import Drafter, TreeConfig
from oilbird.sources.base import Chain, DraftSource, Proposal
from oilbird.sources.prompt_lookup import PromptLookupSource
from oilbird.sources.recycling import RecyclingSource
from oilbird.sources.rejected import RejectedPoolSource
from oilbird.sources.semantic import SemanticSource
from oilbird.sources.suffix import SuffixSource
from oilbird.tree import DraftTree
from conftest import make_verdict as _verdict

D = 4


# the pass each built-in source declares, so a stub named like one is drafted where it would be
ROLE_OF = {c.name: c.role for c in (PromptLookupSource, SuffixSource, RecyclingSource, SemanticSource,
                                    RejectedPoolSource)}


class _Fixed(DraftSource):
    """A stub source returning fixed chains; named like a built-in one, it takes that one's
    pass and, for "semantic", retrieves (its chains' meta are neighbour records)."""

    def __init__(self, name, chains, match_len=0):
        self.name, self._chains, self.match_len = name, chains, match_len
        self.role = ROLE_OF.get(name, "spine")
        self.retrieves = name == "semantic"

    def propose(self, ctx, budget):
        return Proposal(self._chains, match_len=self.match_len,
                        retrieval="retrieved" if self.retrieves else None)


def test_drafter_semantic_chain_rewalks_spine_and_respects_budgets():
    from oilbird.sources.base import Chain
    spine = _Fixed("suffix", [Chain([5, 6, 7], 0.9)], match_len=4)
    sem = _Fixed("semantic", [Chain([5, 6, 8, 9, 10, 11], 0.95,
                                    meta={"record": 0, "request_id": "p", "position": 0,
                                          "similarity": 0.95, "proposed": [5, 6, 8, 9, 10, 11]})])
    d = Drafter([spine, sem], TreeConfig(budget=8, semantic_budget=3))
    tree, info = d.draft([1, 2], "r", np.ones(D, dtype=np.float32))
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
        def propose(self, ctx, budget):
            self.budget_seen = budget
            return super().propose(ctx, budget)

    suffix = _Sized("suffix", [Chain([5, 6], 0.5), Chain([7], 0.3)], match_len=4)
    pld = _Fixed("pld", [Chain([5, 6, 8, 9], 1.0)], match_len=2)
    d = Drafter([suffix, pld], TreeConfig(budget=7, semantic_budget=0))
    tree, info = d.draft([1, 2], "r", None)
    assert suffix.budget_seen == 6                       # no branch source: all of budget - 1
    assert tree.tokens == [2, 5, 6, 7, 8, 9] and info.spine == [1, 2]
    assert tree.sources[1] == {"suffix", "pld"} and tree.sources[4] == {"pld"}


def test_adjacency_row_for_the_root_opens_the_semantic_gate():
    """No suffix match, but the token-adjacency table has a row for the root token: the lexical
    key matched (paper Fig. 2), so the semantic key may fire; without the row it may not."""
    class _Seen(_Fixed):
        def propose(self, ctx, budget):
            self.gate = ctx.lexical_match_len
            return Proposal()

    for known in (True, False):
        rec = RecyclingSource(vocab_size=20)
        if known:
            rec.update(_verdict(DraftTree(tokens=[7], parents=[-1]), [8], [[8]], [[0.9]]))
        sem = _Seen("semantic", [])
        d = Drafter([_Fixed("suffix", []), rec, sem], TreeConfig(budget=6, semantic_budget=2))
        _, info = d.draft([3, 7], "r", np.ones(D, dtype=np.float32))
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


def test_fill_by_value_reports_its_prices():
    """The docstring's example, priced: every node's chance (the root 1, C at the unseen rate
    0.5), the last node taken (C: 0.5) and, per chain, its first token left out (B: P(A) * 0.5;
    the adjacency chain lost nothing)."""
    from oilbird.drafter import FillPrices, fill_by_value
    from oilbird.acceptance import AcceptanceRates
    from oilbird.sources.base import Chain
    rates = AcceptanceRates()
    tree = DraftTree.root(1)
    tree.add(0, 10, "suffix", 1.0)
    prices = FillPrices()
    fill_by_value(tree, [("semantic", Chain([10, 11], 0.9)), ("recycling", Chain([20], 0.5))], 1, rates, prices)
    p_a = rates.path_probs(DraftTree([1, 10], [-1, 0], [set(), {"suffix"}]))[1]
    assert prices.nodes == pytest.approx([1.0, p_a, 0.5]) and len(prices.nodes) == len(tree)
    assert prices.bar == pytest.approx(0.5) and prices.left_out == pytest.approx([p_a * 0.5, None])
    assert prices.start == 2                                   # root and A were there before the fill
    # no room: the fill added nothing, so nothing lost a contest (the head took every node)
    nothing = FillPrices()
    fill_by_value(DraftTree.root(1), [("semantic", Chain([7], 0.9))], 0, rates, nothing)
    assert nothing.bar is None and nothing.left_out == [None] and nothing.start == 1
    # learned rates (semantic depth 1 always right, adjacency never; semantic depth 2 unseen, 0.5):
    # room 2 takes the semantic chain, 10 (40/41: the first verdict was cold) then 11 (40/41 * 0.5);
    # the bar is the last added
    for _ in range(40):
        t = DraftTree([1, 10, 20], [-1, 0, 0], [set(), {"semantic"}, {"recycling"}])
        rates.observe(t, [0, 1], argmax=[10, 0, 0])
    tree = DraftTree.root(1)
    two = FillPrices()
    chains = [("semantic", Chain([10, 11], 0.9)), ("recycling", Chain([20], 0.5)), ("recycling", Chain([21], 0.5))]
    fill_by_value(tree, chains, 2, rates, two)
    assert tree.tokens == [1, 10, 11]
    assert two.nodes == pytest.approx([1.0, 40 / 41, 20 / 41]) and two.bar == pytest.approx(20 / 41)
    assert two.left_out == [None, pytest.approx(1 / 41), pytest.approx(1 / 41)]       # the adjacency tokens


def test_a_traced_cycle_records_the_fills_prices(tiny_lm):
    """An oilbird trace (the expected fill) prices every tree node and says, for each neighbour
    the fill cut, what its first token left out was worth: never more than the last node the
    fill took (it adds nodes most valuable first). The reserved fill prices nothing."""
    from oilbird.presets import make_decoder
    from oilbird.verifier import Verifier
    v = Verifier(tiny_lm)
    base = [5, 9, 13, 17, 21, 25, 29, 33]
    dec = make_decoder("oilbird", v, tree=TreeConfig(budget=6))
    cut = 0
    for i in range(4):
        tr = dec.run(f"r{i}", [1] + base + [40 + i] + base[:4], 24)
        for c in tr.cycles[1:]:
            assert len(c.prices) == len(c.tokens) and c.prices[0] == 1.0
            assert all(c.prices[i] <= c.prices[c.parents[i]] for i in range(1, len(c.tokens)))
            for nb in c.neighbours:
                if nb.left_out is not None:
                    cut += 1
                    assert c.fill_bar is not None and nb.left_out <= c.fill_bar
    assert cut > 0
    reserved = make_decoder("oilbird:reserved", v).run("r", [1] + base, 12)
    assert all(c.prices == [] and c.fill_bar is None for c in reserved.cycles)


def test_fill_prices_a_node_with_every_chain_that_proposes_it():
    """Two chains proposing the same node are one candidate: its cell is "multi+semantic" (the
    semantic key among its proposers) with the longer context agreement, it is walked by both
    and paid by the first; the tree keeps both sources and the longer match."""
    from oilbird.drafter import fill_by_value
    from oilbird.acceptance import AcceptanceRates
    from oilbird.sources.base import Chain
    rates = AcceptanceRates(match_bins=(1, 4))
    for _ in range(20):   # agreeing nodes were always right, lone semantic and adjacency nodes never
        t = DraftTree([1, 5, 6, 7], [-1, 0, 0, 0], [set(), {"pld", "semantic"}, {"semantic"}, {"recycling"}],
                      [{}, {"pld": 0.5, "semantic": 0.9}, {"semantic": 0.9}, {"recycling": 0.5}], match=[0, 4, 1, 0])
        rates.observe(t, [0, 1], argmax=[5, 0, 0, 0])
    assert rates.cell({"pld", "semantic"}, 1, match=4) == ("multi+semantic", 1, True, 2)   # warm: the root's child hit
    assert rates.cell({"pld", "suffix"}, 1)[0] == "multi"
    tree = DraftTree.root(1)
    chains = [("recycling", Chain([7], 0.5)), ("semantic", Chain([6], 0.9, match=1)),
              ("pld", Chain([5, 8], 0.5, match=4)), ("semantic", Chain([5], 0.9, match=1))]
    out = fill_by_value(tree, chains, 1, rates)
    assert tree.tokens == [1, 5] and tree.sources[1] == {"pld", "semantic"} and tree.match[1] == 4
    assert out[2] == ([1], [1]) and out[3] == ([1], []) and out[0] == ([], []) and out[1] == ([], [])


def test_a_node_past_the_recordings_end_counts_as_a_miss():
    """In replay the accepted path can end on the recording's last token (its end of turn), whose
    target is -1: a node drafted past it is never committed, so it is a miss, as a node drafted
    past an end-of-sequence token is in live decoding (the rates price what a node is worth)."""
    from oilbird.acceptance import AcceptanceRates
    rates = AcceptanceRates()
    t = DraftTree([1, 5, 6], [-1, 0, 1], [set(), {"semantic"}, {"semantic"}])
    rates.observe(t, [0, 1], argmax=[5, -1, -1])
    deep = [cell for cell in rates.tested if cell[1] == 2]
    assert deep and all(rates.hits[cell] == 0 for cell in deep)


def test_acceptance_cells_split_runs_from_branches():
    """With ``runs``, a node whose parent has the same proposer class (a chain that continues)
    and one that branches off another class's node learn separate rates."""
    from oilbird.acceptance import AcceptanceRates
    rates = AcceptanceRates(runs=True)
    # root -> 5 (pld+semantic) -> 6 (pld+semantic, continues: right) and 7 (semantic alone, branches: wrong)
    t = DraftTree([1, 5, 6, 7], [-1, 0, 1, 1], [set(), {"pld", "semantic"}, {"pld", "semantic"}, {"semantic"}])
    for _ in range(10):
        rates.observe(t, [0, 1, 2], argmax=[5, 6, 0, 0])
    run = rates.cell({"pld", "semantic"}, 2, parent={"pld", "semantic"})
    branch = rates.cell({"semantic"}, 2, parent={"pld", "semantic"})
    assert run[-1] is True and branch[-1] is False
    assert rates.rate(run) > 0.9 and rates.rate(branch) < 0.1
    before = rates.rate(branch)                   # remembered per cell until the next verdict ...
    rates.observe(t, [0, 1, 3], argmax=[5, 7, 0, 0])
    assert rates.rate(branch) > before            # ... which the rate then includes
    assert rates.cell({"semantic"}, 2, parent={"semantic"})[-1] is True
    assert AcceptanceRates().cell({"semantic"}, 2, parent={"semantic"}) == ("semantic", 2, False)


def test_acceptance_cells_split_by_score_bin():
    """With score bins, a likely adjacency candidate (p 0.6) and an unlikely one (p 0.05) learn
    separate rates, so the fill can prefer the first; without bins they share one cell."""
    from oilbird.acceptance import AcceptanceRates
    binned, flat = AcceptanceRates(score_bins=(0.5, 0.2)), AcceptanceRates()
    t = DraftTree([1, 8, 9], [-1, 0, 0], [set(), {"recycling"}, {"recycling"}],
                  [{}, {"recycling": 0.6}, {"recycling": 0.05}])
    for r in (binned, flat):
        for _ in range(40):
            r.observe(t, [0, 1], argmax=[8, 0, 0])     # the likely one is always the answer
    hi, lo = binned.cell({"recycling"}, 1, 0.6), binned.cell({"recycling"}, 1, 0.05)
    assert hi != lo and binned.rate(hi) > 0.9 and binned.rate(lo) < 0.1
    assert flat.cell({"recycling"}, 1, 0.6) == flat.cell({"recycling"}, 1, 0.05)
    assert flat.rate(flat.cell({"recycling"}, 1)) == pytest.approx(41 / 82)
    # a bin never seen says what the cell it splits says (half its nodes were hits), not 0.5 of a prior
    unseen = binned.cell({"recycling"}, 1, 0.3)
    assert binned.rate(unseen) == pytest.approx(binned.rate(unseen[:3])) == pytest.approx(41 / 82)


def test_expected_fill_lets_a_semantic_chain_take_more_than_the_reservation():
    """fill="expected": no nodes are reserved; where the semantic chain is worth more than the
    adjacency branches (learned), it takes them; in "reserved" mode it stops at semantic_budget."""
    from oilbird.sources.base import Chain
    sem_chain = Chain([5, 6, 7, 8], 0.95, meta={"record": 0})
    trees = {}
    for fill in ("reserved", "expected"):
        sem = _Fixed("semantic", [sem_chain])
        rec = _Fixed("recycling", [Chain([30 + k], 0.2, attach=0) for k in range(6)])
        d = Drafter([_Fixed("suffix", [Chain([4], 1.0)], match_len=3), sem, rec],
                    TreeConfig(budget=8, semantic_budget=2, fill=fill))
        if fill == "expected":
            for _ in range(30):   # semantic nodes were accepted, adjacency branches never
                t = DraftTree([3, 4, 5, 6, 30], [-1, 0, 0, 2, 0], [set(), {"suffix"}, {"semantic"},
                                                                   {"semantic"}, {"recycling"}],
                              [{}, {"suffix": 1.0}, {"semantic": 0.95}, {"semantic": 0.95}, {"recycling": 0.2}])
                d.rates.observe(t, [0, 2, 3], argmax=[5, 0, 6, 0, 0])
        tree, info = d.draft([1, 3], "r", np.ones(D, dtype=np.float32))
        assert len(tree) == 8
        trees[fill] = sum("semantic" in s for s in tree.sources)
        assert info.neighbours[0]["paid"] == [i for i, s in enumerate(tree.sources) if "semantic" in s]
    assert trees == {"reserved": 2, "expected": 4}


def test_expected_fill_lets_the_spines_cut_off_tail_compete():
    """Under fill="expected" the lexical share (GOOSE's) places the head of the spine; the tail
    it cut off competes with the adjacency branches by learned worth instead of being dropped.
    Where the spine's deep nodes were accepted and the branches never were, the tail wins."""
    spine = _Fixed("suffix", [Chain([4, 5, 6, 7, 8, 9], 1.0)], match_len=6)
    rec = _Fixed("recycling", [Chain([30 + k], 0.2, attach=0) for k in range(6)])
    got = {}
    for fill in ("reserved", "expected"):
        d = Drafter([spine, rec], TreeConfig(budget=8, semantic_budget=0, fill=fill, spine_share=0.3,
                                             min_spine_share=0.3))
        if fill == "expected":
            for _ in range(30):
                t = DraftTree([3, 4, 5, 6, 30], [-1, 0, 1, 2, 0], [set(), {"suffix"}, {"suffix"}, {"suffix"},
                                                                  {"recycling"}],
                              [{}, {"suffix": 1.0}, {"suffix": 1.0}, {"suffix": 1.0}, {"recycling": 0.2}])
                d.rates.observe(t, [0, 1, 2, 3], argmax=[4, 5, 6, 7, 0])
        tree, info = d.draft([1, 3], "r", None)
        assert len(tree) == 8 and len(info.spine) == 2          # round(0.3 * 7) placed by the share
        got[fill] = sum("suffix" in s for s in tree.sources)
    assert got == {"reserved": 2, "expected": 6}


def test_expected_fill_without_branches_still_lets_the_chains_compete():
    """A tree with no branch source (``oilbird-no-recycling``): under fill="expected" the lexical
    share places the spine's head and the key's chain competes with the cut-off tail for the rest
    (it once got no node: the lexical pass took the whole budget); the reserved fill keeps the
    paper's split, everything but the reserve to the lexical pass."""
    spine = _Fixed("suffix", [Chain([4, 5, 6, 7, 8, 9, 10, 11], 1.0)], match_len=6)
    got = {}
    for fill in ("reserved", "expected"):
        sem = _Fixed("semantic", [Chain([20, 21, 22, 23], 0.95, meta={"record": 0})])
        d = Drafter([spine, sem], TreeConfig(budget=8, semantic_budget=2, fill=fill, spine_share=0.3,
                                             min_spine_share=0.3))
        if fill == "expected":
            for _ in range(30):   # the key's nodes were accepted, the spine's deep ones never
                t = DraftTree([3, 4, 5, 20, 21], [-1, 0, 1, 0, 3], [set(), {"suffix"}, {"suffix"},
                                                                  {"semantic"}, {"semantic"}],
                              [{}, {"suffix": 1.0}, {"suffix": 1.0}, {"semantic": 0.95}, {"semantic": 0.95}])
                d.rates.observe(t, [0, 3, 4], argmax=[20, 0, 0, 21, 0])
        tree, info = d.draft([1, 3], "r", np.ones(D, dtype=np.float32))
        assert len(tree) == 8
        got[fill] = (len(info.spine), sum("semantic" in s for s in tree.sources))
    assert got == {"reserved": (5, 2), "expected": (2, 4)}


class _Subtree(_Fixed):
    """A lexical source whose best-first subtree follows the budget it is offered: the main
    chain, and from 3 nodes on a lower-share alternative from the root (40, 41) too; remembers
    what it was offered."""

    def __init__(self):
        super().__init__("suffix", [], match_len=6)
        self.offered = []

    def propose(self, ctx, budget):
        self.offered.append(budget)
        if budget < 3:
            return Proposal([Chain([4, 5, 6, 7][:budget], 1.0)], match_len=self.match_len)
        return Proposal([Chain([4, 5, 6, 7][: budget - 2], 1.0), Chain([40, 41], 0.3)], match_len=self.match_len)


def test_open_fill_offers_the_lexical_sources_the_whole_budget():
    """fill="open": the share still places the lexical head, but the lexical sources propose
    for every node left, so an alternative the share-sized subtree leaves out (40, 41) competes
    with the adjacency branches; under "expected" it is never offered."""
    got = {}
    for fill in ("expected", "open"):
        lex = _Subtree()
        rec = _Fixed("recycling", [Chain([30 + k], 0.2, attach=0) for k in range(6)])
        d = Drafter([lex, rec], TreeConfig(budget=8, semantic_budget=0, fill=fill, spine_share=0.3,
                                           min_spine_share=0.3))
        for _ in range(30):   # the lexical source's nodes were accepted, the adjacency branches never
            t = DraftTree([3, 40, 41, 30], [-1, 0, 1, 0], [set(), {"suffix"}, {"suffix"}, {"recycling"}],
                          [{}, {"suffix": 0.3}, {"suffix": 0.3}, {"recycling": 0.2}])
            d.rates.observe(t, [0, 1, 2], argmax=[40, 41, 0, 0])
        tree, info = d.draft([1, 3], "r", None)
        assert len(info.spine) == 2                           # round(0.3 * 7): the head, either way
        got[fill] = (lex.offered[-1], 40 in tree.tokens and 41 in tree.tokens)
    assert got == {"expected": (2, False), "open": (7, True)}

# -- a source of one's own: routed by its declared role, checked where it errs -----------------

class _OneChain(DraftSource):
    """Proposes one fixed chain from the root; remembers the budgets it was offered."""

    def __init__(self, name, tokens, role="spine", attach=0):
        self.name, self.role, self.tokens, self.attach, self.budgets = name, role, tokens, attach, []

    def propose(self, ctx, budget):
        self.budgets.append(budget)
        return Proposal([Chain(list(self.tokens), 1.0, self.attach)])


@pytest.mark.parametrize("role, pass_budget", [("spine", 11), ("chains", 2)])
def test_a_new_source_is_asked_in_the_pass_its_role_names(role, pass_budget):
    """Any name works: the role, not the name, decides the pass; the budget it is told is that pass's."""
    mine = _OneChain("oracle", [5, 6, 7], role)
    tree, info = Drafter([mine], TreeConfig(budget=12, semantic_budget=2)).draft([1, 2, 3], "r", None)
    assert mine.budgets == [pass_budget]
    assert {"oracle"} in tree.sources
    assert tree.tokens[1:] == [5, 6, 7][:min(3, pass_budget)]


def test_a_retrieving_source_of_ones_own_is_classed_with_the_semantic_key():
    """The rates class a node by whether a source that *retrieves* proposed it, whatever its name:
    a drafter's own rates, and the vLLM chains' shared ones, ask the sources."""
    from oilbird.serving.chains import ChainConfig, RequestDrafter, Shared
    mine = _OneChain("my-key", [5], role="chains")
    mine.retrieves = True
    rates = Drafter([_OneChain("pld", [5]), mine], TreeConfig(budget=6, fill="expected")).rates
    assert rates.proposer({"pld", "my-key"}) == "multi+semantic"
    assert rates.proposer({"pld", "semantic"}) == "multi" and rates.proposer({"my-key"}) == "my-key"
    # the vLLM chains' rates are made by the first request's drafter, from its sources
    for sources, cls in ((("pld", "suffix"), "multi"), (("pld", "semantic"), "multi+semantic")):
        shared = Shared(dim=4, vocab_size=32, config=ChainConfig(sources=sources))
        assert shared.rates is None
        RequestDrafter(shared, "r0", [1, 2, 3])
        assert shared.rates.proposer({"pld", "semantic"}) == cls

def test_sources_that_cannot_be_routed_or_merged_are_refused():
    with pytest.raises(ValueError, match="two draft sources named 'pld'"):
        Drafter([PromptLookupSource(), PromptLookupSource()])
    with pytest.raises(ValueError, match="role 'extender'; a role is one of spine, chains, branches"):
        Drafter([_OneChain("x", [5], role="extender")])
    with pytest.raises(ValueError, match="a 'x' chain attaches below node 4, but the tree has 1 nodes"):
        Drafter([_OneChain("x", [5], attach=4)]).draft([1, 2, 3], "r", None)
    for tokens, parents in (([1, 2], [0, 0]), ([1, 2, 3], [-1, 2, 0]), ([1, 2], [-1, -1])):
        with pytest.raises(ValueError, match="root|earlier node"):
            DraftTree(tokens=tokens, parents=parents)


def _neighbour(record, tokens, sim):
    return Chain(tokens, sim, meta={"record": record, "request_id": "p", "position": record,
                                    "similarity": sim, "proposed": tokens})


def test_each_cycle_records_the_semantic_outcome_and_why_a_neighbour_got_no_node():
    """The drafter writes down what it decided; the views only read it."""
    spine = _Fixed("suffix", [Chain([5], 0.9)], match_len=2)
    sem = _Fixed("semantic", [_neighbour(0, [7, 8], 0.95), _neighbour(1, [], 0.85),
                              _neighbour(2, [9], 0.84)])
    d = Drafter([spine, sem], TreeConfig(budget=6, semantic_budget=2))
    tree, info = d.draft([1, 2], "r", np.ones(D, dtype=np.float32))
    assert info.retrieval == "retrieved"
    whys = {nb["record"]: nb["why_no_node"] for nb in info.neighbours}
    # record 0 pays both reserved nodes; record 1 has no tokens; record 2 finds the reserve spent
    assert whys == {0: "", 1: "no-tokens", 2: "budget"}
    assert len(tree) == 4

    class _Muted(_Fixed):
        def propose(self, ctx, budget):
            return Proposal(looked_up=self._chains, retrieval="muted", floor=0.8, muted=True)

    muted = _Muted("semantic", [_neighbour(0, [7, 8], 0.95)])
    tree, info = Drafter([spine, muted], TreeConfig(budget=6, semantic_budget=2)).draft(
        [1, 2], "r", np.ones(D, dtype=np.float32))
    assert (info.retrieval, info.retrieval_floor, info.semantic_muted) == ("muted", 0.8, True)
    assert [nb["why_no_node"] for nb in info.neighbours] == ["muted"] and 7 not in tree.tokens
    _, info = Drafter([spine], TreeConfig(budget=6, semantic_budget=0)).draft([1, 2], "r", None)
    assert info.retrieval == "no-source" and info.neighbours == []


def test_acceptance_cells_share_one_rate_past_the_depth_cap():
    """Depths past max_depth are one cell (a tree's deep nodes are few: they learn together), and
    depths below it are cells of their own."""
    from oilbird.acceptance import AcceptanceRates
    rates = AcceptanceRates(max_depth=2)
    assert rates.cell({"pld"}, 2) == rates.cell({"pld"}, 5) != rates.cell({"pld"}, 1)
    chain = DraftTree([1, 5, 6, 7, 8], [-1, 0, 1, 2, 3], [set()] + [{"pld"}] * 4)
    rates.observe(chain, [0, 1, 2, 3, 4], argmax=[5, 6, 7, 8, 0])        # depths 1-4 tested, all hits
    assert rates.tested[("pld", 2, False)] == 3 and rates.tested[("pld", 1, False)] == 1
    rates.warm = False                                                 # (the verdict made it warm)
    assert rates.rate(rates.cell({"pld"}, 9)) == pytest.approx((3 + 1) / (3 + 2))


def test_update_moves_the_spine_share_by_how_much_of_the_spine_was_accepted():
    """GOOSE's anisotropy (Drafter.update): the lexical share is an EMA of the accepted part of
    the spine (weight spine_alpha), kept within [min_spine_share, max_spine_share], and sizes the
    next spine: a share that never moved, or moved the wrong way, fails here."""
    from oilbird.verdict import TreeVerdict
    spine = _Fixed("suffix", [Chain([5, 6, 7, 8, 9, 10, 11], 0.9)], match_len=3)
    branches = _Fixed("recycling", [])          # a host with branches shares the head by the share
    d = Drafter([spine, branches], TreeConfig(budget=11, semantic_budget=0, spine_share=0.5))

    def cycle(n_accepted):
        tree, info = d.draft([1, 2], "r", None)
        assert info.spine == list(range(1, len(tree)))             # the spine is the whole tree here
        acc = [0] + info.spine[:n_accepted]
        n = len(tree)
        argmax = np.array([tree.tokens[i + 1] if i + 1 < n else 3 for i in range(n)])
        v = TreeVerdict(acc, 3, list(argmax), None, argmax, argmax[:, None], np.ones((n, 1)),
                        np.ones((n, D), np.float32))
        d.update(tree, v, info, [1, 2] + [tree.tokens[i] for i in acc[1:]] + [3], "r", 1)
        return len(tree) - 1

    assert cycle(5) == 5                                   # round(0.5 * 10) nodes of spine
    assert d.spine_share == pytest.approx(0.7 * 0.5 + 0.3 * 1.0)
    assert cycle(0) == 6                                   # round(0.65 * 10): the share sized the spine
    assert d.spine_share == pytest.approx(0.7 * 0.65)
    for _ in range(5):
        cycle(0)
    assert d.spine_share == pytest.approx(0.3)             # the floor
    for _ in range(20):
        cycle(20)
    assert d.spine_share == pytest.approx(0.9)             # the ceiling
