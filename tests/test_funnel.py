"""The conversion funnel (oilbird.evaluation.funnel): hand-built cycles with every stage chosen
by hand, then the funnel of real (mock-model) replays and the commands that count it."""
import html
import json
from dataclasses import replace

import pytest

from oilbird.evaluation.funnel import (REACHED, STAGES, Accumulator, count, cycle_facts, format_funnel, funnel,
                                       labelled_funnel)
from oilbird.trace import CycleTrace, Neighbour, RequestTrace, load_traces

# the output: prefill emits 10; one drafting cycle at t = 1 whose truth is 11, 12, 13, 14, 2
OUT = [10, 11, 12, 13, 14, 2]


def nb(sim, proposed, withheld=None, walked=(), accepted=0, why=""):
    return Neighbour(record=1, request_id="r0", position=0, similarity=sim, proposed=list(proposed),
                     proposed_text=[""] * len(proposed), context_text=[], context_index=0,
                     paid_nodes=list(walked), walked_nodes=list(walked), accepted=accepted, why_no_node=why,
                     withheld=None if withheld is None else list(withheld))


def request(neighbours, tokens=(10, 11, 12), parents=(-1, 0, 1), sources=((), ("semantic",), ("semantic",)),
            accepted=(0, 1, 2), retrieval="retrieved", labels=None):
    """One request: prefill (10), a drafting cycle at t = 1 with the given tree, then the rest
    committed one bonus a cycle (cycles with a root-only tree)."""
    acc = list(accepted)
    n_acc = len(acc) - 1
    first = OUT[1:1 + n_acc + 1]
    cycles = [CycleTrace("r", "m", 0, 0, 0, bonus=10, committed=[10], committed_sources=[["bonus"]])]
    cycles.append(CycleTrace("r", "m", 1, 5, 1, tokens=list(tokens), parents=list(parents),
                             sources=[list(s) for s in sources], argmax=[-1] * len(tokens), accepted=acc,
                             bonus=first[-1], committed=first, committed_sources=[["x"]] * len(first),
                             neighbours=list(neighbours), retrieval=retrieval))
    t = 1 + len(first)
    k = 2
    while t < len(OUT):
        cycles.append(CycleTrace("r", "m", k, 5 + t, t, tokens=[OUT[t - 1]], parents=[-1], sources=[[]],
                                 argmax=[-1], accepted=[0], bonus=OUT[t], committed=[OUT[t]],
                                 committed_sources=[["bonus"]], retrieval="gate-closed"))
        t += 1
        k += 1
    return RequestTrace("r", "m", "tiny", [1], "", output_ids=list(OUT), cycles=cycles, gap_labels=labels)


def first(tr):
    return cycle_facts(tr)[0]


def test_a_right_record_that_got_nodes_is_accepted_and_its_reach_counted():
    f = first(request([nb(0.95, [11, 12, 99], withheld=[], walked=[1, 2], accepted=2)]))
    assert (f.t, f.reached, f.right_accepted, f.semantic_own, f.top1_right) == (1, "node", True, True, True)
    assert (f.accepted, f.reach, f.short) == (2, 2, None)


def test_a_last_cycle_cut_at_the_token_limit_is_checked_against_its_accepted_path():
    """The output ends inside the accepted path (the request's token limit cut it at 11, after the
    verifier had accepted 11 12): a record right through the path reached both tokens, as the
    neighbour table says (oilbird.trace.cycle_truth), not the one the shortened output kept."""
    tr = request([nb(0.95, [11, 12, 99], withheld=[], walked=[1, 2], accepted=2)])
    tr = replace(tr, output_ids=OUT[:2], cycles=tr.cycles[:1] + [replace(tr.cycles[1], committed=[11],
                                                                         committed_sources=[["x"]], stop="limit")])
    f = first(tr)
    assert (f.accepted, f.reach, f.short, f.right_accepted) == (2, 2, None, True)
    # an end-of-sequence token inside the accepted path ends the output for good: nothing after it is right
    eos = replace(tr, cycles=tr.cycles[:1] + [replace(tr.cycles[1], stop="eos")])
    assert first(eos).reach == 1


@pytest.mark.parametrize("neighbour, reached", [
    (nb(0.7, [], withheld=[11, 12], why="below-floor"), "below-floor"),
    (nb(0.95, [11, 12], walked=[], why="muted"), "muted"),
    (nb(0.81, [], withheld=[11, 12], why="no-tokens"), "copy-depth"),
    (nb(0.95, [11, 12], walked=[], why="budget"), "budget"),
])
def test_where_a_right_record_was_lost(neighbour, reached):
    """The tree held the token from the lexical spine (node 1, pld): the cycle accepted it, but
    the right record's own chain was lost at its stage."""
    tr = request([neighbour], sources=((), ("pld",), ("pld",)))
    f = first(tr)
    assert f.reached == reached and f.lexical_had and f.tree_had and not f.right_accepted
    c = count(cycle_facts(tr))
    assert c["lost"][reached] == 1 and c["stages"]["right_any"] == 1
    assert c["stages"]["right_floor"] == (reached != "below-floor")
    assert c["stages"]["right_node"] == 0 and c["tokens"]["short"]["no_node"] == 0   # accepted 2 = reach 2


def test_a_wrong_record_is_not_right_and_old_traces_read_proposed_only():
    f = first(request([nb(0.99, [55, 56], withheld=[11])], accepted=(0,), tokens=(10,), parents=(-1,),
                      sources=((),)))
    assert f.reached is None and not f.top1_right and not f.tree_had
    old = first(request([nb(0.81, [], withheld=None, why="no-tokens")], accepted=(0,), tokens=(10,),
                        parents=(-1,), sources=((),)))
    assert old.reached is None             # withheld unrecorded: the cut record cannot be judged


def test_short_cycles_say_why_by_the_longest_right_record():
    # right for 4 tokens (11 12 13 14), copy depth kept 2 of them: a copy-depth cut
    cut = first(request([nb(0.85, [11, 12], withheld=[13, 14, 2], walked=[1, 2], accepted=2)],
                        tokens=(10, 11, 12, 40), parents=(-1, 0, 1, 0), sources=((), ("semantic",), ("semantic",), ("recycling",))))
    assert (cut.reach, cut.accepted, cut.short) == (3, 2, "copy_depth")       # reach capped at 3 draft nodes
    # proposed all 4, the chain got 1 node: the budget
    budget = first(request([nb(0.95, [11, 12, 13, 14], walked=[1], accepted=1)], tokens=(10, 11, 40, 41),
                           parents=(-1, 0, 0, 0), sources=((), ("semantic",), ("recycling",), ("recycling",)),
                           accepted=(0, 1)))
    assert (budget.reach, budget.accepted, budget.short) == (3, 1, "budget")


def test_stages_nest_and_the_table_has_every_stage():
    trs = [request([nb(0.95, [11, 12], walked=[1, 2], accepted=2)], labels=["absent", "gap_recovered", "lexical_hit",
                                                                          "absent", "absent", "absent"]),
           request([nb(0.7, [], withheld=[11], why="below-floor")], retrieval="below-floor")]
    fun = funnel(trs)
    st = fun["m"]["stages"]
    counts = [st[k] for k, _ in STAGES]
    assert counts == sorted(counts, reverse=True) and counts[0] == 2 * 3      # 3 drafting cycles a request (t = 1, 4, 5)
    assert st["gate_open"] == 2 and st["right_any"] == 2 and st["right_floor"] == 1
    assert fun["m"]["by_label"]["gap_recovered"] == {"cycles": 1, "tree_had": 1, "lexical_had": 0, "right_any": 1,
                                                     "right_node": 1, "semantic_own": 1}
    table = format_funnel(fun)
    assert all(name in table for _, name in STAGES) and "at gap_recovered positions" in table
    # labels given later (a replay's diagnosis) replace the traces' own
    acc = Accumulator()
    acc.add(trs)
    later = acc.result({"r": ["gap_missed"] * 6})
    assert later["m"]["by_label"]["gap_missed"]["cycles"] == 6
    # a lossy trace gets no labels from a diagnosis
    lossy = labelled_funnel([replace(trs[0], lossless=False, gap_labels=None)], {"r": ["absent"] * 6})
    assert "by_label" not in lossy["m"]


# -------------------------------------------------------------------- real replays, mock model
def test_the_funnel_of_a_replay_nests_and_counts_every_drafting_cycle(tiny_lm):
    from oilbird.decoding import autoregressive
    from oilbird.evaluation.replay import RecordedTurn, diagnose_turns, replay
    from oilbird.verifier import Verifier
    from test_decoding import _prompts
    v = Verifier(tiny_lm)
    prompts = _prompts(4)
    turns = [RecordedTurn(f"c/{i}", "c", i, ids, autoregressive(v, ids, 24).output_ids) for i, ids in enumerate(prompts)]
    turns += [replace(t, id=t.id + "-again", index=t.index + 4) for t in turns]      # repeats: the store pays
    traces = []
    replay([[t] for t in turns], ["goose", "oilbird"], v, on_request=lambda trs, res: traces.extend(trs))
    labels = {d.request_id: d.labels for d in diagnose_turns(tiny_lm, [[t] for t in turns], progress=False)["diags"]["generated"]}
    fun = labelled_funnel(traces, labels)
    for m in ("goose", "oilbird"):
        st = fun[m]["stages"]
        counts = [st[k] for k, _ in STAGES]
        assert counts == sorted(counts, reverse=True)
        drafting = sum(sum(1 for c in tr.cycles if c.tokens) for tr in traces if tr.method == m)
        assert st["cycles"] == drafting
        assert st["right_node"] == st["right_accepted"]          # a right first node is always accepted
        assert sum(b["cycles"] for b in fun[m]["by_label"].values()) == drafting
    assert fun["goose"]["stages"]["gate_open"] == 0
    assert fun["oilbird"]["stages"]["right_any"] > 0 and fun["oilbird"]["stages"]["right_accepted"] > 0
    # every record the key found is in the trace, with what its cut withheld
    nbs = [n for tr in traces if tr.method == "oilbird" for c in tr.cycles for n in c.neighbours]
    assert nbs and all(n.withheld is not None for n in nbs)
    assert sum(f.reached in REACHED for tr in traces if tr.method == "oilbird" for f in cycle_facts(tr)) == \
        fun["oilbird"]["stages"]["right_any"]


def test_replay_diagnose_writes_the_funnel_and_report_prints_it(tmp_path, capsys, monkeypatch):
    import oilbird.model
    from conftest import make_tiny_lm
    from oilbird.__main__ import main
    from oilbird.evaluation.report import main as report
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: make_tiny_lm())
    convs = []
    for i in range(3):
        msgs = [{"role": "user", "content": f"book a seat for trip {i % 2}"},
                {"role": "assistant", "content": "seat 12A on trip 7, confirmation ABC123"}]
        convs.append(json.dumps({"id": f"c{i}", "model": "rec", "messages": msgs}))
    data = tmp_path / "convs.jsonl"
    data.write_text("\n".join(convs) + "\n")
    out = tmp_path / "out"
    code = main(["replay", "--data", str(data), "--methods", "ar,goose,oilbird", "--diagnose", "--traces",
                 "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0 and "conversion funnel" in printed and "semantic gate open" in printed
    diag = json.loads((out / "diagnosis.json").read_text())
    assert set(diag["funnel"]) == {"goose", "oilbird"}             # ar drafts nothing: no funnel of its own
    assert diag["funnel"]["oilbird"] == labelled_funnel(load_traces(out / "traces.jsonl"), diag["labels"])["oilbird"]
    assert report([str(out / "diagnosis.json")]) == 0
    shown = capsys.readouterr().out
    assert "conversion funnel" in shown and "perfect verbatim-copy drafter" in shown   # as replay printed them
    assert "the local model's argmax is the recorded token" in shown and "agrees with greedy" not in shown
    assert report([str(out / "traces.jsonl")]) == 0 and "a top-k record continues right" in capsys.readouterr().out
    # the replay's own results (fast mode: no tokens/s), through the main command's report too
    assert main(["report", str(out)]) == 0
    assert "| oilbird |" in capsys.readouterr().out
    # a funnel of the wrong shape is one line naming the field, exit 2
    diag["funnel"]["oilbird"]["stages"]["right_any"] = "many"
    (out / "diagnosis.json").write_text(json.dumps(diag))
    assert report([str(out / "diagnosis.json")]) == 2
    assert "'right_any' of 'stages' of method 'oilbird' of the funnel" in capsys.readouterr().err


# -------------------------------------------------------------------- the figure (structure, not pixels)
def test_funnel_figure_one_funnel_and_one_loss_bar_per_method():
    from wb_traces import request_goose, request_oilbird
    from workbench import figures as F
    trs = [request_oilbird(), request_goose()]
    fig = F.funnel_figure(trs)
    funnels = [t for t in fig.data if t.meta.startswith("funnel-")]
    bars = [t for t in fig.data if t.meta.startswith("lost-")]
    assert [t.name for t in funnels] == ["oilbird", "goose"] == [t.name for t in bars]
    assert all(list(t.y) == [name for _, name in STAGES] for t in funnels)
    assert all(list(t.y) == list(F.LOSSES) for t in bars)
    # oilbird: 2 drafting cycles (t = 1, 4), the gate open in both; cycle 1's one record continues
    # right and got its nodes, but pld had the token too
    oil = dict(zip([k for k, _ in STAGES], funnels[0].x))
    assert (oil["cycles"], oil["gate_open"], oil["right_any"], oil["right_accepted"], oil["semantic_own"]) == (2, 2, 1, 1, 0)
    assert funnels[1].x[0] == 4 and funnels[1].x[1] == 0            # goose: 4 drafting cycles, no key
    assert funnels[0].marker.color != funnels[1].marker.color and bars[0].marker.color == funnels[0].marker.color
    assert {t.name for t in fig.data if t.showlegend is not False} == {"oilbird", "goose"}
    # the same from the counts (diagnosis.json's funnel), a chosen order, and nothing at all
    assert F.funnel_figure(funnel(trs)).to_dict() == fig.to_dict()
    assert [t.name for t in F.funnel_figure(trs, methods=["goose"]).data] == ["goose", "goose"]
    empty = F.funnel_figure([])
    assert not empty.data and any("no drafting cycles" in a.text for a in empty.layout.annotations)


def test_a_printed_funnel_keeps_its_values_its_methods_apart_and_its_panels_clear():
    """What a teacher's printout of the funnel lost: the values (plotly hid them inside the bars
    once two methods shared a row: now printed beside every bar), the methods in greyscale (a
    fill pattern each), oilbird's colour (it changed with the methods beside it), and at 700 px
    the losses' labels, which ran over the stages' bars (now drawn under them)."""
    from wb_traces import request_goose, request_oilbird
    from workbench import figures as F
    from workbench.panels.base import axis_key
    spec = F.funnel_spec([request_goose(), request_oilbird()])
    for t in spec["data"]:
        assert t["textposition"] == "outside" and len(t["text"]) == len(t["x"]), t["meta"]
        assert all(x.split(" ")[0] == str(n) for x, n in zip(t["text"], t["x"]))
    colour = {t["name"]: (t["marker"]["color"], t["marker"]["pattern"]["shape"]) for t in spec["data"]}
    assert colour["goose"][0] != colour["oilbird"][0] and colour["goose"][1] != colour["oilbird"][1]
    alone = F.funnel_spec([request_oilbird()])["data"][0]["marker"]
    assert (alone["color"], alone["pattern"]["shape"]) == colour["oilbird"]
    # four methods: plotly shrank each printed value to its bar's thickness (5 px): not shrunk, and
    # a stage's row holds four bars of at least the value's height
    counts = funnel([request_oilbird()])["oilbird"]
    four = F.funnel_spec({m: counts for m in ("oilbird", "a", "b", "c")})
    assert all(t["constraintext"] == "none" for t in four["data"])
    lay = four["layout"]
    y = lay[axis_key(four["data"][0]["yaxis"])]["domain"]
    plot_px = lay["height"] - lay["margin"]["t"] - lay["margin"]["b"]
    assert (y[1] - y[0]) * plot_px / len(STAGES) * (1 - lay["bargap"]) / 4 >= four["data"][0]["textfont"]["size"]

    def domains(spec, meta):
        t = next(t for t in spec["data"] if t["meta"] == meta)
        lay = spec["layout"]
        return lay[axis_key(t["xaxis"])]["domain"], lay[axis_key(t["yaxis"])]["domain"]
    for width, side_by_side in ((None, True), (1200, True), (700, False)):
        spec = F.funnel_spec([request_oilbird()], style=F.Style(width=width))
        (sx, sy), (lx, ly) = domains(spec, "funnel-oilbird"), domains(spec, "lost-oilbird")
        if side_by_side:
            assert sx[1] < lx[0] and sy == ly
        else:
            assert sx == lx and ly[1] < sy[0]


def test_the_funnels_title_lines_keep_clear_of_its_subplot_titles():
    """The scope under the title made it two lines in plotly's default 50 px margin, and its second
    line was printed over "cycles reaching each stage": the title is pinned to the top and the
    margin holds its lines and the subplots' two-line titles."""
    from wb_traces import request_oilbird
    from workbench import figures as F
    s = F.Style()
    one = F.funnel_spec([request_oilbird()])["layout"]
    two = F.funnel_spec([request_oilbird()], scope="4 requests: a scope")["layout"]
    for lay, lines in ((one, 1), (two, 2)):
        assert lay["title"]["yref"] == "container" and lay["title"]["yanchor"] == "top"
        title_bottom = 26 + lines * (s.font_size + 2) * 1.3      # its lines' height, from the figure's top
        subplot_titles = 2 * s.font_size * 1.3                   # two lines sit just above the plots
        assert lay["margin"]["t"] >= title_bottom + subplot_titles
    assert two["height"] - two["margin"]["t"] == one["height"] - one["margin"]["t"]   # the plots keep their size


def test_the_funnels_key_of_methods_sits_under_the_axes_titles_at_any_height():
    """Placed at a fraction of the plot's height under it, the key of methods overprinted the
    axis title "drafting cycles" in the app (a shorter plot than an export's): it is anchored to
    the figure's foot, in room of its own below the axes' titles."""
    from wb_traces import request_oilbird
    from workbench import figures as F
    from workbench.panels.funnel import LEGEND_ROOM
    for style in (F.Style(), F.Style(width=700), F.Style(width=1200)):
        lay = F.funnel_spec([request_oilbird()], style=style)["layout"]
        assert (lay["legend"]["yref"], lay["legend"]["y"], lay["legend"]["yanchor"]) == ("container", 0, "bottom")
        assert lay["margin"]["b"] == 40 + LEGEND_ROOM           # one method: one row under the axes' titles
    # long method names wrap the key at 700 px: it takes the rows it needs, and the plots keep their size
    def named(m):
        r = request_oilbird()
        return replace(r, method=m, cycles=[replace(c, method=m) for c in r.cycles])
    many = [named(f"oilbird-variant-with-a-long-name-{k}") for k in range(4)]
    one, four = (F.funnel_spec(t, style=F.Style(width=700))["layout"] for t in ([request_oilbird()], many))
    assert four["margin"]["b"] >= 40 + 3 * LEGEND_ROOM
    plot = [lay["height"] - lay["margin"]["b"] - lay["margin"]["t"] for lay in (one, four)]
    assert plot[1] >= plot[0]


def test_every_stage_and_loss_of_the_funnel_is_explained_in_plain_words():
    """A teacher's words for each stage: the glossary has a row for every stage and every loss
    the figure draws, and the hover of each carries the same sentence."""
    from wb_traces import request_oilbird
    from oilbird.evaluation.funnel import LOST_HELP, SHORT, SHORT_HELP, STAGE_HELP
    from workbench import figures as F
    assert set(STAGE_HELP) == {k for k, _ in STAGES}
    assert set(LOST_HELP) == set(REACHED[:-1]) and set(SHORT_HELP) == set(SHORT)
    words, blank, *table = F.funnel_glossary().splitlines()
    assert "*Right* means the token that actually came next" in words and blank == ""
    rows = table[2:]
    assert [r.split(" | ")[0].lstrip("| ") for r in rows] == [name for _, name in STAGES] + list(F.LOSSES)
    fig = F.funnel_figure([request_oilbird()])
    stages, losses = fig.data
    for (key, _), hover in zip(STAGES, stages.hovertext):
        assert STAGE_HELP[key] in html.unescape(hover)
    assert any(": 1 cycle<br>" in h for h in stages.hovertext) and not any("1 cycles" in h for h in stages.hovertext)
    whys = [LOST_HELP[k] for k in REACHED[:-1]] + [SHORT_HELP[k] for k in SHORT]
    assert all(why in html.unescape(hover) for why, hover in zip(whys, losses.hovertext))


def test_diagnose_counts_the_funnel_of_a_trace_file_by_its_labels(tmp_path, capsys, monkeypatch):
    import oilbird.model
    from conftest import make_tiny_lm
    from oilbird.__main__ import main
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: make_tiny_lm())
    data = tmp_path / "reqs.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"say hi to trip {i % 2}"}) + "\n" for i in range(3)))
    traces = tmp_path / "t.jsonl"
    assert main(["trace", "--data", str(data), "--methods", "goose,oilbird", "--max-new-tokens", "12",
                 "--out", str(traces)]) == 0
    out = tmp_path / "diag"
    assert main(["diagnose", "--data", str(data), "--max-new-tokens", "12", "--traces", str(traces),
                 "--out", str(out)]) == 0
    assert "conversion funnel" in capsys.readouterr().out
    diag = json.loads((out / "diagnosis.json").read_text())
    fun = diag["funnel"]
    assert set(fun) == {"goose", "oilbird"} and diag["funnel_traces"] == str(traces)
    for m, f in fun.items():            # every cycle labelled: the traces are lossless, the same length
        assert sum(b["cycles"] for b in f["by_label"].values()) == f["stages"]["cycles"] > 0
    # traces of other requests are left out, said; none of the requests': refused (a funnel of
    # unlabelled cycles is no funnel)
    one = tmp_path / "one.jsonl"
    one.write_text(data.read_text().splitlines()[0] + "\n" + json.dumps({"id": "other", "prompt": "x"}) + "\n")
    assert main(["diagnose", "--data", str(one), "--max-new-tokens", "12", "--traces", str(traces),
                 "--out", str(tmp_path / "d1")]) == 0
    err = capsys.readouterr().err
    assert "counts the traces of 1 of the 2 requests diagnosed; 2 other requests' traces" in err
    fun = json.loads((tmp_path / "d1" / "diagnosis.json").read_text())["funnel"]["oilbird"]
    assert sum(b["cycles"] for b in fun["by_label"].values()) == fun["stages"]["cycles"] > 0
    # a trace file that is not one, or not of these requests: one line, exit 2, before the model loads
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    (tmp_path / "others.jsonl").write_text(json.dumps({"id": "x", "prompt": "y"}) + "\n")
    assert main(["diagnose", "--data", str(tmp_path / "others.jsonl"), "--traces", str(traces),
                 "--out", str(tmp_path / "d3")]) == 2
    assert "holds no trace of the 1 requests diagnosed (its requests: q0, q1, q2, ...)" in capsys.readouterr().err
    (tmp_path / "bad.jsonl").write_text("{}\n")
    assert main(["diagnose", "--data", str(data), "--traces", str(tmp_path / "bad.jsonl"),
                 "--out", str(tmp_path / "d2")]) == 2
    assert "bad.jsonl" in capsys.readouterr().err


def test_diagnose_turns_reusing_the_replays_teacher_rows_labels_the_same(tiny_lm):
    from oilbird.decoding import autoregressive
    from oilbird.evaluation.replay import RecordedTurn, diagnose_turns, replay
    from oilbird.verifier import Verifier
    from test_decoding import _prompts
    v = Verifier(tiny_lm)
    convs = [[RecordedTurn(f"c{i}/0", f"c{i}", 0, ids, autoregressive(v, ids, 16).output_ids)]
             for i, ids in enumerate(_prompts(3))]
    rows = {}
    replay(convs, ["goose"], v, teacher_sink=lambda t, r: rows.__setitem__(t.id, r))
    assert set(rows) == {c[0].id for c in convs}
    fresh, reused = diagnose_turns(tiny_lm, convs, progress=False), diagnose_turns(tiny_lm, convs, False, rows=rows)
    assert [d.labels for d in fresh["diags"]["generated"]] == [d.labels for d in reused["diags"]["generated"]]
    assert fresh["teacher_forced_agreement"] == reused["teacher_forced_agreement"]


def test_a_method_that_drafts_no_tree_has_no_funnel():
    """ar's cycles are no drafting cycles: every way of counting the funnel leaves it out (a
    method name the registry does not know still counts)."""
    from dataclasses import replace
    from wb_traces import request_goose, request_oilbird
    from oilbird.evaluation.funnel import Accumulator
    traces = [replace(request_goose(), method="ar"), request_oilbird(), replace(request_goose(), method="mine")]
    assert list(funnel(traces)) == ["oilbird", "mine"]
    assert list(labelled_funnel(traces, {})) == ["oilbird", "mine"]
    acc = Accumulator()
    acc.add(traces)
    assert list(acc.result()) == ["oilbird", "mine"]
    # a name the registry does not know whose cycles all say it drafts without the key has no marks
    # of the key and no funnel of the key's stages (keyless reads its trace)
    from workbench.panels.gap import keyless
    without = replace(request_goose(), method="[pld+mine]",
                      cycles=[replace(c, retrieval="no-source") for c in request_goose().cycles])
    assert keyless("[pld+mine]", without) and not keyless("[pld+mine]", request_oilbird())
    assert not keyless("[pld+mine]") and keyless("goose") and not keyless("oilbird")


def test_the_apps_funnel_counts_the_selected_requests_traffic_with_the_key():
    """The app's funnel counts the methods with the hidden-state key (goose's funnel would be
    its drafting cycles and nothing after) over the selected request's traffic: gpt-4o's replayed
    turns are not counted with live decoding; its title says what it counts."""
    from wb_traces import request_goose, request_oilbird
    from workbench import figures as F
    live = request_oilbird()
    replayed = replace(request_oilbird(), request_id="g#0", meta={"replay": {"recorded_by": "gpt-4o"}})
    trs = [live, request_goose(), replayed]
    mine, scope = F.funnel_scope(trs, replayed)
    assert mine == [replayed] and scope == "1 request: gpt-4o's recorded turns, replayed"
    mine, scope = F.funnel_scope(trs, request_goose())            # goose selected: its traffic, oilbird's traces
    assert mine == [live] and scope == f"1 request: {live.model}'s own decoding"
    assert F.funnel_scope([request_goose()], None) == ([], "")
    # sampled decoding is traffic of its own: not counted with greedy's
    sampled = replace(request_oilbird(), request_id="s1", meta={"sampling": {"temperature": 0.8, "top_p": 1.0, "seed": 3}})
    assert F.funnel_scope(trs + [sampled], live)[0] == [live]
    mine_s, scope_s = F.funnel_scope(trs + [sampled], sampled)
    assert mine_s == [sampled] and scope_s == f"1 request: {live.model}'s own decoding, sampled (T=0.8, top-p=1, seed=3)"
    fig = F.funnel_figure(mine, scope=scope)
    assert scope.replace("'", "&#x27;") in fig.layout.title.text                       # escaped in the title
