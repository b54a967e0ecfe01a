"""A trace file as two flat tables (oilbird.evaluation.tables): every drafted node and every
retrieved neighbour, checked on the hand-built traces (tests/wb_traces.py says what each holds)."""
from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest

from oilbird.evaluation.report import main as report
from oilbird.evaluation.tables import (CYCLE_COLUMNS, NEIGHBOUR_COLUMNS, NODE_COLUMNS, cycle_rows, neighbour_rows,
                                       node_rows, write_tables)
from oilbird.trace import save_traces
from wb_traces import cycle1, request_oilbird, request_truncated


def by_node(rows, cycle):
    return {r["node"]: r for r in rows if r["cycle"] == cycle}


def test_every_drafted_node_is_a_row_with_its_proposers_and_verdict():
    rows = list(node_rows([request_oilbird()]))
    assert [(r["cycle"], r["node"]) for r in rows] == [(1, 1), (1, 2), (1, 3), (1, 4), (2, 1)]   # no roots
    one = by_node(rows, 1)
    want = {"text": " there", "sources": "pld+semantic", "neighbours": "0", "best_similarity": 0.91,
            "verdict": "accepted", "committed": " there", "depth": 1, "parent": 0, "token": 11}
    assert {k: one[1][k] for k in want} == want
    assert (one[2]["verdict"], one[2]["committed"], one[2]["neighbours"]) == ("accepted", "\n", "")
    # siblings of an accepted node are rejected, and say what was committed in their place
    assert (one[3]["verdict"], one[3]["committed"]) == ("rejected", " there")
    assert (one[4]["verdict"], one[4]["committed"], one[4]["neighbours"]) == ("rejected", "\n", "0")
    assert (by_node(rows, 2)[1]["verdict"], by_node(rows, 2)[1]["committed"]) == ("rejected", "")   # the EOS
    # a reserved fill (no prices recorded): neither who placed a node nor its price
    assert {(r["placed_by"], r["price"]) for r in rows} == {("", None)}


def test_a_node_under_a_rejected_one_is_never_reached_and_the_fills_prices_are_kept():
    c = replace(cycle1(), parents=[-1, 0, 1, 0, 3], prices=[1.0, 0.9, 0.6, 0.3, 0.1], fill_from=2, fill_bar=0.1)
    tr = request_oilbird()
    tr.cycles[1] = c
    one = by_node(node_rows([tr]), 1)
    assert (one[4]["verdict"], one[4]["committed"]) == ("never reached", None)
    assert [(one[i]["placed_by"], one[i]["price"]) for i in (1, 2, 4)] == [
        ("exact-match head", 0.9), ("fill", 0.6), ("fill", 0.1)]


def test_an_accepted_node_past_the_output_end_commits_nothing():
    one = by_node(node_rows([request_truncated(2)]), 1)        # accepted B C D, only "B C" committed
    assert [(one[i]["verdict"], one[i]["committed"]) for i in (1, 2, 3, 4)] == [
        ("accepted", "B"), ("accepted", "C"), ("accepted past the end", None), ("rejected", "B")]
    one = by_node(node_rows([request_truncated(3)]), 1)        # "B C D" committed, not the bonus
    assert one[3]["verdict"] == "accepted"


def test_every_neighbour_is_a_row_with_how_far_it_was_right():
    rows = list(neighbour_rows([request_oilbird()]))
    assert len(rows) == 1
    row = rows[0]
    assert (row["cycle"], row["neighbour"], row["from_request"], row["position"]) == (1, 0, "r0", 5)
    assert row["similarity"] == 0.91
    assert (row["proposed"], row["n_nodes"], row["n_accepted"], row["why_no_node"]) == (" there\n", 2, 1, "")
    assert (row["proposed_tokens"], row["withheld_tokens"]) == (2, None)          # an older trace: none recorded
    assert row["right_for"] == 2                      # " there", "\n" are the output's next two tokens
    tr = request_oilbird()
    tr.cycles[1] = replace(cycle1(), generated_before=9)      # drafted past the output's end: no truth
    assert next(neighbour_rows([tr]))["right_for"] is None


def test_report_writes_both_tables_of_a_trace_file(tmp_path, capsys):
    path = save_traces([request_oilbird(), request_truncated(3)], tmp_path / "t.jsonl")
    assert report([str(path), "--csv", str(tmp_path / "tables")]) == 0
    assert "wrote" in capsys.readouterr().out
    with (tmp_path / "tables" / "nodes.csv").open(encoding="utf-8", newline="") as f:
        nodes = list(csv.DictReader(f))
    with (tmp_path / "tables" / "cycles.csv").open(encoding="utf-8", newline="") as f:
        cycles = list(csv.DictReader(f))
    with (tmp_path / "tables" / "neighbours.csv").open(encoding="utf-8") as f:
        neighbours = list(csv.DictReader(f))
    assert tuple(nodes[0]) == NODE_COLUMNS and len(nodes) == 5 + 4
    assert nodes[1]["text"] == "\n" and nodes[0]["best_similarity"] == "0.91" and nodes[0]["price"] == ""
    assert tuple(cycles[0]) == CYCLE_COLUMNS and len(cycles) == 3 + 2
    assert b"\r" not in (tmp_path / "tables" / "nodes.csv").read_bytes()     # rows end as a text's own breaks do
    assert tuple(neighbours[0]) == NEIGHBOUR_COLUMNS and len(neighbours) == 1


def test_csv_of_a_file_that_is_no_trace_file_is_refused(tmp_path, capsys):
    res = tmp_path / "diagnosis.json"
    res.write_text(json.dumps({"present_2": 0.5, "n_requests": 1, "n_positions": 3, "n_gap": 0, "n_recovered": 0}))
    with pytest.raises(SystemExit):
        report([str(res), "--csv", str(tmp_path / "t")])
    assert "--csv writes a trace file's tables" in capsys.readouterr().err and not (tmp_path / "t").exists()


def test_write_tables_names_its_files_and_makes_the_folder(tmp_path):
    paths = write_tables([request_oilbird()], tmp_path / "new", ("a.csv", "b.csv", "c.csv"))
    assert [p.name for p in paths] == ["a.csv", "b.csv", "c.csv"]
    counts = []
    for p in paths:
        with p.open(encoding="utf-8", newline="") as f:
            counts.append(len(list(csv.DictReader(f))))
    assert counts == [3, 5, 1]


def test_an_empty_csv_folder_is_refused(tmp_path, capsys):
    path = save_traces([request_oilbird()], tmp_path / "t.jsonl")
    with pytest.raises(SystemExit):
        report([str(path), "--csv", ""])
    assert "--csv needs a folder" in capsys.readouterr().err


def test_a_sampled_cycle_says_which_siblings_were_never_tried():
    """Under sampling a sibling after the accepted child is never tried (decided_prob None): not
    "rejected", as the tree's hover says too."""
    tr = request_oilbird()
    tr.cycles[1] = replace(cycle1(), decided_prob=[None, 0.7, 0.9, None, 0.2], residual_mass=[None, 1, 1, None, 1])
    one = by_node(node_rows([tr]), 1)
    assert [one[i]["verdict"] for i in (1, 2, 3, 4)] == ["accepted", "accepted", "not tried", "rejected"]


def test_a_trace_written_without_text_still_makes_its_tables():
    """A decoder run without tracing keeps the tree but not its text or depths: the tables say
    what there is (depths from the parents), with empty text."""
    tr = request_oilbird()
    tr.cycles[1] = replace(cycle1(), depths=[], token_text=[], committed_text=[], neighbours=[])
    one = by_node(node_rows([tr]), 1)
    assert [(one[i]["depth"], one[i]["text"], one[i]["committed_token"]) for i in (1, 2, 3, 4)] == [
        (1, None, 11), (2, None, 12), (1, None, 11), (2, None, 12)]
    assert list(cycle_rows([tr]))[1]["bonus"] is None and list(cycle_rows([tr]))[1]["bonus_token"] == 99


def test_a_committed_end_of_sequence_token_is_told_from_nothing_committed():
    two = by_node(node_rows([request_oilbird()]), 2)[1]       # the EOS (text "") was committed in its place
    assert (two["committed_token"], two["committed"]) == (2, "")


def test_every_cycle_is_a_row_and_tau_follows_from_them():
    """The prefill and a cycle that drafted nothing are rows too, so the committed tokens over the
    rows are the method's tau, as report computes it."""
    tr = request_oilbird()
    rows = list(cycle_rows([tr]))
    assert [(r["cycle"], r["n_nodes"], r["n_accepted"], r["n_committed"], r["bonus_token"], r["bonus"], r["stop"])
            for r in rows] == [(0, 0, 0, 1, 10, "Hi", None), (1, 4, 2, 3, 99, "!!", None), (2, 1, 0, 1, 2, "", "eos")]
    assert sum(r["n_committed"] for r in rows) / len(rows) == len(tr.output_ids) / len(tr.cycles)
    cut = list(cycle_rows([request_truncated(3)]))[1]     # B C D accepted and committed, the bonus cut
    assert (cut["n_accepted"], cut["n_committed"], cut["bonus_token"], cut["stop"]) == (3, 3, None, "limit")
