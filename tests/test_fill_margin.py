"""scripts/fill_margin.py: the fill's prices at the cut, read from a trace (figures that
docs/results.md quotes)."""
import importlib.util
from pathlib import Path

import pytest

from oilbird.trace import CycleTrace, Neighbour, RequestTrace, save_traces

SPEC = importlib.util.spec_from_file_location(
    "fill_margin", Path(__file__).resolve().parents[1] / "scripts" / "fill_margin.py")
fm = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(fm)


def nb(proposed, walked, accepted, left_out):
    return Neighbour(record=1, request_id="r0", position=0, similarity=0.9, proposed=list(proposed),
                     proposed_text=[""] * len(proposed), context_text=[], context_index=0,
                     paid_nodes=list(walked), walked_nodes=list(walked), accepted=accepted, left_out=left_out)


def trace():
    """Prefill commits 10; one cycle drafts root 10 -> 11 (key alone, accepted) -> 30 (pld,
    rejected), and bonus 12; the output goes on 13. The fill placed every node (fill_from 1). Left
    out of the key's chains: 12 below 11 (right: one token more had it been drafted; proposed by
    two neighbours, counted once), 40 below 11 (wrong), 7 below the rejected 30 (its parent
    failed); one neighbour the fill did not cut."""
    out = [10, 11, 12, 13]
    cycles = [CycleTrace("r", "oilbird", 0, 0, 0, bonus=10, committed=[10], committed_sources=[["bonus"]]),
              CycleTrace("r", "oilbird", 1, 5, 1, tokens=[10, 11, 30], parents=[-1, 0, 1],
                         sources=[[], ["semantic"], ["pld"]], depths=[0, 1, 2], argmax=[11, 12, -1],
                         accepted=[0, 1], bonus=12, committed=[11, 12], committed_sources=[["semantic"], ["bonus"]],
                         prices=[1.0, 0.5, 0.1], fill_bar=0.1, fill_from=1,
                         neighbours=[nb([11, 12], [1], 1, 0.08), nb([11, 12, 5], [1], 1, 0.08),
                                     nb([11, 40], [1], 1, 0.05), nb([11, 30, 7], [1, 2], 1, 0.01),
                                     nb([11], [1], 1, None)]),
              CycleTrace("r", "oilbird", 2, 7, 3, tokens=[12], parents=[-1], sources=[[]], argmax=[13],
                         accepted=[0], bonus=13, committed=[13], committed_sources=[["bonus"]])]
    return RequestTrace("r", "oilbird", "tiny", [1], "", output_ids=out, cycles=cycles)


def test_the_margin_what_was_left_out_and_the_prices_calibration(tmp_path, capsys):
    m = fm.margins([trace()])
    assert m["bar"] == [(0.1, False)]                                  # node 2, the last the fill took, rejected
    assert m["left"] == [(0.08, True, pytest.approx(0.16), True, 1), (0.05, False, pytest.approx(0.1), True, 1),
                         (0.01, False, pytest.approx(0.1), False, 2)]
    assert m["nodes"] == {("the key alone", 4): [1, 0.5, 1], ("without the key", 2): [1, 0.1, 0]}
    assert m["rivals"] == {(False, True): [1, 0.5, 1]}     # node 1: parent accepted, rate 0.5, no rival
    assert m["drafted"] == [(0.5, True, 0)]                          # node 1; pld's node 2 is no candidate of the key's
    assert m["swaps"] == [(0.1, False, 0.08, True)]                  # the bar's node 2 against 12, the best left out
    rival = trace()
    c = rival.cycles[1]
    c.parents, c.depths, c.argmax, c.prices = [-1, 0, 0], [0, 1, 1], [11, -1, -1], [1.0, 0.5, 0.2]
    assert fm.margins([rival])["rivals"] == {(True, True): [1, 0.5, 1]}   # pld's 30 beside the key's 11
    for decided in ([None, 1.0, None], [None, 0.0, None]):             # a sampled cycle: no greedy truth
        sampled = trace()
        sampled.cycles[1].decided_prob = decided
        assert fm.margins([sampled])["left"] == [] and fm.margins([sampled])["bar"] == []
    head = trace()
    head.cycles[1].fill_from = 2                                       # node 1 placed by the exact-match head
    assert fm.margins([head])["nodes"] == {("without the key", 2): [1, 0.1, 0]}
    assert fm.auc([0.2], [0.05]) == 1.0 and fm.auc([0.1, 0.1], [0.1]) == 0.5 and fm.auc([], [1]) is None
    assert fm.kind({"semantic", "pld"}) == "the key and others" and fm.kind(["suffix"]) == "without the key"
    path = save_traces([trace()], tmp_path / "t.jsonl")
    assert fm.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "| the last node the fill took, per cycle | 1 | 0.100 | 0.000 |" in out
    assert "| the best-priced token it left out of the key's chains | 1 | 0.080 | 1.000 |" in out
    assert "| a token it left out of the key's chains | 3 | 0.047 | 0.333 |" in out
    assert "Left out with their parent accepted: 2 tokens, 50.0% right" in out
    # depth 1: the rate tells the two left out apart; at the root, node 1 (drafted, accepted) alone
    assert "| 0 | 0 | - | - | 1 | 100.0% | - |" in out and "| 1 | 2 | 50.0% | 1.000 | 2 | 50.0% | 1.000 |" in out
    assert "| the key alone | 0.4-0.7 | 1 | 0.500 | 1.000 |" in out
    assert "| no other source's token beside it | >= 0.3 | 1 | 0.500 | 1.000 |" in out


def test_a_trace_without_prices_says_so(tmp_path, capsys):
    old = trace()
    for c in old.cycles:
        c.prices, c.fill_bar, c.fill_from = [], None, None
        for n in c.neighbours:
            n.left_out = None
    assert fm.main([str(save_traces([old], tmp_path / "old.jsonl"))]) == 1
    assert "no cycle recorded the fill's prices" in capsys.readouterr().err
