"""scripts/where_tokens_go.py: the per-cycle accepted / best-candidate / copy counts."""
import importlib.util
from pathlib import Path
from types import SimpleNamespace

from oilbird.tree import DraftTree

spec = importlib.util.spec_from_file_location("where_tokens_go",
                                              Path(__file__).parents[1] / "scripts" / "where_tokens_go.py")
wt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wt)


def test_one_cycle_counts_accepted_candidate_and_copy():
    """Root 5; truth 6 7 8 9. The tree got 6 accepted (the semantic chain's first node); the
    semantic chain held 6 7 8 (a candidate cut by the budget); an earlier output holds 6 7 8 9
    after 4 5, as our context ends: copy 4 tokens behind an agreement of 2."""
    wt._stats.clear()
    wt._earlier[:] = [wt._text([4, 5, 6, 7, 8, 9])]
    tree = DraftTree([5, 6, 3], [-1, 0, 0], [set(), {"semantic"}, {"recycling"}])
    wt._cycle.update(chains=[("semantic", [6, 7, 8], 0, 3), ("recycling", [3], 0, 1)], context=[1, 4, 5], cap=11)
    wt._count(tree, SimpleNamespace(accepted=[0, 1]), [6, 7, 8, 9])
    assert wt._stats["cycles"] == 1 and wt._stats["accepted"] == 1 and wt._stats["candidate"] == 3
    assert wt._stats["copy"] == 4
    assert wt._stats["candidate over accepted, the chain of: semantic"] == 2
    assert wt._stats["copy over candidate: context agreement 2-3"] == 1
    # nothing anywhere: the copy rule finds nothing, the counts stay at what was accepted
    wt._stats.clear()
    wt._earlier.clear()
    wt._cycle.update(chains=[], context=[1], cap=11)
    wt._count(DraftTree.root(1), SimpleNamespace(accepted=[0]), [42])
    assert (wt._stats["accepted"], wt._stats["candidate"], wt._stats["copy"]) == (0, 0, 0)


def test_refuses_anything_but_a_fast_replay_of_one_method(capsys):
    for argv in ([], ["bench", "--methods", "oilbird"], ["replay", "--methods", "goose,oilbird"],
                 ["replay", "--methods", "oilbird", "--exact"], ["replay"]):
        assert wt.main(argv) == 2
    assert "one method" in capsys.readouterr().err
