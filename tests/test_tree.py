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
    assert torch.equal(m[1:, 1:], torch.eye(3, dtype=m.dtype)) and m[1:, 0].all()   # itself and the root only


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


def test_twin_children_resolve_to_the_one_greedy_accept_takes():
    """A hand-made tree may give a node two children of one token: the lookup a chain re-walks
    and the greedy walk agree on the earlier."""
    t = DraftTree([1, 5, 5], [-1, 0, 0])
    path, _ = greedy_accept(t.tokens, t.parents, [5, 9, 9])
    assert path == [0, 1] and t.child(0, 5) == 1
    assert t.add(0, 5, "pld", 1.0) == 1 and len(t) == 3


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


def test_a_parent_must_come_before_its_child():
    with pytest.raises(ValueError, match="node 1 has parent 2; every parent must be an earlier node"):
        DraftTree([1, 2, 3], [-1, 2, 0])
