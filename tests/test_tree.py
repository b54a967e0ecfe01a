"""The tree as data: masks, positions, greedy walk and merge cost on tiny literal trees."""
import pytest
import torch

from oilbird.drafter import add_chain
from oilbird.sources.base import Chain
from oilbird.tree import DraftTree, depths_of, greedy_accept, tree_attention


def test_tree_attention_docstring_example():
    mask, pos = tree_attention([-1, 0, 0, 1], prefix_len=2)
    assert mask.shape == (1, 1, 4, 6)
    expected = torch.tensor([[1, 1, 1, 0, 0, 0],
                             [1, 1, 1, 1, 0, 0],
                             [1, 1, 1, 0, 1, 0],
                             [1, 1, 1, 1, 0, 1]], dtype=torch.bool)
    assert torch.equal(mask[0, 0], expected)
    assert pos.tolist() == [[2, 3, 3, 4]]


def test_chain_is_causal():
    mask, pos = tree_attention([-1, 0, 1, 2], prefix_len=0)
    assert torch.equal(mask[0, 0], torch.tril(torch.ones(4, 4, dtype=torch.bool)))
    assert pos.tolist() == [[0, 1, 2, 3]]


def test_siblings_do_not_see_each_other():
    mask, _ = tree_attention([-1, 0, 0, 0], prefix_len=1)
    m = mask[0, 0, :, 1:]
    assert not m[1, 2] and not m[2, 3] and not m[3, 1]


@pytest.mark.parametrize("parents", [[0], [-1, 1], [-1, 0, 3, 0], [-1, -1]])
def test_bad_parents_rejected(parents):
    with pytest.raises(ValueError):
        depths_of(parents)


def test_greedy_accept_docstring_example():
    assert greedy_accept([7, 8, 9, 5], [-1, 0, 0, 1], [8, 5, 1, 4]) == ([0, 1, 3], 4)


def test_greedy_accept_nothing_matches_gives_bonus_only():
    assert greedy_accept([7, 8, 9], [-1, 0, 0], [3, 0, 0]) == ([0], 3)


def test_greedy_accept_follows_second_branch():
    # root predicts 9: the second child, not the spine
    assert greedy_accept([7, 8, 9, 4], [-1, 0, 0, 2], [9, 1, 4, 6]) == ([0, 2, 3], 6)


def test_add_rewalks_shared_prefix_for_free():
    t = DraftTree.root(1)
    a = t.add(0, 5, "suffix", 0.9)
    b = t.add(a, 6, "suffix", 0.9)
    assert t.add(0, 5, "semantic", 0.95) == a          # re-walk, no new node
    assert len(t) == 3 and t.sources[a] == {"suffix", "semantic"}
    assert t.shared_prefix([5, 6, 7]) == (2, b)


def test_merge_cost_on_shared_prefix():
    # tree root->5->6; chain [5, 6, 7, 8] costs |chain| - pi = 4 - 2 = 2 nodes
    t = DraftTree.root(1)
    add_chain(t, Chain([5, 6], 1.0), "suffix", 10)
    walked, paid = add_chain(t, Chain([5, 6, 7, 8], 0.9), "semantic", 10)
    assert len(paid) == 2 and len(walked) == 4 and len(t) == 5
    assert t.sources[walked[0]] == {"suffix", "semantic"}
    assert t.sources[paid[0]] == {"semantic"}


def test_merge_respects_budget():
    t = DraftTree.root(1)
    add_chain(t, Chain([5, 6], 1.0), "suffix", 10)
    walked, paid = add_chain(t, Chain([5, 6, 7, 8], 0.9), "semantic", 1)
    assert len(paid) == 1 and t.tokens[paid[0]] == 7 and len(t) == 4


def test_tree_rejects_mismatched_lists():
    with pytest.raises(ValueError):
        DraftTree(tokens=[1, 2], parents=[-1])


# -- prefixes and cost-aware sizing (oilbird.sizing) -------------------------------------------
def _tree_a_b_c():
    """root(0) -> A(1) -> B(2); root -> C(3): A, B from suffix, C from recycling."""
    t = DraftTree.root(9)
    a = t.add(0, 10, "suffix", 1.0)
    t.add(a, 11, "suffix", 1.0)
    t.add(0, 12, "recycling", 0.5)
    return t


def test_prefix_keeps_indices_and_is_a_tree():
    t = _tree_a_b_c()
    p = t.prefix(3)
    assert p.tokens == [9, 10, 11] and p.parents == [-1, 0, 1] and p.sources[2] == {"suffix"}
    assert t.prefix(99).tokens == t.tokens and t.prefix(0).tokens == [9]   # clamped to [1, len]
    p.sources[1].add("pld")
    assert t.sources[1] == {"suffix"}                                      # a copy, not a view
    with pytest.raises(ValueError, match="node 1 has parent 2; every parent must be an earlier node"):
        DraftTree([1, 2, 3], [-1, 2, 0])          # so no prefix of a DraftTree can lose a parent


def test_sizer_prior_keeps_a_likely_chain():
    from oilbird.sizing import TreeSizer
    s = TreeSizer()
    # unseen cells: P(A) = 0.5, P(B) = 0.25, P(C) = 0.5; prior cost 1, 1.55, 1.595, 1.64
    # expected tokens per cost: 1.0, 0.968, 1.097, 1.372 -> all four nodes
    assert s.path_probs(_tree_a_b_c()) == pytest.approx([1.0, 0.5, 0.25, 0.5])
    assert s.cost(1) == 1.0 and s.cost(2) == pytest.approx(1.55) and s.cost(4) == pytest.approx(1.64)
    assert s.choose(_tree_a_b_c()) == 4


def test_sizer_learns_what_gets_rejected():
    from oilbird.sizing import TreeSizer
    s = TreeSizer()
    t = _tree_a_b_c()
    for _ in range(20):            # A and C tested (root accepted) and rejected; B never tested
        s.update(t, [0], argmax=[99, 0, 0, 0])
    cold = ("suffix", 1, False)
    assert s.tested[cold] == 20 and s.hits[cold] == 0 and s.tested[("suffix", 2, False)] == 0
    assert s.choose(t) == 1        # nothing worth a bigger forward: verify the root alone
    s.update(t, [0, 1, 2], argmax=[10, 11, 5, 0])   # A and B accepted: the next cycle is "warm"
    assert s.hits[cold] == 1 and s.hits[("suffix", 2, False)] == 1 and s.warm
    assert s.choose(t) == 4        # warm cells are unseen: back to the optimistic prior


def test_sizer_learns_from_the_nodes_it_cut():
    """Verifying the root alone still says whether A would have been accepted (argmax[root])."""
    from oilbird.sizing import TreeSizer
    s = TreeSizer()
    t = _tree_a_b_c()
    s.update(t, [0], argmax=[10], verified=1)        # root alone; its argmax is A's token
    assert s.tested[("suffix", 1, False)] == 1 and s.hits[("suffix", 1, False)] == 1
    assert s.tested[("recycling", 1, False)] == 1 and s.hits[("recycling", 1, False)] == 0
    assert s.tested[("suffix", 2, False)] == 0       # B's parent A was never verified
    assert s.warm                                    # a draft would have been accepted


def test_sizer_keeps_everything_where_nodes_cost_nothing():
    from oilbird.sizing import TreeSizer
    s = TreeSizer()
    t = _tree_a_b_c()
    for _ in range(20):
        s.update(t, [0], argmax=[99, 0, 0, 0])      # every draft rejected ...
    for n in (1, 4):
        for _ in range(3):                          # ... but 4 nodes cost what 1 does
            s.update(t, [0], argmax=[99, 0, 0, 0], verified=n, verify_seconds=0.010)
    assert s.cost(2) == pytest.approx(1.0) and s.cost(4) == pytest.approx(1.0)
    assert s.cost(6) == pytest.approx(1.0 + 2 * s.cfg.slope)        # beyond 4: the prior slope
    assert s.choose(t) == 4
