"""Views of a sampled cycle: the tree panel's hover says, per tried node, the probability that
decided it and the residual's mass; the trace round-trips the new fields (oilbird.trace)."""
from __future__ import annotations

from dataclasses import replace

import pytest
from wb_traces import cycle1

from oilbird.trace import CycleTrace, RequestTrace, TraceError, load_traces, save_traces
from workbench import figures as F


def sampled_cycle() -> CycleTrace:
    """cycle1's tree decided by sampling: node 1 (" there") rejected with 0.3 of mass 1, node 3
    (" you") accepted with 0.5 / 0.7 of the residual, node 3 a leaf: the bonus "?" is drawn."""
    return replace(cycle1(), accepted=[0, 3], bonus=77, committed=[13, 77], committed_text=[" you", "?"],
                   committed_sources=[["recycling"], ["bonus"]],
                   decided_prob=[None, 0.3, None, 0.5 / 0.7, None], residual_mass=[None, 1.0, None, 0.7, None])


def _hover(fig, node):
    for t in fig.data:
        if t.customdata is not None and node in list(t.customdata):
            return t.hovertext[list(t.customdata).index(node)]
    raise AssertionError(f"node {node} has no marker")


def test_tree_hover_says_what_decided_each_tried_node():
    fig = F.tree_figure(sampled_cycle())
    assert "sampled: rejected with probability 0.300 under the residual of mass 1.000" in _hover(fig, 1)
    h3 = _hover(fig, 3)
    assert "sampled: accepted with probability 0.714 under the residual of mass 0.700" in h3
    assert "renormalised" in h3
    assert "not tried" in _hover(fig, 2) and "not tried" in _hover(fig, 4)
    assert "sampled:" not in _hover(fig, 0)                    # the root is never tried


def test_sampled_bonus_is_labelled_with_the_drawn_token_and_where_it_came_from():
    fig = F.tree_figure(sampled_cycle())
    bonus = [t for t in fig.data if t.meta == "bonus"]
    assert len(bonus) == 1 and list(bonus[0].text) == ["?"]
    assert "sampled from the model's distribution after the last accepted node" in bonus[0].hovertext[0]
    # a bonus drawn after rejected children says it came from the residual
    c = replace(sampled_cycle(), accepted=[0], bonus=77, committed=[77], committed_text=["?"],
                committed_sources=[["bonus"]], decided_prob=[None, 0.3, None, 0.2, None])
    bonus = [t for t in F.tree_figure(c).data if t.meta == "bonus"][0]
    assert "residual" in bonus.hovertext[0] and "2 tried children" in bonus.hovertext[0]


def test_greedy_cycle_hover_is_unchanged():
    fig = F.tree_figure(cycle1())
    assert all("sampled" not in _hover(fig, i) for i in range(5))
    bonus = [t for t in fig.data if t.meta == "bonus"][0]
    assert "the verifier's own next token" in bonus.hovertext[0]


def test_sampled_fields_round_trip_and_are_checked(tmp_path):
    tr = RequestTrace(request_id="r1", method="goose", model="tiny", prompt_ids=[1], prompt_text="x",
                      output_ids=[13, 77], output_text=[" you", "?"], cycles=[sampled_cycle()],
                      meta={"sampling": {"temperature": 0.7, "top_p": 1.0, "seed": 0}})
    save_traces([tr], tmp_path / "t.jsonl")
    back = load_traces(tmp_path / "t.jsonl")[0].cycles[0]
    assert back.decided_prob == sampled_cycle().decided_prob and back.residual_mass == [None, 1.0, None, 0.7, None]
    bad = replace(tr, cycles=[replace(sampled_cycle(), decided_prob=[0.5])])
    save_traces([bad], tmp_path / "bad.jsonl")
    with pytest.raises(TraceError, match="decided_prob"):
        load_traces(tmp_path / "bad.jsonl")


def test_a_bonus_after_merged_twins_counts_every_rejected_candidate():
    """Twins 1 and 2 carry one token: the rule pools their children (node 3 under twin 1, node 4
    under twin 2) and, after twin 1 is accepted, rejects both; the bonus came from a residual
    with two children removed, not one."""
    import numpy as np
    from dataclasses import asdict

    from oilbird.sampling import decisions_per_node, sample_tree
    tokens, parents = [0, 1, 1, 2, 3], [-1, 0, 0, 1, 2]
    p = np.array([[0, .9, .04, .03, .03]] + [[0, 0, .02, .02, .96]] * 4)
    v = next(v for s in range(50) if len((v := sample_tree(tokens, parents, p, np.random.default_rng(s))).accepted) == 2
             and sum(not t.accepted for t in v.tried) == 2)
    prob, mass = decisions_per_node([asdict(t) for t in v.tried], len(tokens))
    c = replace(sampled_cycle(), tokens=tokens, parents=parents, sources=[[], ["pld"], ["suffix"], ["pld"], ["suffix"]],
                token_text=["a", "b", "b", "c", "d"], argmax=[1, 4, 4, 4, 4], depths=[0, 1, 1, 2, 2],
                scores=[{}] * 5, argmax_text=[""] * 5, accepted=v.accepted, bonus=v.bonus,
                committed=[1, v.bonus], committed_text=["b", "e"], committed_sources=[["pld"], ["bonus"]],
                decided_prob=prob, residual_mass=mass, neighbours=[])
    bonus = [t for t in F.tree_figure(c).data if t.meta == "bonus"][0]
    assert "2 tried children" in bonus.hovertext[0], bonus.hovertext[0]


def test_a_sampled_trace_says_so_and_a_comparison_says_why_outputs_differ():
    """A sampled trace is marked (counter, metrics) with its settings; the gap strip does not
    advise a --diagnose the CLI refuses for it; a comparison of two traces whose outputs differ
    says why where the traces tell (sampling, a token limit, another model)."""
    from wb_traces import request_oilbird
    sp = {"temperature": 0.8, "top_p": 1.0, "seed": 3}
    sampled = replace(request_oilbird(), meta={"sampling": sp})
    greedy = request_oilbird()
    assert "sampled (T=0.8, top-p=1, seed=3)" in F.counter_html(sampled, 1)
    assert "sampled" not in F.counter_html(greedy, 1)
    assert "sampled (T=0.8, top-p=1, seed=3)" in F.metrics_spec(sampled)["layout"]["title"]["text"]
    strip = F.gap_strip_spec(sampled, 1)
    said = " ".join(a.get("text", "") for a in strip["layout"].get("annotations", [])) + strip["layout"]["title"]["text"]
    assert "this trace was sampled" in said and "regenerate it" not in said
    other = replace(greedy, output_ids=[10, 11, 7, 7, 2])
    title = F.compare_spec(sampled, other)["layout"]["title"]["text"]
    assert "outputs differ from token 2" in title and "decoded sampled (T=0.8, top-p=1, seed=3) and greedy" in title
    cut = replace(greedy, output_ids=[10, 11], stop="limit", method="goose")
    assert "goose&#x27;s run stopped at a token limit of 2" in F.compare_spec(greedy, cut)["layout"]["title"]["text"]
    assert "two models: tiny, big" in F.compare_spec(greedy, replace(other, model="big"))["layout"]["title"]["text"]
    bare = F.compare_spec(greedy, other)["layout"]["title"]["text"]
    assert "outputs differ from token 2</b>" in bare and "(" not in bare.split("token 2</b>")[1]
