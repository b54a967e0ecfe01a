"""scripts/graft_probe.py: an adjacency branch continued by what followed its token elsewhere."""
import importlib.util
from pathlib import Path

from oilbird.sources.base import Chain, DraftContext, Proposal
from oilbird.sources.suffix import SuffixSource
from oilbird.tree import DraftTree

spec = importlib.util.spec_from_file_location("graft_probe", Path(__file__).parents[1] / "scripts" / "graft_probe.py")
gp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gp)


class Branches:
    """Stands in for the adjacency source: one branch, token 7 below the root."""
    def propose(self, ctx, budget):
        return Proposal([Chain([7, 6], 0.4, attach=0)])


def test_a_branch_token_is_continued_by_what_followed_it_in_the_request():
    context = [7, 8, 9, 1, 2, 3, 5]                  # root 5; 7 was followed by 8 9 1 2 3 5
    suffix = SuffixSource(None)
    suffix.start_request(context, "r")
    ctx = DraftContext(tokens=context, request_id="r", tree=DraftTree.root(context[-1]))
    g = gp.GraftSource(suffix, Branches(), depth=3)
    (chain,) = g.propose(ctx, 11).chains
    assert chain.tokens == [7, 8, 9, 1] and chain.attach == 0 and chain.match == 1 and chain.score == 0.4
    assert gp.GraftSource(suffix, Branches(), min_len=2).propose(ctx, 11).chains == []   # only x matched
    b = Branches()
    b.propose = gp.replacing(gp.GraftSource(suffix, Branches(), depth=3))
    assert [c.tokens for c in b.propose(ctx, 11).chains] == [[7, 8, 9, 1]]           # the tail replaced


def test_refuses_anything_but_a_fast_replay(capsys):
    assert gp.main([]) == 2 and gp.main(["replay", "--exact"]) == 2
    assert "fast replay" in capsys.readouterr().err
