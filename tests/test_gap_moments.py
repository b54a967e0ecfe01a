"""Gap moments: the runs of a request's output where the lexical key failed, each with the cycle
that committed it; the list the app and the notebook stepper jump from."""
from __future__ import annotations

from dataclasses import replace

import pytest
from wb_traces import relabel, request_oilbird

from workbench import figures as F
from workbench.widgets import Stepper, StepperError

# cycles commit tokens [0], [1, 2, 3], [4]
LABELS = ["absent", "gap_recovered", "gap_recovered", "lexical_hit", "gap_missed"]


def test_runs_of_one_label_are_one_moment_with_the_cycle_that_committed_its_first_token():
    ms = F.gap_moments(request_oilbird(gap_labels=LABELS))
    # token 0 is no moment: the prefill gives it, no drafter drafts it, no tree shows it
    assert [(m.label, m.start, m.end, m.cycle) for m in ms] == [("gap_recovered", 1, 3, 1), ("gap_missed", 4, 5, 2)]
    assert ms[0].text == "·there↵" and "tokens 1-2" in ms[0].describe() and ms[0].describe().startswith("cycle 1 · ")
    assert "token 4 " in ms[1].describe() and "gap missed" in ms[1].describe()
    # a run from token 0 starts at token 1
    assert [(m.start, m.end) for m in F.gap_moments(request_oilbird(gap_labels=["gap_missed"] * 3 + LABELS[3:]))] \
        == [(1, 3), (4, 5)]
    assert [m.label for m in F.gap_moments(request_oilbird(gap_labels=LABELS), ("gap_missed",))] == ["gap_missed"]


def test_a_missed_run_that_exact_match_delivered_anyway_says_so():
    """The labels' pool is earlier outputs only; prompt lookup copies the prompt too. A run
    labelled missed (or absent) that this trace's exact-match source delivered says how, so the
    menu does not contradict the tree; so does a run within the key's reach that exact match
    delivered, alone (the tree shows prompt lookup there, not the key) or with the key."""
    labels = ["absent", "gap_missed", "gap_missed", "lexical_hit", "gap_missed"]
    ms = F.gap_moments(request_oilbird(gap_labels=labels))      # tokens 1 and 2 came from pld
    assert [m.lexical for m in ms] == [2, 0]
    assert "2 delivered anyway by exact match" in ms[0].describe() and "exact match" not in ms[1].describe()
    recovered = F.gap_moments(request_oilbird(gap_labels=LABELS))[0]
    # token 1 came from prompt lookup and the key together, token 2 from prompt lookup alone
    assert (recovered.lexical, recovered.exact_only) == (2, 1)
    assert "1 delivered by exact match alone, 1 by exact match and the key" in recovered.describe()


def test_exact_match_is_what_the_trace_names_so():
    """A trace whose drafter had no prompt lookup in its spine (``meta["lexical_sources"]``)
    does not count pld's tokens as delivered by exact match; one that names a source of its
    own counts that source's."""
    labels = ["absent", "gap_missed", "gap_missed", "lexical_hit", "gap_missed"]
    r = request_oilbird(gap_labels=labels)                      # tokens 1 and 2 came from pld
    r.meta = {"lexical_sources": ["suffix"]}
    assert [m.lexical for m in F.gap_moments(r)] == [0, 0]
    for c in r.cycles:
        c.committed_sources = [["mine" if s == "pld" else s for s in srcs] for srcs in c.committed_sources]
    r.meta = {"lexical_sources": ["mine"]}
    assert [m.lexical for m in F.gap_moments(r)] == [2, 0]


def test_a_gap_run_says_how_many_of_its_tokens_the_drafters_key_reaches():
    r = request_oilbird(gap_labels=LABELS)
    r.drafter_reach = [True, True, False, True, False]      # token 0 (absent) and 3 (lexical hit) count for nothing
    ms = F.gap_moments(r)
    assert [m.drafter for m in ms] == [1, 0]
    assert "drafter's key reaches 1 of 2" in ms[0].describe() and "drafter's key reaches 0 of 1" in ms[1].describe()
    assert all("drafter's key" not in m.describe() for m in F.gap_moments(request_oilbird(gap_labels=LABELS)))


def test_without_labels_or_with_inconsistent_ones_there_are_none():
    assert F.gap_moments(request_oilbird()) == [] and F.moment_choices(request_oilbird()) == []
    assert F.gap_moments(request_oilbird(gap_labels=LABELS[:3])) == []
    assert F.moment_summary(request_oilbird()) == (
        "no gap labels in this trace: regenerate it with python -m oilbird trace ... --diagnose")


def test_a_replay_without_labels_is_told_replay_s_command():
    """A replay's recorded turns get their labels from replay --diagnose, not trace (which cannot
    decode a recording); the menu's line says "no gap labels" once."""
    from dataclasses import replace
    r = replace(request_oilbird(), meta={"replay": {"recorded_by": "gpt-4o"}})
    line = F.moment_summary(r)
    assert line == "no gap labels in this trace: regenerate it with python -m oilbird replay ... --traces --diagnose"
    assert "<code>python -m oilbird replay ... --traces --diagnose</code>" in F.gap_strip_html(r)
    assert "replay ... --traces --diagnose" in F.gap_strip_figure(r).layout.annotations[0].text
    assert F.moment_summary(request_oilbird(gap_labels=LABELS)) == (
        "moments (runs of tokens after the first, which the prefill gives): 1 within the semantic key's reach · "
        "1 missed by exact match and by the key at the token's own state · 0 absent from the pool")
    assert F.clearest_moment(request_oilbird()) is None and F.moment_cycle(None, "1") is None
    # no trace at all (a request the app lists without one): no moments, nothing to follow
    assert F.gap_moments(None) == [] and F.moment_at(None, 0) is None


def test_the_menu_follows_the_cycle_on_screen():
    r = request_oilbird(gap_labels=LABELS)
    assert [F.moment_at(r, k) for k in (0, 1, 2, 3)] == [None, "1", "4", None]


def test_menu_values_jump_to_their_cycle():
    r = request_oilbird(gap_labels=LABELS)
    assert [v for _, v in F.moment_choices(r)] == ["1", "4"]
    assert [F.moment_cycle(r, v) for v in ("0", "1", 4, "3")] == [None, 1, 2, None]


def test_the_clearest_moment_is_a_recovery_the_semantic_key_alone_delivered():
    # token 1 was proposed by pld and semantic: not semantic alone
    r = request_oilbird(gap_labels=["absent", "gap_missed", "gap_missed", "gap_recovered", "absent"])
    assert (F.clearest_moment(r).label, F.clearest_moment(r).semantic) == ("gap_recovered", 0)
    r2 = relabel(request_oilbird(gap_labels=["gap_recovered", "lexical_hit", "gap_recovered", "absent", "absent"]),
                 {"pld": "semantic"})   # token 2: semantic alone; token 0 is the prefill's
    best = F.clearest_moment(r2)
    assert (best.start, best.semantic) == (2, 1)
    missed_only = request_oilbird(gap_labels=["absent", "gap_missed", "gap_missed", "lexical_hit", "absent"])
    assert F.clearest_moment(missed_only).label == "gap_missed"


def test_the_stepper_lists_moments_and_jumps():
    s = Stepper([request_oilbird(gap_labels=LABELS)])
    assert [v for _, v in s.moments()] == ["1", "4"]
    s.jump("4")
    assert s.cycle == 2
    with pytest.raises(StepperError, match=r"no gap moment '3'.*it has 1, 4"):
        s.jump("3")
    assert s.cycle == 2
    box = s.widget()
    menu = s._w["moments"]
    assert menu in box.children and [v for _, v in menu.options] == [None, "1", "4"]
    menu.value = "1"                                   # what picking one in the notebook does
    assert s.cycle == 1 and s.last_error is None
    s._w["next"].click()                               # a step: the menu shows cycle 2's moment
    assert (s.cycle, menu.value) == (2, "4")
    s._w["prev"].click()
    s._w["prev"].click()                               # cycle 0, the prefill: no moment
    assert (s.cycle, menu.value) == (0, None)
    s._w["next"].click()
    s._w["next"].click()
    menu.value = "1"                                   # picked again after stepping away: jumps back
    assert s.cycle == 1 and s.last_error is None


def _underlined(figs) -> list[int]:
    """The tokens the gap strip's bar runs under (the gap moment shown)."""
    return [x for d in figs["gap"].data if d.meta == "moment" for x in d.x]


def test_the_stepper_underlines_the_moment_shown():
    """The notebook's strip marks the moment the menu shows, as the app's strips do: the one
    picked while its cycle is on screen, else the cycle's clearest."""
    s = Stepper([request_oilbird(gap_labels=["absent", "gap_missed", "gap_recovered", "gap_missed", "absent"])])
    assert _underlined(s.jump("3")) == [3] and s.moment == "3"
    assert _underlined(s.step(1)) == [4]               # cycle 2's own moment
    assert _underlined(s.step(-1)) == [2] and s.moment == "2"   # back: the cycle's clearest, not the pick
    assert _underlined(s.step(-1)) == [] and s.moment is None   # the prefill's cycle: none


def test_the_menu_keeps_the_moment_picked_when_its_cycle_shows_several():
    """Cycle 1 commits tokens 1-3, three moments; the menu would show the clearest (the recovery,
    "2"), but the one the user picked stays picked."""
    s = Stepper([request_oilbird(gap_labels=["absent", "gap_missed", "gap_recovered", "gap_missed", "absent"])])
    s.widget()
    menu = s._w["moments"]
    assert [v for _, v in menu.options] == [None, "1", "2", "3", "4"]
    menu.value = "3"
    assert (s.cycle, menu.value) == (1, "3")
    s._w["next"].click()
    s._w["prev"].click()                               # stepped away and back: the cycle's own moment
    assert (s.cycle, menu.value) == (1, "2")


def test_the_session_opens_a_replayed_turn_at_its_clearest_moment(tmp_path):
    from oilbird.trace import save_traces
    from workbench.session import Catalogue, Data, new_session
    live = relabel(request_oilbird(gap_labels=["absent", "gap_recovered", "lexical_hit", "gap_recovered", "absent"]),
                   {"pld": "semantic"})
    scripted, real = (relabel(request_oilbird(gap_labels=["absent", "lexical_hit", "lexical_hit", "gap_recovered",
                                                          "gap_missed"]), {}) for _ in range(2))
    from dataclasses import replace
    from oilbird.data.agent_workload import MODEL

    def renamed(r, rid, by):
        return replace(r, request_id=rid, cycles=[replace(c, request_id=rid) for c in r.cycles],
                       meta={"replay": {"recorded_by": by, "mode": "fast"}})
    scripted, real = renamed(scripted, "s#0", MODEL), renamed(real, "g#0", "gpt-4o")
    cat = Catalogue.load(save_traces([live, scripted, real], tmp_path / "t.jsonl"))
    assert cat.error == ""
    st = new_session(cat, Data("builtin"))
    assert (st.request, st.cycle) == ("g#0", 1)        # the real model's turn, at its recovered token 3


def test_a_recovery_is_contested_where_a_lexical_source_proposed_another_token_in_the_same_place():
    from dataclasses import replace
    r = request_oilbird(gap_labels=["absent", "gap_recovered", "lexical_hit", "absent", "absent"])
    c = r.cycles[1]
    alone = [[], ["semantic"], ["pld"], ["recycling"], ["semantic"]]    # token 1: the semantic source alone
    for sibling, contested in ((["recycling"], 0), (["pld"], 1), (["suffix", "semantic"], 1)):
        cyc = replace(c, sources=alone[:3] + [sibling] + alone[4:],
                      committed_sources=[["semantic"], ["pld"], ["bonus"]])
        [m] = F.gap_moments(replace(r, cycles=[r.cycles[0], cyc, r.cycles[2]]), ("gap_recovered",))
        assert (m.semantic, m.contested) == (1, contested), sibling
    # the bonus token was not drafted: never contested
    assert not F.lexical_rivals(c, 2)


def test_where_a_cycle_commits_several_moments_the_menu_shows_the_clearest():
    """Cycle 1 commits tokens 1-3: an absence at 1 and a recovery at 2-3; the menu shows the
    recovery (the one the app opens on), not the first of the two."""
    r = request_oilbird(gap_labels=["lexical_hit", "absent", "gap_recovered", "gap_recovered", "gap_missed"])
    assert F.moment_at(r, 1) == "2" and F.clearest_moment(r).key == "2"


def test_a_moment_jumps_to_its_contested_token_and_the_menu_follows_every_cycle_of_the_run():
    """A recovery run labelled from token 0 (the prefill's, no moment's) to token 2; the
    exact-match key lost at token 1, in cycle 1: the moment starts there, jumps there, and the
    menu shows it there only."""
    from dataclasses import replace
    r = request_oilbird(gap_labels=["gap_recovered"] * 3 + ["lexical_hit", "absent"])
    c = r.cycles[1]
    cyc = replace(c, sources=[[], ["semantic"], ["pld"], ["pld"], ["semantic"]],      # node 3: pld's rival of node 1
                  committed_sources=[["semantic"], ["pld"], ["bonus"]])
    r = replace(r, cycles=[r.cycles[0], cyc, r.cycles[2]])
    [m] = F.gap_moments(r, ("gap_recovered",))
    assert (m.start, m.end, m.contested, m.rivals, m.cycle) == (1, 3, 1, 1, 1)
    assert F.moment_cycle(r, m.key) == 1 and F.clearest_moment(r).cycle == 1
    assert F.moment_at(r, 1) == m.key and F.moment_at(r, 0) is None


def test_among_contested_moments_the_one_with_more_lexical_rivals_shows_the_gap_better():
    """The identifiability story: where the exact-match key offered several wrong tokens and the
    state chose the right one, the gap shows more clearly than where it offered one."""
    from dataclasses import replace
    one = F.GapMoment("gap_recovered", 0, 1, "a", 1, semantic=1, contested=1, rivals=1)
    three = replace(one, start=5, end=6, rivals=3)
    assert max([one, three], key=F.clarity) is three
    assert max([one, replace(three, contested=0, rivals=0)], key=F.clarity) is one


def test_a_reach_no_cycle_asked_for_is_said_so_in_the_menu_the_strip_and_the_hover():
    """The drafter's key is marked at every gap token (what it would find, asked there), but a
    cycle asks only for the token after its root: token 2 was accepted at depth 2 of cycle 1, whose
    lookup (its neighbour table) was asked for token 1. A class sent to cycle 1 for token 2 found no
    neighbour proposing it; the menu, the outlined tokens' line and the hover now say why."""
    from workbench.palette import DRAFTER_UNASKED
    from workbench.panels.gap import cell_hover
    r = request_oilbird(gap_labels=LABELS)
    assert F.asked_positions(r) == {1, 4}           # each drafting cycle's first committed token (not the prefill's)
    r.drafter_reach = [False, False, True, False, False]
    m = F.gap_moments(r)[0]
    assert (m.start, m.end, m.drafter, m.unasked) == (1, 3, 1, 1)
    assert "drafter's key reaches 1 of 2 (1 where no cycle asked)" in m.describe()
    g = F.gap_cells(r, 1)
    assert [c.asked for c in g.cells] == [False, True, False, False, True]
    assert DRAFTER_UNASKED in F.now_line(g) and DRAFTER_UNASKED in cell_hover(g.cells[2], "oilbird")
    band = next(t for t in F.gap_strip_figure(r, 1).data if t.meta == "drafter")    # an export says it too
    assert DRAFTER_UNASKED in band.hovertext[0]
    r.drafter_reach = [False, True, False, False, False]      # reached where cycle 1 asked: nothing to add
    assert "where no cycle asked" not in F.gap_moments(r)[0].describe()
    g = F.gap_cells(r, 1)
    assert DRAFTER_UNASKED not in F.now_line(g) + cell_hover(g.cells[1], "oilbird")
    # a trace without cycle records does not say where a cycle asked: nothing is claimed
    bare = replace(r, cycles=[], drafter_reach=[False, True, True, False, True])
    assert F.asked_positions(bare) is None
    assert all(m.unasked == 0 for m in F.gap_moments(bare))
    assert all(c.asked for c in F.gap_cells(bare).cells)
