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
    """Prefill commits 10; one cycle drafts root 10 -> 11 (key alone, accepted) -> 30 (lexical,
    rejected), and bonus 12; the output goes on 13. Neighbours: right past its node (its next
    token 12 is the output's), wrong past it (40), one rejected inside the tree (its cut cost
    nothing), and one the fill did not cut."""
    out = [10, 11, 12, 13]
    cycles = [CycleTrace("r", "oilbird", 0, 0, 0, bonus=10, committed=[10], committed_sources=[["bonus"]]),
              CycleTrace("r", "oilbird", 1, 5, 1, tokens=[10, 11, 30], parents=[-1, 0, 1],
                         sources=[[], ["semantic"], ["pld"]], depths=[0, 1, 2], argmax=[11, 12, -1],
                         accepted=[0, 1], bonus=12, committed=[11, 12], committed_sources=[["semantic"], ["bonus"]],
                         prices=[1.0, 0.5, 0.1], fill_bar=0.1, fill_from=1,
                         neighbours=[nb([11, 12], [1], 1, 0.2), nb([11, 40], [1], 1, 0.05),
                                     nb([11, 30, 7], [1, 2], 1, 0.01), nb([11], [1], 1, None)]),
              CycleTrace("r", "oilbird", 2, 7, 3, tokens=[12], parents=[-1], sources=[[]], argmax=[13],
                         accepted=[0], bonus=13, committed=[13], committed_sources=[["bonus"]])]
    return RequestTrace("r", "oilbird", "tiny", [1], "", output_ids=out, cycles=cycles)


def test_right_and_wrong_tokens_left_out_and_the_prices_calibration(tmp_path, capsys):
    m = fm.margins([trace()])
    assert m["right"] == [(0.2, 0.1, pytest.approx(0.4))] and m["wrong"] == [(0.05, 0.1, pytest.approx(0.1))]
    assert m["nodes"] == {("the key alone", 4): [1, 0.5, 1], ("without the key", 2): [1, 0.1, 0]}
    assert m["rivals"] == {(False, True): [1, 0.5, 1]}     # node 1: tested, rate 0.5, no rival under the root
    rival = trace()
    c = rival.cycles[1]
    c.tokens, c.parents, c.sources, c.depths, c.argmax = [10, 11, 30], [-1, 0, 0], c.sources, [0, 1, 1], [11, -1, -1]
    c.prices = [1.0, 0.5, 0.2]
    assert fm.margins([rival])["rivals"] == {(True, True): [1, 0.5, 1]}   # pld's 30 beside the key's 11
    assert fm.auc([0.2], [0.05]) == 1.0 and fm.auc([0.1, 0.1], [0.1]) == 0.5 and fm.auc([], [1]) is None
    assert fm.kind({"semantic", "pld"}) == "the key and others" and fm.kind(["suffix"]) == "without the key"
    path = save_traces([trace()], tmp_path / "t.jsonl")
    assert fm.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "right: 50.0% of the tokens left out" in out and "AUC of the price, right against wrong: 1.000" in out
    assert "| the key alone | 0.4-0.7 | 1 | 0.500 | 1.000 |" in out
    assert "| no other source's token beside it | >= 0.3 | 1 | 0.500 | 1.000 |" in out


def test_a_trace_without_prices_says_so(tmp_path, capsys):
    old = trace()
    for c in old.cycles:
        c.prices, c.fill_bar = [], None
    assert fm.main([str(save_traces([old], tmp_path / "old.jsonl"))]) == 1
    assert "no cycle recorded the fill's prices" in capsys.readouterr().err
