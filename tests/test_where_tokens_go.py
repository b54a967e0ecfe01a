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


def test_neighbours_by_agreement_and_rates_against_acceptance():
    from oilbird.acceptance import AcceptanceRates
    wt._neighbour.clear()
    wt._rates.clear()
    # two neighbours: agreeing on 9 tokens and right for 3; agreeing on the root only, wrong
    wt._cycle.update(neighbours=[(9, 0.96, [6, 7, 8, 1]), (1, 0.85, [9])])
    wt._neighbours([6, 7, 8, 9])
    assert wt._neighbour["agreement 9+"] == [1, 3] and wt._neighbour["agreement 0-1"] == [1, 0]
    assert wt._neighbour["similarity 0.95-0.97"] == [1, 3] and wt._neighbour["similarity 0.80-0.90"] == [1, 0]
    # root -> 6 (semantic, accepted) -> 7 (semantic, rejected): both tested, rates as learned
    tree = DraftTree([5, 6, 7], [-1, 0, 1], [set(), {"semantic"}, {"semantic"}])
    wt._cycle.update(rates=AcceptanceRates(), rate=[1.0, 0.4, 0.7])
    wt._calibration(tree, SimpleNamespace(accepted=[0, 1]))
    assert wt._rates[("semantic", 1, "root")] == [1, 0.4, 1]
    assert wt._rates[("semantic", 2, "semantic")] == [1, 0.7, 0]
