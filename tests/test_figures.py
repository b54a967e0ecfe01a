"""Figure structure on hand-built traces (tests/wb_traces.py): traces, colours, styles, legends.

Never pixels: every assertion reads the plotly Figure (validated, so the specs the app sends
are valid plotly too) or the HTML fragments.
"""
from __future__ import annotations

import copy
import html
import itertools
import re
from dataclasses import replace
from pathlib import Path

import pytest
from wb_traces import cycle1, cycle_neighbours, relabel, request_goose, request_oilbird, request_truncated

from oilbird.trace import NO_NODE_REASONS, CycleTrace
from workbench import figures as F
from workbench.panels.neighbours import _cell_chars as cell_chars
from workbench.palette import (ALL_SOURCES, DRAFT_SOURCES, DRAFTER_UNASKED, GAP_COLOURS, PEER_SOURCES, PRECEDENCE,
                               SOURCE_COLOURS, SOURCE_SYMBOLS, STATUS_STYLES, UNKNOWN_COLOUR, Style, ink, primary_source,
                               source_label, source_symbol)

LABELS = ["absent", "lexical_hit", "gap_recovered", "gap_missed", "absent"]


def by_meta(fig, meta):
    found = [t for t in fig.data if t.meta == meta]
    assert len(found) == 1, f"expected one trace with meta {meta!r}, got {len(found)}"
    return found[0]


def legend_names(fig):
    return {t.name for t in fig.data if t.showlegend is not False}


# --------------------------------------------------------------------------- palette

def test_palette_covers_every_source_with_distinct_colour_and_shape():
    keyed = ALL_SOURCES + PEER_SOURCES
    assert set(SOURCE_COLOURS) == set(keyed) == set(SOURCE_SYMBOLS)
    assert len(set(SOURCE_COLOURS.values())) == len(keyed)
    assert len(set(SOURCE_SYMBOLS.values())) == len(keyed)
    peer = SOURCE_COLOURS["suffix-arctic"]       # a peer's source: its own colour, keyed only where present
    assert peer != UNKNOWN_COLOUR and peer not in {SOURCE_COLOURS[x] for x in ALL_SOURCES}


@pytest.mark.parametrize("sources, expected", [
    (["pld", "semantic"], "pld"),            # exact match first: the key's colour is what it added
    (["semantic", "recycling"], "semantic"),
    (["recycling", "suffix"], "suffix"),
    (["pld", "recycling"], "pld"),
    (["rejected", "suffix"], "suffix"),
    (["rejected", "recycling"], "rejected"),
    (["bonus"], "bonus"),
    ([], "root"),
])
def test_primary_source_is_exact_match_first(sources, expected):
    assert primary_source(sources) == expected


def test_every_exact_match_source_is_coloured_before_the_key():
    """The views' one definition of lexical (oilbird.trace) and the palette's order agree: a
    token another running request's output proposed beside the key is not the key's."""
    from oilbird.trace import LEXICAL_SOURCES
    assert all(PRECEDENCE.index(s) < PRECEDENCE.index("semantic") for s in LEXICAL_SOURCES)
    assert all(primary_source([s, "semantic"]) == s for s in LEXICAL_SOURCES)


def test_visible_whitespace():
    assert F.visible(' {"a":\t1}\n') == '·{"a":→1}↵'
    assert F.visible("") == "∅"


# --------------------------------------------------------------------------- draft tree

def test_tree_one_marker_per_node_plus_bonus():
    fig = F.tree_figure(cycle1())
    nodes = [t for t in fig.data if t.meta in ALL_SOURCES and t.meta != "bonus"]
    assert sorted(i for t in nodes for i in t.customdata) == [0, 1, 2, 3, 4]
    assert len(by_meta(fig, "bonus").x) == 1


def test_a_node_hover_gives_the_depth_the_layout_drew_even_where_the_trace_kept_none():
    c = cycle1()
    with_depths = F.tree_figure(c)
    bare = F.tree_figure(replace(c, depths=[]))
    for fig in (with_depths, bare):
        hover = {i: h for t in fig.data if t.meta in ALL_SOURCES and t.meta != "bonus"
                 for i, h in zip(t.customdata, t.hovertext)}
        assert all(f"depth {d} ·" in hover[i] for i, d in enumerate(c.depths)), hover


def test_tree_nodes_coloured_and_shaped_by_primary_source():
    fig = F.tree_figure(cycle1())
    # node 1 was proposed by pld + semantic -> pld (exact match first); node 2 pld; node 3 recycling;
    # node 4 semantic (the key's own)
    assert list(by_meta(fig, "semantic").customdata) == [4]
    assert list(by_meta(fig, "pld").customdata) == [1, 2]
    assert list(by_meta(fig, "recycling").customdata) == [3]
    assert list(by_meta(fig, "root").customdata) == [0]
    for src in ("semantic", "pld", "recycling", "root", "bonus"):
        t = by_meta(fig, src)
        assert t.marker.color == SOURCE_COLOURS[src]
        assert t.marker.symbol == SOURCE_SYMBOLS[src]
    # the node several sources proposed carries a ring, and its hover lists both with scores
    ring = by_meta(fig, "multi-source")
    assert len(ring.x) == 1
    # its label is the ring's, above the ring (the node's own, placed by the smaller marker, ran into it)
    assert list(ring.text) == [F.visible(cycle1().token_text[1])] and ring.mode == "markers+text"
    assert ring.cliponaxis is False and by_meta(fig, "pld").cliponaxis is False     # a top row's label stays whole
    # a selected node's ring goes outside the several-sources ring, which it would hide
    assert by_meta(F.tree_figure(cycle1(), selection=1), "selection").marker.size > ring.marker.size
    assert by_meta(fig, "pld").text[0] == "" and by_meta(fig, "pld").text[1] == F.visible(cycle1().token_text[2])
    both = by_meta(fig, "pld")
    assert "prompt lookup 1" in both.hovertext[0] and "semantic key 0.91" in both.hovertext[0]   # named as the key names them
    assert "verifier's next token after it (argmax): ↵" in both.hovertext[0]


def test_tree_accepted_path_bold_rejected_faded_dashed():
    fig = F.tree_figure(cycle1())
    acc, rej, bon = by_meta(fig, "edges-accepted"), by_meta(fig, "edges-rejected"), by_meta(fig, "edges-bonus")
    assert acc.line.width == STATUS_STYLES["accepted"].width > rej.line.width
    assert acc.line.dash == "solid" and rej.line.dash == "dash" and bon.line.dash == "dot"
    assert rej.opacity < acc.opacity
    # accepted edges 0->1, 1->2; rejected 0->3, 1->4 (segments are separated by None)
    assert sum(x is None for x in acc.x) == 2 and sum(x is None for x in rej.x) == 2
    # accepted node 2 is opaque, rejected node 4 faded (in the pld and the semantic trace)
    assert list(by_meta(fig, "pld").marker.opacity)[1] == STATUS_STYLES["accepted"].opacity
    assert list(by_meta(fig, "semantic").marker.opacity) == [STATUS_STYLES["rejected"].opacity]


def test_tree_legend_lists_everything_even_on_the_empty_prefill_cycle():
    prefill = request_oilbird().cycles[0]
    for cyc in (cycle1(), prefill):
        fig = F.tree_figure(cyc)
        names = legend_names(fig)
        assert {source_label(s) for s in ALL_SOURCES} <= names
        assert {"accepted path", "rejected", "bonus token", "several sources"} <= names
    fig = F.tree_figure(prefill)
    assert not any(t.meta in PRECEDENCE for t in fig.data)      # no draft nodes
    assert "prefill" in fig.layout.annotations[0].text


def test_tree_of_a_cut_last_cycle_shows_only_what_was_committed():
    """The output ended inside the accepted path (token limit or EOS): the accepted drafts past
    it look neither accepted nor rejected, no bonus is drawn, and the title, the counter, the
    text and the metrics all count the same committed tokens."""
    r = request_truncated(committed=2)                   # accepted B C D, bonus E; only B C committed
    c = r.cycles[1]
    fig = F.tree_figure(c)
    title = fig.layout.title.text
    assert "3 of 4 drafts accepted, 2 committed" in title and "no bonus: the output stops here" in title
    assert "+ bonus" not in title
    assert not any(t.meta == "bonus" for t in fig.data)                   # E was never committed
    unc = by_meta(fig, "edges-uncommitted")                              # C -> D
    assert sum(x is None for x in unc.x) == 1 and sum(x is None for x in by_meta(fig, "edges-accepted").x) == 2
    style = STATUS_STYLES["uncommitted"]
    assert unc.line.dash not in ("solid", "dash", "dot")                  # not accepted, rejected, bonus
    assert STATUS_STYLES["rejected"].opacity < style.opacity < STATUS_STYLES["accepted"].opacity
    assert style.label in legend_names(fig)
    sem = by_meta(fig, "semantic")                                       # node 3 = D
    assert list(sem.marker.opacity) == [style.opacity] and "not committed" in sem.hovertext[0]
    # every view counts 2 tokens this cycle, 3 in all
    assert "2 committed this cycle (the output stops here)" in F.counter_html(r, 1)
    assert F.committed_upto(r, 1) == 3 == len(r.output_ids)
    assert "3 of 3 tokens" in F.text_figure(r, 1).layout.title.text
    assert "2 committed, no bonus: the output stops here" in by_meta(F.metrics_figure(r), "per-cycle").hovertext[1]
    # the uncommitted status is keyed only where it occurs
    assert style.label not in legend_names(F.tree_figure(cycle1()))
    assert not any(t.meta == "edges-uncommitted" for t in F.tree_figure(cycle1()).data)


def test_tree_bonus_only_when_committed_and_labelled_with_its_own_text():
    every_draft = request_truncated(committed=3).cycles[1]               # B C D, no room for E
    fig = F.tree_figure(every_draft)
    assert not any(t.meta == "bonus" for t in fig.data)
    assert not any(t.meta == "edges-uncommitted" for t in fig.data)
    assert "3 of 4 drafts accepted, 3 committed" in fig.layout.title.text and "no bonus" in fig.layout.title.text
    full = request_truncated(committed=4)
    fig = F.tree_figure(full.cycles[1])
    assert list(by_meta(fig, "bonus").text) == ["E"]
    assert fig.layout.title.text.split("<br>")[1].startswith("3 of 4 drafts accepted + bonus")
    assert "replayed" not in fig.layout.title.text
    # a replay's tree says in its title whose verdict the counts are (a figure shown on its own)
    replayed = F.tree_figure(full.cycles[1], replay=True).layout.title.text
    assert "replayed (the recording decides)" in replayed and "3 of 4 drafts accepted + bonus" in replayed
    assert "stops here" not in F.counter_html(full, 1)
    assert list(by_meta(F.tree_figure(request_oilbird().cycles[0]), "bonus").text) == ["Hi"]   # prefill


def test_tree_bonus_never_sits_on_a_draft_node():
    """Inner nodes sit on fractional rows: the root of this tree is at y = -1.75, a quarter row
    from node 2 in the column where its bonus goes; the bonus moves to the nearest spot a row
    and a half clear of that column's nodes (at -0.5, -2, -3: none between them; 1.0 above and
    -4.5 below are as near, so above), where its larger marker keeps off their labels."""
    parents = [-1, 0, 0, 0, 1, 1]
    pos = F.tree_layout(parents)
    c = CycleTrace(request_id="r", method="m", cycle=1, prefix_len=3, generated_before=1,
                   tokens=[1, 2, 3, 4, 5, 6], token_text=list("abcdef"), parents=parents,
                   depths=[0, 1, 1, 1, 2, 2], sources=[[]] + [["pld"]] * 5, argmax=[9] * 6,
                   argmax_text=["z"] * 6, accepted=[0], bonus=9, committed=[9], committed_text=["z"],
                   committed_sources=[["bonus"]])
    bonus = by_meta(F.tree_figure(c), "bonus")
    bx, by = bonus.x[0], bonus.y[0]
    assert sorted(y for x, y in pos.values() if x == bx) == [-3.0, -2.0, -0.5]
    assert by == 1.0                                                      # the nearest free spot, above
    lo, hi = F.tree_spec(c)["layout"]["yaxis"]["range"]
    assert lo < by < hi


def test_tree_layout_is_tidy():
    pos = F.tree_layout([-1, 0, 1, 0, 1])
    assert [pos[i][0] for i in range(5)] == [0, 1, 2, 1, 2]          # x = depth
    assert len({pos[i] for i in range(5)}) == 5                      # no overlaps
    assert pos[1][1] == (pos[2][1] + pos[4][1]) / 2                   # parent centred on its children


# --------------------------------------------------------------------------- text, neighbours, gap

def test_text_figure_colours_tokens_by_delivering_source():
    fig = F.text_figure(request_oilbird(), cycle=1)
    lines = by_meta(fig, "text").text
    assert len(lines) == 2                                          # "Hi·there↵" then "!!"
    assert f"color:{ink(SOURCE_COLOURS['bonus'])}'>Hi" in lines[0]        # the hue, dark enough to read
    assert f"color:{ink(SOURCE_COLOURS['pld'])}'><b><u>·there" in lines[0]   # cycle 1 is emphasised; pld + semantic: pld
    assert f"color:{ink(SOURCE_COLOURS['pld'])}'><b><u>↵" in lines[0]
    assert {source_label(s) for s in DRAFT_SOURCES + ("bonus",)} <= legend_names(fig)
    assert source_label("suffix-arctic") not in legend_names(fig)   # a peer's source: only where present


def test_every_source_is_told_apart_without_hue_where_hues_draw_close():
    """A cue beside the colour, checked: the text's letters read (WCAG AA on the cycle's highlight),
    the underline styles and the comparison's fill patterns differ for the pairs that draw close
    under a colour-vision deficiency."""
    from workbench.palette import SOURCE_PATTERNS, TEXT_HIGHLIGHT, contrast
    from workbench.panels.text import NOW_BACKGROUND, TEXT_BORDERS
    over_white = "#" + "".join(f"{round(int(NOW_BACKGROUND[k:k + 2], 16) * 0.4 + 255 * 0.6):02X}" for k in (1, 3, 5))
    assert NOW_BACKGROUND.endswith("66") and contrast(TEXT_HIGHLIGHT, over_white) < 1.02
    for src, colour in SOURCE_COLOURS.items():
        assert contrast(ink(colour), TEXT_HIGHLIGHT) >= 4.5, src
    close = [("semantic", "bonus"), ("suffix", "pld"), ("suffix", "recycling"), ("pld", "recycling"),
             ("rejected", "recycling"), ("suffix", "suffix-arctic"), ("pld", "rejected")]
    for a, b in close:
        assert TEXT_BORDERS[a] != TEXT_BORDERS[b] and SOURCE_PATTERNS[a] != SOURCE_PATTERNS[b], (a, b)
    html = F.text_html(request_oilbird(), cycle=1)
    assert f"color:{ink(SOURCE_COLOURS['pld'])};border-bottom:3px double {SOURCE_COLOURS['pld']}" in html
    assert "italics" not in F.text_figure(request_goose()).layout.title.text      # no key's token to set so
    # the key on a line of its own, which an export's width holds (after the counts it was cut), and
    # no "hover" in a figure that may be a static image; the cycle's tokens are said
    title = F.text_figure(request_oilbird(), cycle=1).layout.title.text
    lines = [re.sub("<[^>]+>", "", x) for x in title.split("<br>")]
    assert lines[1].startswith("colour: one source per token") and "hover" not in title
    assert "this cycle's in bold, underlined" in lines[1] and len(lines[1]) * F.CHAR_EM * 13 < 1200 - 20
    cmp = F.compare_figure(request_oilbird(), request_oilbird(), 0)
    bars = [t for t in cmp.data if t.type == "bar" and t.showlegend]
    assert {t.legendgroup: t.marker.pattern.shape for t in bars}["semantic"] == SOURCE_PATTERNS["semantic"]
    # the comparison's areas: two sources with one fill pattern print apart in greyscale (the suffix
    # index's sky blue and the bonus's orange printed one grey; at 700 px no pattern shows at all)
    from workbench.palette import _luminance, area_colour
    for a, b in itertools.combinations(SOURCE_PATTERNS, 2):
        if SOURCE_PATTERNS[a] == SOURCE_PATTERNS[b]:
            assert abs(_luminance(area_colour(a)) - _luminance(area_colour(b))) > 0.15, (a, b)
    assert {t.legendgroup: t.marker.color for t in bars}["bonus"] == area_colour("bonus") != SOURCE_COLOURS["bonus"]


def test_text_html_marks_sources_and_current_cycle():
    html = F.text_html(request_oilbird(), cycle=0)
    assert html.count('class="tok"') == 1 and 'data-source="bonus"' in html
    html = F.text_html(request_oilbird(), cycle=1)
    assert html.count('class="tok"') == 4
    assert html.count("background:") == 4 and "this cycle's tokens</span>" in html   # cycle 1's 3 tokens, keyed
    # a token's hover names its sources as the legend beside it does, not by their code names
    assert "delivered by prompt lookup, semantic key" in html and "delivered by pld" not in html


def test_the_text_box_is_as_tall_at_every_cycle():
    """Under the tokens so far, the whole output invisible: the box (and the tree below it) does
    not move as the output grows; the ghost holds every token at the first cycle as at the last."""
    import re
    r = request_oilbird()
    ghosts = {re.search(r'class="wb-text-ghost"[^>]*>(.*?)</div>', F.text_html(r, k)).group(1)
              for k in range(len(r.cycles))}
    [ghost] = ghosts
    assert ghost.count("<span") == len(r.output_text) and "visibility:hidden" in F.text_html(r, 0)
    # its tokens wrap as the shown ones do (whole, between tokens: the app's .tok is white-space:pre)
    assert ghost.count('style="white-space:pre;') == len(r.output_text)


def test_the_tree_title_holds_still_from_cycle_to_cycle():
    """The title's first line a fixed distance from the figure's top (plotly centred it in a top
    margin that grows with its lines), and two lines at the prefill as at a drafting cycle."""
    r = request_oilbird()
    for k in range(len(r.cycles)):
        lay = F.tree_spec(r.cycles[k])["layout"]
        title = lay["title"]
        assert (title["yanchor"], title["yref"]) == ("top", "container")
        assert round((1 - title["y"]) * lay["height"]) == 26                    # px from the top, at any height
        assert title["text"].count("<br>") >= 1, k


def test_a_requests_trees_keep_one_height_and_fit_a_projector():
    """Stepping through a request the tree's height changed with each cycle's leaves (422 to 722
    px in one request), so every panel below it moved; with the request's rows (trace_marks) every
    cycle has the widest tree's height, and a tree of many leaves closes its rows up toward
    TREE_MAX_HEIGHT before it runs off a projector."""
    from oilbird.trace import load_traces
    from workbench.panels.tree import TREE_MAX_HEIGHT
    r = load_traces(Path(__file__).parent.parent / "assets" / "traces" / "real-traffic.jsonl.gz")[0]
    own = {F.tree_spec(c)["layout"]["height"] for c in r.cycles}
    kept = {F.tree_spec(c, **F.trace_marks(r))["layout"]["height"] for c in r.cycles}
    assert len(own) > 1 and len(kept) == 1 and max(kept | own) <= TREE_MAX_HEIGHT
    for c in r.cycles:           # the top row where it was: the rows below are the request's
        mine = F.tree_spec(c)["layout"]["yaxis"]["range"]
        held = F.tree_spec(c, **F.trace_marks(r))["layout"]["yaxis"]["range"]
        assert held[1] == mine[1] and held[0] <= mine[0]

    def wide(n):                 # a root and n - 1 leaves under it
        return CycleTrace(request_id="r", method="m", cycle=1, prefix_len=3, generated_before=1, tokens=list(range(n)),
                          token_text=["t"] * n, parents=[-1] + [0] * (n - 1), depths=[0] + [1] * (n - 1),
                          sources=[[]] + [["pld"]] * (n - 1), argmax=[9] * n, argmax_text=["z"] * n, accepted=[0],
                          bonus=9, committed=[9], committed_text=["z"], committed_sources=[["bonus"]])
    s = F.Style()
    for leaves in (14, 30):      # rows close up, never so far that a label touches the next row's marker
        lay = F.tree_spec(wide(leaves + 1))["layout"]
        rows = lay["yaxis"]["range"][1] - lay["yaxis"]["range"][0]
        plot = lay["height"] - lay["margin"]["t"] - lay["margin"]["b"]
        assert rows >= leaves and plot / rows >= s.node_size + s.font_size - 0.5
        assert (lay["height"] <= TREE_MAX_HEIGHT) == (leaves == 14)


def test_the_lexical_key_column_counts_the_exact_match_sources_as_the_funnel_does():
    """One definition of "lexical" in every view (oilbird.trace.LEXICAL_SOURCES), read from the
    tree: a neighbour's first token that token recycling alone proposed is no lexical reach (the
    funnel credits the key with it), whatever an older trace recorded in lexical_reachable."""
    from oilbird.evaluation.funnel import cycle_facts
    from oilbird.trace import LEXICAL_SOURCES, lexically_reachable
    assert "recycling" not in LEXICAL_SOURCES and {"pld", "suffix"} <= LEXICAL_SOURCES
    c = copy.deepcopy(cycle1())
    nb = c.neighbours[0]
    c.sources[1] = ["recycling", "semantic"]              # the first token: recycling's and the key's
    nb.lexical_reachable = True                            # as a trace that counted recycling recorded it
    assert not lexically_reachable(c, nb)
    assert [list(col) for col in F.neighbours_figure(c).data[0].cells.values][6] == ["no"]
    req = replace(request_oilbird(), cycles=[request_oilbird().cycles[0], c], output_ids=[10, 11, 12, 99])
    facts = [f for f in cycle_facts(req) if f.t == 1]
    assert facts and not facts[0].lexical_had
    c.sources[1] = ["suffix", "semantic"]
    assert lexically_reachable(c, nb) and [list(col) for col in F.neighbours_figure(c).data[0].cells.values][6] == ["yes"]
    assert not lexically_reachable(c, replace(nb, proposed=[]))


def test_a_spine_source_of_ones_own_counts_as_exact_match_where_its_trace_names_it():
    """A trace whose drafter had a spine source of its own ("mine") names it in
    meta["lexical_sources"]: the funnel, the neighbour table and the gap moments count its
    nodes as the exact-match key's, as they count pld's; a trace without the list (an older
    one) keeps the built-in set, where "mine" is no lexical source."""
    from oilbird.evaluation.funnel import cycle_facts
    from oilbird.trace import LEXICAL_SOURCES, lexical_sources
    c = copy.deepcopy(cycle1())
    c.sources[1] = ["mine", "semantic"]
    old = replace(request_oilbird(), cycles=[request_oilbird().cycles[0], c], output_ids=[10, 11, 12, 99])
    new = replace(old, meta={"lexical_sources": ["mine", "pld", "suffix"]})
    assert lexical_sources(old) == LEXICAL_SOURCES and lexical_sources(new) == {"mine", "pld", "suffix"}
    for req, counted in ((old, False), (new, True)):
        facts = [f for f in cycle_facts(req) if f.t == 1]
        assert facts and facts[0].lexical_had is counted
        cells = [list(col) for col in F.neighbours_figure(c, lexical=F.lexical_sources(req)).data[0].cells.values]
        assert cells[6] == ["yes" if counted else "no"]
        html = F.neighbours_html(c, lexical=F.lexical_sources(req))
        assert ("<b>no</b>" in html) is not counted
        # the tree colours the node by it (exact match before the key), and so do the text and compare
        nodes = {d["meta"]: d["customdata"] for d in F.tree_spec(c, **F.trace_marks(req))["data"]
                 if d.get("meta") in ("mine", "semantic") and d.get("customdata")}      # (not the key's entries)
        assert (1 in nodes.get("mine", []), 1 in nodes.get("semantic", [])) == (counted, not counted)
        c.committed_sources[0] = ["mine", "semantic"]
        first = F.text_cells(req, 1)[c.generated_before]
        assert first.source == ("mine" if counted else "semantic")
        bars = {d["meta"] for d in F.compare_spec(req, req, 1)["data"] if d.get("type") == "bar" and d.get("meta")}
        assert ("oilbird:mine" in bars) is counted


def test_a_trace_whose_lexical_sources_are_not_names_is_refused(tmp_path):
    from oilbird.trace import TraceError, load_traces, save_traces
    p = tmp_path / "t.jsonl"
    save_traces([replace(request_oilbird(), meta={"lexical_sources": "pld"})], p)
    with pytest.raises(TraceError, match="meta 'lexical_sources' is not a list of source names"):
        load_traces(p)
    # nor one whose tree is not a budget and a fill's name (the neighbour table reads the fill)
    for tree in ({"budget": 24, "fill": ["expected"]}, {"budget": 24}, "expected", {"budget": "24", "fill": "open"}):
        save_traces([replace(request_oilbird(), meta={"tree": tree})], p)
        with pytest.raises(TraceError, match="meta 'tree' is not"):
            load_traces(p)
    save_traces([replace(request_oilbird(), meta={"tree": {"budget": 24, "fill": "open"}})], p)
    assert load_traces(p)[0].meta["tree"] == {"budget": 24, "fill": "open"}


def test_neighbours_table_and_empty_state():
    fig = F.neighbours_figure(cycle1())
    cells = [list(col) for col in fig.data[0].cells.values]
    assert cells[1] == ["0.910"] and cells[2] == ["r0 @ 5"]
    assert "⟦·there⟧" in cells[3][0] and cells[6] == ["yes"]          # pld proposed " there" too
    # an exported table says what it marks as its cells mark it, and keeps the app's caption
    head = " ".join(fig.data[0].header.values).replace("<br>", " ")
    assert "⟦ ⟧" in head and "[ ]" not in head and "⟦ ⟧ = the record the key found" in fig.layout.title.text
    # a trace that recorded the neighbour's context agreement shows it beside the similarity
    agreeing = copy.deepcopy(cycle1())
    agreeing.neighbours[0].agreement = 9
    cells = [list(col) for col in F.neighbours_figure(agreeing).data[0].cells.values]
    assert cells[1][0].replace("<br>", " ") == "0.910 · 9 agree" and "0.910 · 9 agree" in F.neighbours_html(agreeing)
    empty = F.neighbours_figure(request_oilbird().cycles[2])
    assert "0 retrieved" in empty.layout.title.text
    assert "no neighbours" in F.neighbours_html(request_oilbird().cycles[2])
    assert "empty store" in empty.layout.title.text


def test_neighbours_on_the_prefill_say_nothing_is_drafted():
    """Cycle 0 retrieves nothing because nothing is drafted, not for want of a match or a store."""
    for c in (request_oilbird().cycles[0], request_goose().cycles[0]):
        title, html = F.neighbours_figure(c).layout.title.text, F.neighbours_html(c)
        for text in (title, html):
            assert "cycle 0 is the prefill: nothing is drafted" in text and "empty store" not in text


def _tags(html_text, tag):
    """The attribute dicts of every ``tag`` element of an HTML fragment."""
    from html.parser import HTMLParser

    class P(HTMLParser):
        found: list = []

        def handle_starttag(self, t, attrs):
            if t == tag:
                self.found.append(dict(attrs))
    p = P()
    p.found = []
    p.feed(html_text)
    return p.found


def test_neighbours_html_fits_its_panel():
    """Fixed column shares with context and proposed capped, cells that wrap anywhere (a token
    is one long run: its spaces are '·'), and a scrolling div only as a last resort."""
    page = F.neighbours_html(cycle_neighbours())
    assert "overflow-x:auto" in _tags(page, "div")[0]["style"]
    table = _tags(page, "table")[0]["style"]
    assert "table-layout:fixed" in table and "width:100%" in table
    widths = [float(c["style"].split(":")[1].rstrip("%")) for c in _tags(page, "col")]
    assert len(widths) == len(F.NB_HEADER) and sum(widths) == pytest.approx(100)
    assert max(widths[3], widths[4]) <= 30                               # context, proposed capped
    cells = _tags(page, "td") + _tags(page, "th")
    assert len(cells) == 8 * 7 + 7 and all("overflow-wrap:anywhere" in c["style"] for c in cells)
    # each column says what it means on hover, and the caption says the two a class asks first
    heads = _tags(page, "th")
    assert [h["title"] for h in heads] == list(F.NB_HEADER_HELP) and all(heads[k]["title"] for k in range(7))
    assert "the token after it is our root" in page and "our last N tokens, the root first" in page


@pytest.mark.browser
def test_neighbours_html_fits_a_narrow_panel_in_a_browser():
    from workbench import measure
    if measure.chromium_path() is None:
        pytest.skip("Debian chromium not installed (apt-get install chromium); browsers are never downloaded")
    with measure.browser_page(width=800, height=900) as page:
        page.set_content(f"<div id='panel' style='width:560px'>{F.neighbours_html(cycle_neighbours())}</div>")
        panel, table = page.evaluate("() => [document.getElementById('panel').clientWidth, "
                                     "document.querySelector('.wb-neighbours table').scrollWidth]")
    assert table <= panel


def test_neighbours_figure_is_plain_text_that_fits_its_columns_and_height():
    """Plotly table cells show a styled span as raw HTML, wrap only at spaces, and a static
    export draws only the rows its height holds: so plain text, broken to the column width,
    and a height counted from the lines."""
    for style in (None, Style(width=1000)):
        fig = F.neighbours_figure(cycle_neighbours(), style=style)
        t = fig.data[0]
        assert list(t.columnwidth) == list(F.NB_COLUMN_PX)
        cols = [list(c) for c in t.cells.values]
        assert "⟦·brown⟧" in cols[3][0].replace("<br>", "")                # the matched token marked
        lines = 0
        for row in zip(*cols):
            assert not any(tag in cell for cell in row for tag in ("<span", "<b>", "style="))
            lines += max(cell.count("<br>") + 1 for cell in row)
        for k, cells in enumerate(cols):
            chars = cell_chars(style or Style(), k, Style().font_size - 1)
            assert all(len(line) <= chars for cell in cells for line in cell.split("<br>")), F.NB_HEADER[k]
        assert lines > 8                                                   # long cells were broken
        assert fig.layout.height >= fig.layout.margin.t + 24 * 8 + 14 * (lines - 8) + 24
    short = F.neighbours_figure(cycle_neighbours(2)).layout.height
    assert short < F.neighbours_figure(cycle_neighbours(8)).layout.height
    lt = F.neighbours_figure(replace(cycle1(), neighbours=[replace(cycle1().neighbours[0], context_text=["<b>", "x"])]))
    assert "&lt;b&gt;" in lt.data[0].cells.values[3][0]                   # a token's own markup is text


def test_a_chain_that_never_entered_the_tree_is_not_counted_as_rejected():
    """A neighbour with no walked node was never verified: "not in the tree", with the reason,
    not "0 / its proposed length"; one that proposed nothing is a dash."""
    c = cycle_neighbours()
    fig = F.neighbours_figure(c)
    acc = [x.replace("<br>", " ") for x in fig.data[0].cells.values[5]]
    assert acc[-2:] == ["not in the tree*"] * 2 and acc[1] == "—"
    assert "0 / 16" not in acc and "0 / 17" not in acc                    # not 0 of its proposed length
    assert "not in the tree: no node was left for it" in fig.layout.title.text.replace("<br>", " ")
    page = F.neighbours_html(c)
    assert page.count(">not in the tree*<") == 2 and "0 / 16" not in page and "0 / 17" not in page
    assert "title='no node was left for it" in page and "* not in the tree: no node was left" in page
    muted = replace(c, semantic_muted=True, neighbours=[replace(n, walked_nodes=[], why_no_node="muted")
                                                        for n in c.neighbours])
    assert "muted by self-calibration: looked up, not drafted" in F.neighbours_html(muted)
    assert "not in the tree" not in F.neighbours_html(cycle1())


def test_no_neighbours_reason_is_the_cycle_record():
    """Where nothing was retrieved the panel says the one outcome the drafter recorded, in the
    trace's words, and the store's size where recorded."""
    from oilbird.trace import RETRIEVAL_OUTCOMES

    def why(c):
        title = F.neighbours_figure(c).layout.title.text
        page = F.neighbours_html(c)
        assert "no neighbours" in page
        return (title + page).replace("<br>", " ")
    base = replace(cycle1(), neighbours=[], lexical_match_len=15)
    for outcome in ("gate-closed", "no-query", "empty-store", "no-root-match", "muted"):
        text = why(replace(base, retrieval=outcome))
        assert RETRIEVAL_OUTCOMES[outcome] in text
        assert all(RETRIEVAL_OUTCOMES[o] not in text for o in ("gate-closed", "empty-store") if o != outcome)
    held = why(replace(base, retrieval="below-floor", store_records=40))
    assert "below the similarity floor (0.80)" in held and "0 retrieved from 40 records in the store" in held
    assert "records in the store" not in why(replace(base, store_records=None))
    assert "goose drafts without the semantic key" in why(request_goose().cycles[2])
    # a method without the key retrieves nothing from a store it never asks: no count of its records
    assert "records in the store" not in why(replace(base, retrieval="no-source", store_records=447, method="goose"))


def test_a_neighbours_proposal_says_which_tokens_were_accepted_and_which_got_no_node():
    """Why a right record gave less than it held: of its proposal, the accepted tokens (bold), those
    in the tree and rejected (plain), those that got no node (grey; in the figure after ¦)."""
    from oilbird.trace import Neighbour
    nb = Neighbour(record=3, request_id="r0", position=5, similarity=0.95, proposed=[1, 2, 3, 4],
                   proposed_text=['"', "JFK", '",', "·dest"], context_text=["a", "b"], context_index=0,
                   paid_nodes=[5, 6], walked_nodes=[1, 5, 6], accepted=2)
    c = replace(cycle1(), neighbours=[nb])
    [row] = F.neighbour_table(c).rows
    assert row.parts == ('"JFK', '",', "·dest") and row.proposed == '"JFK",¦·dest'
    assert """<b>"JFK</b>",<span style='color:#767676' title='no node in the tree'>·dest</span>""" in F.neighbours_html(c)
    assert "after ¦ = no node in the tree" in F.neighbours_figure(c).layout.title.text
    dash = replace(nb, proposed=[], proposed_text=[], walked_nodes=[], paid_nodes=[], accepted=0,
                   why_no_node="no-tokens")
    assert F.neighbour_table(replace(c, neighbours=[dash])).rows[0].proposed == "— (copy depth 0)"
    # nothing proposed: no first token to ask the lexical sources about (a bold "no" read as the key's find)
    assert F.neighbour_table(replace(c, neighbours=[dash])).rows[0].lexical_cell == "—"
    assert "<b>no</b>" not in F.neighbours_html(replace(c, neighbours=[dash]))
    assert F.neighbour_table(c).rows[0].lexical_cell in ("yes", "no")
    low = replace(dash, why_no_node="below-floor")        # looked up below the entry floor: not the copy depth
    assert F.neighbour_table(replace(c, neighbours=[low])).rows[0].proposed == "— (below the entry floor)"
    # a model name is text, not markup, in the HTML counter
    from wb_traces import request_oilbird as one
    from workbench.panels.cycle import counter_html
    odd = replace(one(), model="<img src=x>", meta={"live": True})
    assert "<img" not in counter_html(odd, 1) and "live run of &lt;img src=x&gt;" in counter_html(odd, 1)


def test_a_cut_neighbour_says_what_the_fill_priced_it_at_and_the_tree_hover_prices_nodes():
    """Where the trace recorded the fill's prices, a chain the fill cut says what its first token
    left out was worth ("next 0.0625"), and a footnote names the bar it did not clear (the last
    node the fill took); the cell's hover says which of the fill's nodes outbid it, the chain's
    own nodes aside; the tree's hover gives every node's price. A trace without them says neither."""
    from oilbird.trace import Neighbour
    r = request_oilbird()          # cycle 1: 10 -> 11 -> 12, 10 -> 13, 11 -> 14; 0 1 2 accepted; truth 11 12 99
    nb = Neighbour(record=3, request_id="r0", position=5, similarity=0.95, proposed=[11, 12, 77],
                   proposed_text=[" there", "\n", "x"], context_text=["a", "b"], context_index=0,
                   paid_nodes=[1, 2], walked_nodes=[1, 2], accepted=2, left_out=0.0625)
    out = replace(nb, proposed=[5], proposed_text=["x"], walked_nodes=[], paid_nodes=[], accepted=0,
                  why_no_node="budget", left_out=0.0031)
    n = len(r.cycles[1].tokens)
    prices = [1.0] + [0.5 / k for k in range(1, n)]                  # 1, 0.5, 0.25, 0.167, 0.125
    c = replace(r.cycles[1], neighbours=[nb, out], prices=prices, fill_bar=0.125, fill_from=1)
    t = F.neighbour_table(c, request=r)
    assert [row.accepted_cell for row in t.rows] == ["2 / 2 · right for 2 · next 0.0625",
                                                     "not in the tree* · right for 0 · next 0.0031"]
    assert t.footnotes[-1].endswith("the last node the tree took was worth 0.125") and "next p" in t.footnotes[-1]
    assert "path through the first token it left out" in t.footnotes[-1]
    assert "next 0.0625" in F.neighbours_html(c, request=r) and "worth 0.125" in F.neighbours_html(c, request=r)
    # what outbid it: nodes 3 and 4 (13 under the root, 14 under 11), both rejected; its own 1 and 2
    # were priced above it too, but they are its chain, not rivals
    said = "the fill took 2 nodes worth more (0.125 to 0.167): 0 accepted, 2 rejected, 0 never reached"
    assert t.rows[0].outbid == said and said in F.neighbours_html(c, request=r)
    assert t.rows[1].outbid.startswith("the fill took 4 nodes worth more (0.125 to 0.5): 2 accepted, 2 rejected")
    assert F.outbid(c, 0.2) == "the fill took 2 nodes worth more (0.25 to 0.5): 2 accepted, 0 rejected, 0 never reached"
    assert F.outbid(replace(c, fill_from=None), 0.01) == "" and F.outbid(c, 1.0) == ""
    # the figure (an export's, a notebook's: its cells have no hover) says it under the table, by row
    def under(cyc):
        return " ".join(re.sub(r"<[^>]+>", " ", F.neighbours_figure(cyc, request=r).layout.title.text).split())
    assert "cut where" not in under(c)          # its next token, 77, was wrong (right for 2): the cut lost nothing
    right = replace(nb, proposed=[11, 12, 99], proposed_text=[" there", "\n", "!!"])     # right for 3
    title = under(replace(c, neighbours=[right, out]))
    assert f"#0 cut where the fill priced its next token 0.0625: {said}" in title
    assert "#1 cut where" not in title           # right for 0: nothing lost either
    twice = replace(c, neighbours=[right, replace(right, similarity=0.9)])      # two chains cut alike: one line
    title = under(twice)
    assert f"#0, #1 cut where the fill priced its next token 0.0625: {said}" in title and title.count(said) == 1
    assert "the exact-match head placed" not in title                   # fill_from 1: the fill placed every node
    head = F.neighbour_table(replace(c, fill_from=3), request=r).footnotes[-1]
    assert head.endswith("the exact-match head placed 2 of the tree's 4 nodes before the fill's contest")
    # a chain rejected inside the tree lost nothing to the cut: no price is said for it
    rejected = replace(c, neighbours=[replace(nb, accepted=1)])
    assert "next" not in F.neighbour_table(rejected, request=r).rows[0].accepted_cell
    hovers = lambda cyc: " ".join(h for tr in F.tree_figure(cyc).data for h in (tr.hovertext or ()))  # noqa: E731
    assert "worth 0.25 to the fill" in hovers(c) and "worth 1 to" not in hovers(c)     # node 2's; not the root's
    head = replace(c, fill_from=2)                                   # node 1 placed by the exact-match head
    assert "priced 0.5, but placed before the fill by the exact-match head" in hovers(head)
    assert F.price(0.0) == "0" and F.price(2.4e-05) == "2.4e-05" and F.price(0.01734) == "0.0173"
    plain = replace(r.cycles[1], neighbours=[replace(nb, left_out=None)])
    assert not any("next p" in f for f in F.neighbour_table(plain, request=r).footnotes)
    assert "next" not in F.neighbour_table(plain, request=r).rows[0].accepted_cell
    assert "to the fill" not in hovers(plain) and "node 2" in hovers(plain)


def test_a_neighbour_says_how_far_it_was_right_and_a_chain_without_nodes_opens_with_the_mark():
    """Given its request, the table says how many tokens of each record's continuation (before
    any cut: proposed + withheld) equal the output from the cycle on: "1 / 2 · right for 3" is a
    right neighbour the tree cut short. Without the request it cannot say, and does not. A chain
    that got no node at all has its whole proposal after the figure's ¦ (it read as in the tree)."""
    from oilbird.trace import Neighbour
    r = request_oilbird()                      # output 10 11 12 99 2; cycle 1 starts at output token 1
    nb = Neighbour(record=3, request_id="r0", position=5, similarity=0.95, proposed=[11, 12],
                   proposed_text=[" there", "\n"], context_text=["a", "b"], context_index=0,
                   paid_nodes=[1], walked_nodes=[1], accepted=1, withheld=[99, 7])
    wrong = replace(nb, similarity=0.9, proposed=[5], proposed_text=["x"], walked_nodes=[], paid_nodes=[],
                    accepted=0, why_no_node="budget", withheld=[])
    c = replace(r.cycles[1], neighbours=[nb, wrong])
    rows = F.neighbour_table(c, request=r).rows
    assert [row.right for row in rows] == [3, 0]
    assert rows[0].accepted_cell == "1 / 1 · right for 3"
    assert rows[1].accepted_cell == "not in the tree* · right for 0"
    assert "1 / 1 · right for 3" in F.neighbours_html(c, request=r)
    assert "1 / 1 · right for 3" in str(F.neighbours_figure(c, request=r).data[0].cells.values).replace("<br>", " ")
    assert [row.right for row in F.neighbour_table(c).rows] == [None, None]     # no request: not said
    assert F.neighbour_table(c).rows[0].accepted_cell == "1 / 1"
    assert rows[1].proposed == "¦x"                                    # no node at all: all after the mark
    # the footnote says why a chain found no node left, by the fill its trace records
    reserved = F.neighbour_table(c, request=replace(r, meta={"tree": {"budget": 12, "fill": "reserved"}}))
    expected = F.neighbour_table(c, request=replace(r, meta={"tree": {"budget": 12, "fill": "expected"}}))
    assert reserved.footnotes == ["* not in the tree: no node was left for it: more similar neighbours took the "
                                  "semantic budget"]
    assert "other candidates were worth more (the fill prices every node" in expected.footnotes[0]
    assert "under the expected and open fills" in F.neighbour_table(c, request=r).footnotes[0]   # not recorded
    # the output ends inside the accepted path (its token limit): the verifier endorsed the whole
    # path, so a neighbour is right for at least what it got accepted
    cut = replace(r, output_ids=r.output_ids[:2])                     # output ends after cycle 1's first token
    assert F.neighbour_table(c, request=cut).rows[0].right >= 1 and c.accepted[1:] and len(cut.output_ids[1:]) == 1
    whole = replace(nb, proposed=[11, 12], withheld=[], walked_nodes=[1, 2], accepted=2)
    limit = replace(c, neighbours=[whole], stop="limit")
    assert F.neighbour_table(limit, request=cut).rows[0].right == 2   # the path: 11 12
    # an end-of-sequence token ends the output for good: the tokens past it in the path are no truth
    assert F.neighbour_table(replace(limit, stop="eos"), request=cut).rows[0].right == 1
    last = replace(r.cycles[1], generated_before=len(r.output_ids), neighbours=[nb])  # past the output: unknown
    assert F.neighbour_table(last, request=r).rows[0].right is None
    # the request also names the exact-match sources the "lexical key?" column counts
    own = replace(r, meta={"lexical_sources": ["mine"]})
    mine = replace(c, sources=[set()] + [{"mine"}] * (len(c.sources) - 1))
    assert F.neighbour_table(mine, request=own).rows[0].lexical and not F.neighbour_table(mine).rows[0].lexical


def test_what_the_semantic_key_did_is_one_function():
    """semantic_outcome is the one place the views learn what the key did: the drafter's record,
    never derived from other fields (a cycle whose other fields say otherwise keeps the record)."""
    from workbench.panels import neighbours as N
    base = replace(cycle1(), neighbours=[], lexical_match_len=15)
    assert F.semantic_outcome(cycle1()).outcome == N.RETRIEVED
    assert F.semantic_outcome(request_oilbird().cycles[0]).outcome == N.PREFILL
    assert F.semantic_outcome(request_goose().cycles[2]).outcome == N.NO_SOURCE
    held = F.semantic_outcome(replace(base, retrieval="below-floor", store_records=0, lexical_match_len=0))
    assert held.outcome == N.BELOW_FLOOR and held.floor == 0.8
    assert F.neighbour_result(cycle1(), cycle1().neighbours[0]) == ("1 / 2", "")


def test_the_views_read_what_the_drafter_recorded():
    """Where the cycle records the key's outcome and floor, and each neighbour why it got no
    node, the panel says exactly that, whatever the other fields would suggest."""
    base = replace(cycle1(), neighbours=[], lexical_match_len=15)          # derived: "empty store" or below
    for outcome, floor, said in (("below-floor", 0.7, "below the similarity floor (0.70)"),
                                 ("no-query", 0.8, "no hidden state to look up with"),
                                 ("gate-closed", 0.8, "its gate was closed"),
                                 ("empty-store", 0.8, "an empty store")):
        c = replace(base, retrieval=outcome, retrieval_floor=floor)
        assert F.semantic_outcome(c).outcome == outcome
        for text in (F.neighbours_html(c), F.neighbours_figure(c).layout.title.text.replace("<br>", " ")):
            assert said in text and "; or " not in text
    muted = replace(base, retrieval="below-floor", retrieval_floor=0.8, semantic_muted=True)
    assert "muted by self-calibration; the best matches were below" in F.neighbours_html(muted)
    nb = cycle1().neighbours[0]                                            # walked 2 nodes, accepted 1
    assert F.neighbour_result(cycle1(), nb) == ("1 / 2", "")
    assert F.neighbour_result(cycle1(), replace(nb, why_no_node="budget")) == \
        (F.NOT_IN_TREE, NO_NODE_REASONS["budget"])
    assert F.neighbour_result(cycle1(), replace(nb, why_no_node="no-tokens"))[0] == "—"
    page = F.neighbours_html(replace(cycle1(), neighbours=[replace(nb, walked_nodes=[], why_no_node="muted")]))
    assert "* not in the tree: the semantic source was muted" in page


def test_twin_panels_format_one_row_list(monkeypatch):
    """The figure and the HTML of the text, neighbours and gap panels are two renderers of one
    row list: mark a row and both show the mark."""
    from workbench.panels import gap, neighbours, text
    rows = {"text": text.text_cells, "neighbours": neighbours.neighbour_table, "gap": gap.gap_cells}
    monkeypatch.setattr(text, "text_cells", lambda *a: [replace(t, delivered_by="MARK-T") for t in rows["text"](*a)])
    monkeypatch.setattr(neighbours, "neighbour_table", lambda *a: replace(
        rows["neighbours"](*a), footnotes=["MARK-N"], empty_why="MARK-E"))
    monkeypatch.setattr(gap, "gap_cells", lambda *a: replace(rows["gap"](*a), inconsistent="MARK-G"))
    r = request_oilbird(LABELS)
    assert "MARK-T" in F.text_html(r, 1) and "MARK-T" in by_meta(F.text_figure(r, 1), "text").hovertext[0]
    for c, mark in ((cycle_neighbours(), "MARK-N"), (request_oilbird().cycles[2], "MARK-E")):
        assert mark in F.neighbours_html(c) and mark in F.neighbours_figure(c).layout.title.text
    assert "MARK-G" in F.gap_strip_html(r, 1) and "MARK-G" in F.gap_strip_figure(r, 1).layout.annotations[0].text

def test_views_know_the_methods_without_loading_torch():
    """The figures and menus read oilbird.methods, not oilbird.presets (which loads torch): the
    app's preview is up before the model stack has been imported."""
    import subprocess
    import sys
    code = ("import sys, workbench.figures, workbench.session; "
            "from oilbird.methods import has_semantic as h, semantic_gated as g; "
            "assert h('oilbird:expected') and not h('goose') and not h('suffix-arctic') and not h('nope'); "
            "assert g('oilbird') and not g('oilbird-ungated'); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_similarity_floor_shown_is_the_semantic_sources():
    from oilbird.sources.semantic import SemanticConfig
    assert F.SIMILARITY_FLOOR == SemanticConfig().entry_floor


def test_gap_strip_counts_and_empty_note():
    fig = F.gap_strip_figure(request_oilbird(LABELS), cycle=1)
    for lab in ("lexical_hit", "gap_recovered", "gap_missed", "absent"):
        assert by_meta(fig, lab).marker.color == GAP_COLOURS[lab]
    assert by_meta(fig, "absent").name.endswith("(2)")
    assert list(by_meta(fig, "gap_recovered").x) == [2]
    assert fig.layout.shapes[0].x0 == 0.5 and fig.layout.shapes[0].x1 == 3.5   # tokens 1..3 = cycle 1
    none = F.gap_strip_figure(request_oilbird(None))
    assert len([t for t in none.data if t.showlegend]) == 4                    # legend still there
    assert "--diagnose" in none.layout.annotations[0].text
    assert "--diagnose" in F.gap_strip_html(request_oilbird(None))
    assert F.gap_strip_html(request_oilbird(LABELS), 1).count("outline:") == 3


def test_gap_strip_says_the_outlined_cells_in_words():
    """A projector has no hover: under the strip, the selected cycle's tokens (cycle 1: tokens
    1-3) with their labels and, at a gap token, whether the drafter's key reaches it; runs said
    the same way are one item, a long cycle's rest is counted, not listed, and a token's text is
    escaped (and kept, whatever it is) in the app's line and in an exported strip's title."""
    r = request_oilbird(LABELS)
    r.drafter_reach = [False, True, True, False, False]
    r.output_text = ["Hi", "<b>&'", "…", "\n", ""]                     # markup, a real "…" token, a newline
    page = F.gap_strip_html(r, 1)
    now = page.split("class='gap-now'")[1].split("</div>")[0]
    # token 2 was accepted at depth 2: no cycle's lookup was asked for it (cycle 1's was asked for token 1)
    un = html.escape(", " + DRAFTER_UNASKED, quote=False)
    assert now.endswith("outlined, this cycle's tokens: <code>&lt;b&gt;&amp;'</code> lexical hit · <code>…</code> "
                        f"gap: semantic key reaches; drafter's key reaches it{un} · <code>↵</code> gap missed; "
                        "drafter's key does not reach it")
    said = F.now_words(F.gap_cells(r, 1))
    assert said == [(["<b>&'"], "lexical hit"),
                    (["…"], f"gap: semantic key reaches; drafter's key reaches it, {DRAFTER_UNASKED}"),
                    (["↵"], "gap missed; drafter's key does not reach it")]
    assert "gap-now" not in F.gap_strip_html(r)                          # no cycle selected: no line
    title = F.gap_strip_figure(r, 1).layout.title.text.replace("<br>", " ")   # an export says the same
    assert "outlined, this cycle's tokens: '&lt;b&gt;&amp;'' lexical hit · '…' gap: semantic key reaches; " \
           f"drafter's key reaches it{un} · '↵' gap missed; drafter's key does not reach it" in title
    assert "outlined" not in F.gap_strip_figure(r).layout.title.text
    labels = ["lexical_hit", "absent"] * 10                             # 20 outlined tokens, no two alike in a row
    cells = [F.GapCell(k, lab, f"t{k}", True) for k, lab in enumerate(labels)]
    strip = F.GapStrip("oilbird", 20, cells, {}, (0, 20), "", "")
    said = F.now_words(strip)
    assert len(said) == F.NOW_SHOWN + 1 and said[-1] == ([], "and 4 more tokens")
    assert [ts for ts, _ in said[:2]] == [["t0"], ["t1"]]
    assert F.now_line(strip).endswith("'t15' absent from pool (as a pair) · and 4 more tokens")


def test_gap_strip_says_its_labels_describe_the_output_not_the_method():
    """The labels are one diagnosis of the output: a goose strip's "gap: semantic key reaches"
    does not mean goose used a semantic key."""
    goose = request_goose()
    goose.gap_labels = LABELS
    for text in (F.gap_strip_figure(goose, 1).layout.title.text, F.gap_strip_html(goose, 1),
                 F.gap_strip_html(request_oilbird(None))):
        assert "labels describe the output (the same for every method)" in text
    assert "not how goose drafted it" in F.gap_strip_figure(goose).layout.title.text


def test_gap_strip_says_what_the_pool_is():
    """ "absent from pool" means absent from earlier requests' outputs (oilbird.evaluation.diagnose,
    pool="generated"), not from this request's prompt: the header and every hover say so."""
    r = request_oilbird(LABELS)
    fig = F.gap_strip_figure(r, 1)
    assert "generated outputs of earlier requests only (no prompts; not this request's own output)" \
        in fig.layout.title.text
    absent = by_meta(fig, "absent")
    assert all("occur nowhere in the pool" in h and "earlier requests" in h for h in absent.hovertext)
    page = F.gap_strip_html(r, 1)
    assert "generated outputs of earlier requests" in page.split("gap-row")[0]          # the header
    keys = [t for t in _tags(page, "span") if t.get("class") == "gap-key"]
    assert len(keys) == 4 and all("earlier requests" in k["title"] for k in keys)
    # a replay's pool is the recording's outputs, not text the local model generated; its states are the model's
    rp = replace(r, meta={"replay": {"recorded_by": "gpt-4o"}})
    for text in (F.gap_strip_figure(rp, 1).layout.title.text.replace("<br>", " "), F.gap_strip_html(rp, 1)):
        assert "generated" not in text and "recorded outputs of earlier turns only" in text
        assert f"the key's states are {r.model}'s states" in text
    cells = [t for t in _tags(page, "span") if t.get("class") == "gap-cell"]
    assert "occur nowhere in the pool" in cells[0]["title"]


def test_gap_strip_marks_the_gap_tokens_the_drafters_key_reaches():
    """drafter_reach (diagnose's drafter_hit) marks gap cells only: token 2 (gap, reached by the
    diagnosis' key) is reached by the drafter's key too, token 3 (gap missed) is not; the lexical
    hit at 1 is reached as well but is no gap, so it carries no mark. Counted in the figure's
    legend and title and in the HTML key; a trace without the field says so."""
    r = request_oilbird(LABELS)
    r.drafter_reach = [False, True, True, False, False]
    g = F.gap_cells(r, 1)
    assert [c.drafter for c in g.cells] == [None, None, True, False, None]
    assert g.drafter == F.DrafterCount(marked=1, gaps=2, marked_recovered=1, recovered=1)
    assert "1 of the 2 gap tokens a drafter drafts (1 of the 1 within the semantic key's reach)" in g.drafter_line
    assert "prefill" not in g.drafter_line                  # token 0 is no gap token here
    fig = F.gap_strip_figure(r, 1)
    marks = by_meta(fig, "drafter")
    assert list(marks.x) == [2] and "1 of 2 gap tokens" in marks.name
    # its key swatch is a square, as the moment's bar's: each name says where the mark lies
    moment = by_meta(F.gap_strip_figure(r, 1, moment=(2, 3)), "moment")
    assert marks.name.startswith("band across the top: ") and moment.name.startswith("bar under: ")
    assert "1 of the 2 gap tokens" in fig.layout.title.text
    # drawn as the app draws it (an exported strip matched the screen): a black band over the
    # top of the cell, not a marker above it
    assert marks.type == "bar" and marks.marker.color == "#111111"
    cell = next(d for d in fig.data if d.meta == "gap_recovered")
    assert 0 < marks.base < 1 and marks.base + marks.y[0] == pytest.approx(cell.y[0])
    assert "black band: " in fig.layout.title.text
    page = F.gap_strip_html(r, 1)
    cells = [t for t in _tags(page, "span") if t.get("class") == "gap-cell"]
    assert [c.get("data-drafter") for c in cells] == [None, None, "true", "false", None]
    assert "inset 0 5px" in cells[2]["style"] and "inset" not in cells[3]["style"]
    assert "drafter's own key reaches it" in cells[2]["title"] and "does not reach it" in cells[3]["title"]
    # off the gaps, no mark and no count, but the hover still says whether the key reached it
    assert [c.reach for c in g.cells] == [None, True, True, False, False]
    assert "the drafter's own key (one token behind) reaches it too" in cells[1]["title"]
    assert "does not reach it" in cells[4]["title"] and "inset" not in cells[1]["style"]
    assert "black band: the drafter's own key" in page and "1 of the 2 gap tokens" in page.split("gap-row")[1]
    first = request_oilbird(["gap_missed"] + LABELS[1:])            # a gap at token 0: the prefill's, not counted
    first.drafter_reach = [None, True, True, False, False]
    assert F.gap_cells(first).drafter.gaps == 2 and "the first token, a gap token too, is the prefill's" in (
        F.gap_cells(first).drafter_line)
    goose = replace(r, method="goose")                              # no hidden-state key: no marks, and why
    assert F.gap_cells(goose).drafter is None and not F.drafter_marks(goose)
    assert "goose has no hidden-state key" in F.gap_cells(goose).drafter_line
    # a method of one's own: its trace says it drafts without the key (every cycle "no-source"),
    # so the strip says so, not that the trace is older than the field
    own = replace(request_goose(), method="[suffix+mine]", gap_labels=LABELS, drafter_reach=None)
    assert "[suffix+mine] has no hidden-state key" in F.gap_cells(own).drafter_line
    assert not any(d.meta == "drafter" for d in F.gap_strip_figure(goose).data)
    assert all("drafter's key" not in m.describe() for m in F.gap_moments(goose))
    old = request_oilbird(LABELS)                       # a trace from before the field
    assert F.gap_cells(old).drafter is None and "made before it recorded drafter_reach" in F.gap_strip_html(old)
    assert not any(d.meta == "drafter" for d in F.gap_strip_figure(old).data)
    assert "black band" not in F.gap_strip_figure(old).layout.title.text      # no mark to point at
    quiet = request_oilbird(["lexical_hit", "absent", "lexical_hit", "absent", "absent"])
    quiet.drafter_reach = [False] * 5
    assert "no gap tokens a drafter drafts in this request" in F.gap_cells(quiet).drafter_line
    assert "black band" not in F.gap_strip_html(quiet) and "black band" not in F.gap_strip_figure(quiet).layout.title.text
    assert not any(d.meta == "drafter" for d in F.gap_strip_figure(quiet).data)     # no "0 of 0" legend entry
    first = request_oilbird(["gap_missed", "lexical_hit", "gap_recovered", "absent", "absent"])
    first.drafter_reach = [None, True, True, False, False]       # the prefill gives token 0: not drafted
    g = F.gap_cells(first)
    assert g.cells[0].drafter is None and g.cells[0].prefill and g.drafter.gaps == 1
    assert "no drafter drafts it" in F.gap_strip_html(first)


def test_a_live_run_without_labels_is_not_told_to_rerun_the_cli():
    """A live run has no file to diagnose: say why it has no labels (the session's reason, where
    it gave one), not which command to run on a trace that has no file."""
    live = request_oilbird(None)
    live.meta["live"] = True
    for text in (F.gap_strip_figure(live).layout.annotations[0].text, F.gap_strip_html(live)):
        assert "--diagnose" not in text and "this live run was not labelled" in text
    live.meta["no_labels"] = "this run could not be labelled (MemoryError: )"
    assert "could not be labelled (MemoryError" in F.gap_strip_html(live)
    assert "--diagnose" in F.gap_strip_html(request_oilbird(None))                    # a trace file: it is


def test_a_live_run_labelled_against_its_store_says_so():
    """An app live run's labels are against what its session's store for its method held (not
    one diagnosis of a file, the same for every method): the strip's title, head and key say so,
    and what the pool held (empty on a method's first run, where every token is absent; how many
    earlier runs, and how many of this same request). A notebook's live run, labelled as a file
    is (no ``gap_pool`` mark), keeps the file's words."""
    from oilbird.trace import GAP_POOL_STORE
    labels = ["absent", "lexical_hit", "gap_recovered", "gap_missed", "absent"]
    live = request_oilbird(labels)
    live.meta.update(live=True, gap_pool=GAP_POOL_STORE, gap_pool_runs=2, gap_pool_same=1)
    fig_title, page = F.gap_strip_figure(live).layout.title.text, F.gap_strip_html(live)
    for text in (fig_title, page):
        assert "against oilbird's own store in the live session" in text
        assert "the 2 earlier live runs of oilbird in that session, 1 of them of this same request" in \
            text.replace("<br>", " ")
        assert "the same for every method" not in text and "no gap labels" not in text
    assert "live runs fill a store of their own" in page.split("gap-key")[1]   # the key's hover too
    live.meta.update(gap_pool_runs=1, gap_pool_same=0)
    assert "the 1 earlier live run of oilbird in that session (" in F.gap_strip_html(live)
    live.meta["gap_pool_runs"] = "many"                 # an uploaded file's nonsense: said in general, no error
    assert "the earlier live runs of oilbird" in F.gap_strip_html(live)
    first = request_oilbird(["absent"] * 5)
    first.meta.update(live=True, gap_pool=GAP_POOL_STORE, gap_pool_runs=0, gap_pool_same=0)
    assert "pool = empty: the first live run of oilbird in its session, so every token is absent" in \
        F.gap_strip_html(first)
    assert "pool empty: the first live run of this method" in F.gap_strip_mini_html(first)     # the small strip too
    notebook = request_oilbird(labels)
    notebook.meta["live"] = True
    for shown in (notebook, request_oilbird(labels)):
        assert "the same for every method" in F.gap_strip_figure(shown).layout.title.text
        assert "store" not in F.gap_strip_html(shown)


def test_the_small_strip_is_the_full_strips_cells():
    """The strip kept in view with the buttons: one cell per output token with the full strip's
    labels and hovers, the cycle's tokens outlined and the drafter's band where its key reaches;
    nothing without labels (the full strip says why)."""
    import re
    labels = ["absent", "lexical_hit", "gap_recovered", "gap_missed", "absent"]
    r = request_oilbird(labels)
    r.drafter_reach = [None, False, True, False, False]
    mini, full = F.gap_strip_mini_html(r, 1), F.gap_strip_html(r, 1)
    assert re.findall(r"class='gap-mini' data-label='(\w+)'", mini) == labels
    hovers = lambda h, kind: re.findall(rf"class='{kind}'[^>]*title='([^']*)'", h)   # noqa: E731
    assert hovers(mini, "gap-mini") == hovers(full, "gap-cell")
    assert mini.count("outline:2px solid") == full.count("outline:2px") == 3     # cycle 1 committed tokens 1-3
    assert "outline-offset:-" not in mini          # framed outside: an inset outline hid a thin cell's colour
    assert mini.count("data-drafter='true'") == 1 and "inset 0 3px 0 #111" in mini
    assert "border-bottom:3px double" in mini      # the patterns stay told apart (2 px of "double" is solid)
    assert F.gap_strip_mini_html(request_oilbird(None), 1) == "" == F.gap_strip_mini_html(None)
    # a key of its own (the text's legend nearby gives the same colours other meanings), with counts
    assert all(k in mini for k in ("lexical hit 1", "gap: semantic key reaches 1", "gap missed 1", "absent from pool 2"))
    # 5 tokens: wide cells a projector shows; 300: narrow ones, on one line still
    assert "width:12px" in mini and "pool empty" not in mini
    long = request_oilbird(labels * 60)
    long.output_ids = long.output_ids * 60
    assert "width:2px" in F.gap_strip_mini_html(long, 1)
    # ... without the border patterns, which at 2 px read as one dark line under every colour
    narrow = F.gap_strip_mini_html(long, 1)
    assert "border-bottom:0px" in narrow and "border-bottom:3px" not in narrow
    # the drafter's band is in the small strip's key too
    assert "box-shadow:inset 0 3px 0 #111'></span>drafter&#x27;s key reaches it 1" in mini


# --------------------------------------------------------------------------- metrics, comparison

def test_metrics_panels():
    r = request_oilbird()
    fig = F.metrics_figure(r, cycle=1)
    assert list(by_meta(fig, "per-cycle").y) == [1, 3, 1]
    assert list(by_meta(fig, "cumulative").y) == pytest.approx([1, 2, 5 / 3])
    share = dict(zip(by_meta(fig, "share").x, by_meta(fig, "share").customdata))   # the whole of each bar
    assert share == pytest.approx({"semantic": 0.1, "rejected": 0, "suffix": 0, "pld": 0.3, "recycling": 0,
                                   "bonus": 0.6})
    assert sum(share.values()) == pytest.approx(1.0)
    # each whole share printed over its bar (a printout has no hover), with room over the tallest
    assert dict(zip(by_meta(fig, "share").x, by_meta(fig, "share").text)) == {
        "semantic": "10%", "rejected": "0%", "suffix": "0%", "pld": "30%", "recycling": "0%", "bonus": "60%"}
    assert fig.layout[by_meta(fig, "share").yaxis.replace("y", "yaxis")].range[1] > 0.6
    assert list(by_meta(fig, "stage-verify").y) == pytest.approx([50, 20, 20])
    assert len(fig.layout.shapes) == 3 and fig.layout.shapes[0].x0 == 1
    # one "cycle" axis title, the bottom row's: the top row's ran into the titles of the row below
    titles = [fig.layout[a].title.text for a in fig.layout if a.startswith("xaxis")]
    bottom = by_meta(fig, "stage-verify").xaxis.replace("x", "xaxis")
    assert titles.count("cycle") == 1 and fig.layout[bottom].title.text == "cycle"
    # the share's ticks name sources as every view does; the stages (the figure's only key) take
    # no source's colour, so a share bar is never read as a stage
    axis = fig.layout[by_meta(fig, "share").xaxis.replace("x", "xaxis")]
    assert list(axis.ticktext) == [source_label(k) for k in axis.tickvals]
    stages = {by_meta(fig, f"stage-{st}").marker.color for st in ("draft", "verify", "commit", "update")}
    assert not stages & set(SOURCE_COLOURS.values())


def test_a_replay_says_so_in_the_titles_of_figures_shown_on_their_own():
    """A notebook shows the metrics and the comparison outside the stepper, whose header names the
    replay: their titles say whose tokens the counts are."""
    from dataclasses import replace
    meta = {"replay": {"mode": "fast", "recorded_by": "gpt-4o"}}
    a, b = replace(request_oilbird(), meta=meta), replace(request_goose(), meta=meta)
    assert (f"a fast replay: the recording's tokens; the drafters' trees, keyed on {a.model}'s states"
            in F.metrics_figure(a).layout.title.text)
    exact = replace(a, meta={"replay": {"mode": "exact", "recorded_by": "gpt-4o"}})
    assert "an exact replay: the recording's tokens" in F.metrics_figure(exact).layout.title.text
    assert "replayed (the recording decides)" in F.compare_figure(a, b).layout.title.text
    assert "replay" not in F.metrics_figure(request_oilbird()).layout.title.text
    assert "replayed" not in F.compare_figure(request_oilbird(), request_goose()).layout.title.text
    # each title line closes what it opens (a parenthesis across the break read as unclosed)
    for r in (a, exact, request_oilbird()):
        lines = re.sub("<(?!br)[^>]+>", "", F.metrics_figure(r).layout.title.text).split("<br>")
        assert all(x.count("(") == x.count(")") for x in lines), lines


def test_compare_side_by_side_same_request_only():
    a, b = request_oilbird(), request_goose()
    fig = F.compare_figure(a, b)
    assert "identical outputs" in fig.layout.title.text
    assert list(by_meta(fig, "oilbird:pld").y) == [0, 2, 0]      # cycle 1: " there" (pld + semantic: pld), "\n" (pld)
    assert list(by_meta(fig, "goose:bonus").y) == [1, 1, 1, 1, 1]
    assert by_meta(fig, "oilbird:strip").xaxis != by_meta(fig, "goose:strip").xaxis
    b.output_ids = b.output_ids[:3] + [7, 2]
    assert "differ from token 3" in F.compare_figure(a, b).layout.title.text
    b.request_id = "other"
    with pytest.raises(ValueError, match="same request"):
        F.compare_figure(a, b)


def test_compare_subplot_titles_fit_half_the_figure():
    """ "method: τ" on one line, tokens / forwards on the next: each line fits half the width
    (they ran together at 1400 px and were cut at 1024), even for long method names."""
    import re
    a = replace(request_oilbird(), method="oilbird:expected:cost-aware-with-a-long-name")
    b = replace(request_goose(), method="goose:expected:cost-aware")
    for style in (None, Style(width=1024)):
        s = style or Style()
        titles = [x.text for x in F.compare_figure(a, b, style=style).layout.annotations]
        assert len(titles) == 2
        half = ((s.width or 700) - 50) * 0.47                      # px of one column, less the gap
        for t in titles:
            first, *rest = t.split("<br>")
            assert re.search(r": τ \d\.\d\d$", first) and "tokens /" in rest[0] and "forwards" in rest[0]
            for line in [first] + [re.sub(r"<[^>]+>", "", x) for x in rest]:
                assert len(line) * 0.6 * s.font_size <= half, line
    assert F.compare_figure(request_oilbird(), request_goose()).layout.annotations[0].text.startswith(
        "oilbird: τ 1.67<br>")


def test_compare_says_what_each_sides_store_held():
    """A live run of a session's first request (store empty) beside a shipped trace decoded
    after its file's earlier requests read as "goose beats oilbird": each side says what its
    cross-request store held when it began, where the trace records it."""
    a, b = request_oilbird(), request_goose()
    live = replace(a, meta={"live": True}, cycles=[replace(c, store_records=0 if c.store_records is not None else None)
                                                   for c in a.cycles])
    titles = [x.text for x in F.compare_figure(live, b).layout.annotations[:2]]
    assert "store empty at its start" in titles[0]
    assert "store" not in titles[1]                       # goose's cycles record no store: nothing said
    held = replace(b, cycles=[replace(c, store_records=1234) for c in b.cycles])
    assert "store at its start: 1,234 earlier tokens" in F.compare_figure(live, held).layout.annotations[1].text
    # the third line fits: the title's two lines from the top, then three of a subplot title, then the plots
    lay, s = F.compare_figure(live, held).layout, F.Style()
    assert lay.title.yref == "container" and lay.margin.t >= 26 + 2 * (s.font_size + 2) * 1.3 + 3 * s.font_size * 1.3


def test_panels_name_their_rule_for_a_token_several_sources_proposed():
    """metrics splits such a token's credit; text, comparison and strips colour it by one source,
    exact match first. Both are meant; each panel says which it uses."""
    r = request_oilbird()
    met = F.metrics_figure(r)
    assert "alone + shared" in met.layout.annotations[2].text
    assert "split evenly" in by_meta(met, "share").hovertemplate
    # the solid part: tokens one source alone proposed (pld + semantic shared token 1; pld alone token 2)
    alone, shared = by_meta(met, "alone"), by_meta(met, "share")
    at = {k: i for i, k in enumerate(alone.x)}
    assert alone.y[at["pld"]] == pytest.approx(1 / 5) and alone.y[at["semantic"]] == 0
    assert shared.y[at["semantic"]] == pytest.approx(0.5 / 5) and shared.customdata[at["pld"]] == pytest.approx(1.5 / 5)
    rule = "exact match first"
    assert rule in F.text_figure(r, 1).layout.title.text
    assert rule in F.text_html(r, 1).split("wb-legend")[1]
    cmp = F.compare_figure(r, request_goose())
    assert rule in cmp.layout.legend.title.text
    assert rule in by_meta(cmp, "oilbird:pld").hovertemplate


# --------------------------------------------------------------------------- sources beyond the palette

def test_peer_and_unknown_sources_keep_their_tokens_colour_and_legend():
    """suffix-arctic has its own colour; a source the palette does not know is grey, but is
    still counted in every share and named in every legend."""
    from workbench import lesson as L
    r = relabel(request_oilbird(), {"pld": "mystery", "semantic": "suffix-arctic"})
    fig = F.metrics_figure(r)
    bars = by_meta(fig, "share")
    share = dict(zip(bars.x, bars.customdata))   # the whole of each bar
    assert share["suffix-arctic"] == pytest.approx(0.1) and share["mystery"] == pytest.approx(0.3)
    assert sum(share.values()) == pytest.approx(1.0)
    colour = dict(zip(bars.x, bars.marker.color))
    assert colour["suffix-arctic"] == SOURCE_COLOURS["suffix-arctic"] and colour["mystery"] == UNKNOWN_COLOUR
    assert source_symbol("mystery") == "x" and "x" not in SOURCE_SYMBOLS.values()   # not the "several sources" ring

    cmp = F.compare_figure(r, request_goose())
    stacks = [t.y for t in cmp.data if t.meta.startswith("oilbird:") and t.meta != "oilbird:strip"]
    assert [sum(col) for col in zip(*stacks)] == [1, 3, 1]           # every committed token stacked
    assert {source_label("suffix-arctic"), "mystery"} <= legend_names(cmp)

    tree = F.tree_figure(r.cycles[1])
    assert by_meta(tree, "mystery").marker.color == UNKNOWN_COLOUR   # node 2
    assert by_meta(tree, "suffix-arctic").marker.color == SOURCE_COLOURS["suffix-arctic"]
    assert {"mystery", source_label("suffix-arctic")} <= legend_names(tree)
    assert "mystery" in legend_names(F.text_figure(r, 1))
    assert ">mystery</span>" in F.text_html(r, 1).split("wb-legend")[1]

    res = {"methods": {"suffix-arctic": {"tokens": 8, "accepted_by_source": {"suffix-arctic": 3.0, "mystery": 1.0,
                                                                              "bonus": 4.0}}}}
    shares = {t.meta: t.y[0] for t in L.source_share_figure(res).data}
    assert shares["suffix-arctic"] == 3 / 8 and shares["mystery"] == 1 / 8 and sum(shares.values()) == 1


# --------------------------------------------------------------------------- no cycles, bad cycle index


def test_tree_key_holds_a_requests_sources_on_every_cycle():
    """A peer's source is keyed on a cycle that drew none of its nodes when the caller passes
    the request's sources (as the app, the preview and the stepper do), and only then."""
    from workbench.widgets import figures_for
    r = relabel(request_oilbird(), {"suffix": "suffix-arctic"})       # only cycle 2 has it
    assert F.drafted_sources(r) == {"pld", "semantic", "recycling", "suffix-arctic"}
    arctic = source_label("suffix-arctic")
    assert arctic not in legend_names(F.tree_figure(r.cycles[1]))
    assert arctic in legend_names(F.tree_figure(r.cycles[1], keyed=F.drafted_sources(r)))
    assert arctic in legend_names(F.figure(F.cycle_specs(r, 1)["tree"]))
    assert arctic in legend_names(figures_for(r, 1, ["tree"])["tree"])
    # a method named like a peer does not key it by its name alone
    assert arctic not in legend_names(F.tree_figure(replace(r.cycles[1], method="suffix-arctic")))

def test_a_request_without_cycles_draws_messages():
    r = request_oilbird(LABELS)
    r.cycles = []
    assert "no cycles" in F.counter_html(r, 0)
    figs = F.cycle_figures(r, 0)
    assert set(figs) == {"tree", "text", "neighbours", "gap", "metrics"}
    assert F.NO_CYCLES in figs["tree"].layout.annotations[0].text
    with pytest.raises(ValueError, match=r"cycle 3 is outside 0\.\.2"):
        F.cycle_figures(request_oilbird(), 3)
    with pytest.raises(ValueError, match="outside"):
        F.counter_html(request_oilbird(), -1)


def test_the_counter_says_that_cycles_count_from_the_prefill():
    """"cycle 1 / 2" read as "the first of two" hides that there are three cycles: the counter
    says where the count starts, and on cycle 0 that it is the prefill."""
    r = request_oilbird()
    assert "cycle 0 / 2</b> (the prefill: the prompt is read, nothing is drafted) · r1" in F.counter_html(r, 0)
    assert "cycle 2 / 2</b> (0: the prefill) · r1" in F.counter_html(r, 2)
    assert F.cycle_count(r, 1) == "cycle 1 / 2 (0: the prefill)"
    # whose decoding a trace file of the local model holds, as a replay's or a live run's counter says
    assert f"· oilbird · {r.model}&#x27;s own decoding, precomputed ·" in F.counter_html(r, 1)
    assert "precomputed" not in F.counter_html(replace(r, meta={"live": True}), 1)


def test_every_cycle_of_every_request_renders():
    for r in (request_oilbird(LABELS), request_goose()):
        for k in range(len(r.cycles)):
            specs = F.cycle_specs(r, k)
            assert set(specs) == {"tree", "text", "neighbours", "gap", "metrics"}
            F.spec_json(specs["tree"])
    figs = F.cycle_figures(request_oilbird(LABELS), 2)      # validated: the specs are real plotly
    assert all(f.layout.template.layout.plot_bgcolor == "white" for f in figs.values())


def test_figures_do_not_modify_the_trace():
    c = cycle1()
    before = CycleTrace(**{**c.__dict__})
    F.tree_spec(c, selection=2)
    assert c == before


# --------------------------------------------------------------------------- the shipped assets

def test_shipped_traces_load_and_every_cycle_renders():
    from pathlib import Path

    from oilbird.trace import load_traces
    path = Path(__file__).resolve().parents[1] / "assets" / "traces" / "builtin.jsonl"
    assert path.stat().st_size < 2_000_000
    traces = load_traces(path)
    assert {t.method for t in traces} == {"goose", "oilbird"} and all(t.lossless for t in traces)
    assert all(t.gap_labels is not None and len(t.gap_labels) == len(t.output_ids) for t in traces)
    assert any(c.neighbours for t in traces for c in t.cycles)
    for t in traces:
        assert len(F.token_sources(t)) == len(t.output_ids)
        for k, c in enumerate(t.cycles):
            F.tree_spec(c)
            F.text_html(t, k)
            F.gap_strip_html(t, k)
    F.cycle_figures(traces[3], 2)                     # validated once


def test_a_replayed_request_says_whose_verdict_it_is():
    """A replay trace (python -m oilbird replay) says in the counter and the text title that the
    verdict is the recording's; a live trace says nothing of the kind."""
    import copy

    from wb_traces import all_requests

    from workbench.panels.cycle import counter_html
    from workbench.panels.provenance import replay_note
    live = all_requests()[0]
    rep = copy.deepcopy(live)
    rep.meta["replay"] = {"mode": "fast", "recorded_by": "gpt-4o", "conversation": "c", "turn": 0}
    want = ("replay of gpt-4o's recorded turn (fast mode): the verdict is the recording; "
            f"the hidden states are {live.model}'s")
    assert replay_note(rep) == want and replay_note(live) == ""
    assert want.replace("'", "&#x27;") in counter_html(rep, 1) and "replay" not in counter_html(live, 1)
    title = F.text_figure(rep, 1).layout.title.text
    assert "replay of gpt-4o" in title and "replay of" not in F.text_figure(live, 1).layout.title.text
    # the model's own decoding names the model too: in the metrics, and a live run in the counter
    assert f"{live.model}'s own decoding" in F.metrics_figure(live).layout.title.text
    ran = copy.deepcopy(live)
    ran.meta["live"] = True
    assert f"· live run of {live.model}" in counter_html(ran, 1)
    # every key on the page names the bonus as the tree's does: the recording's in a replay
    other = copy.deepcopy(rep)
    for tr, whose in ((rep, "bonus (recording)"), (live, "bonus (verifier)")):
        figs = (F.text_figure(tr, 1), F.compare_figure(tr, other if tr is rep else live, 1), F.metrics_figure(tr))
        names = [{d.name for d in fig.data} | {t for k, ax in fig.layout.to_plotly_json().items()
                                               if k.startswith("xaxis") for t in ax.get("ticktext") or ()}
                 for fig in figs]
        assert all(whose in n for n in names[:2]) and whose in names[2], (whose, names)
        assert whose in F.text_html(tr, 1)


def test_a_live_run_that_found_the_store_empty_says_so_where_the_key_would_have_helped():
    """A session's first live run: the key looked and found nothing every time. The counter says
    why (a class would otherwise see the key do nothing), and the comparison says which side is live."""
    import copy
    from wb_traces import all_requests
    live = copy.deepcopy(all_requests()[0])
    live.meta["live"] = True
    for k, c in enumerate(live.cycles[1:]):
        c.retrieval = "gate-closed" if k % 2 else "empty-store"
    assert "oilbird's store in this session was empty" in F.counter_html(live, 1)
    live.cycles[-1].retrieval = "retrieved"
    assert "store in this session was empty" not in F.counter_html(live, 1) and "live run" in F.counter_html(live, 1)
    shipped = copy.deepcopy(all_requests()[0])
    titles = [a.text for a in F.compare_figure(live, shipped).layout.annotations[:2]]
    assert "live run" in titles[0] and "live run" not in titles[1]
    # an exported tree (cycle_figures) says it too: as a handout it was not told from the shipped one
    assert "· live run" in F.cycle_figures(live, 1)["tree"].layout.title.text
    assert "live run" not in F.cycle_figures(shipped, 1)["tree"].layout.title.text
    assert F.trace_marks(live) == {"replay": False, "live": True, "rows": F.tree_rows(live),   # what views pass a tree
                                   "lexical": F.lexical_sources(live)}
    assert "· live run" in F.tree_figure(live.cycles[1], **F.trace_marks(live)).layout.title.text


def test_a_replays_bonus_is_the_recordings_token_and_its_hovers_say_whose_argmax():
    """In a replay the recording decides: the bonus marker shows the token the recording
    committed (not the local model's argmax at the last accepted node, which often differs),
    and the hovers call the argmax the local model's."""
    from pathlib import Path
    from oilbird.trace import load_traces
    from workbench import figures as F
    traces = load_traces(Path(__file__).parents[1] / "assets" / "traces" / "real-traffic.jsonl.gz")
    tr, c = next((t, c) for t in traces for c in t.cycles if c.accepted and c.committed
                 and 0 <= c.accepted[-1] < len(c.argmax_text) and c.argmax[c.accepted[-1]] != c.bonus
                 and len(c.committed) > len(c.accepted) - 1)
    assert F.is_replay(tr)
    fig = F.tree_figure(c, replay=F.is_replay(tr))
    bonus = next(d for d in fig.data if d.meta == "bonus")
    assert bonus.text[0] == F.visible(c.committed_text[-1]) != F.visible(c.argmax_text[c.accepted[-1]])
    assert "the recording's next token" in bonus.hovertext[0]
    hovers = " ".join(h for d in fig.data if d.hovertext for h in d.hovertext)
    assert "local model's next token after it" in hovers and "verifier's next token" not in hovers
    live = F.tree_figure(c)                               # the same cycle drawn as a live one
    assert "verifier's next token after it" in " ".join(h for d in live.data if d.hovertext for h in d.hovertext)
    # the key, the prefill's note and the verdict's words credit the recording, not the verifier
    names = {d.name for d in fig.data}
    assert "bonus (recording)" in names and "bonus (verifier)" not in names
    assert "bonus (verifier)" in {d.name for d in live.data}
    prefill = F.tree_figure(tr.cycles[0], replay=True)
    notes = " ".join(a.text for a in prefill.layout.annotations)
    assert "the recording gives the first token" in notes and "verifier" not in notes
    per_cycle = next(d for d in F.metrics_figure(tr).data if d.meta == "per-cycle")
    assert "recording's first token" in per_cycle.hovertext[0] and "verifier" not in per_cycle.hovertext[0]


def test_a_fast_replays_time_panel_says_no_verify_forward_was_timed():
    from wb_traces import request_oilbird
    from workbench import figures as F
    key = lambda r: F.metrics_figure(r).layout.legend.title.text   # noqa: E731
    live = request_oilbird()
    assert key(live) == "stage"
    live.meta["replay"] = {"mode": "fast", "recorded_by": "gpt-4o"}
    assert "fast replay" in key(live) and "no verify" in key(live)


def test_the_comparison_marks_the_same_output_position_in_both_methods():
    """oilbird's cycle 2 begins at output token 4, which goose (one token a cycle) commits in
    its cycle 4: the cursor sits there, not at goose's cycle 2, and on both token strips at 4."""
    a, b = request_oilbird(), request_goose()
    fig = F.compare_figure(a, b, selection=2)
    top = {t.xaxis: t for t in fig.data if t.type == "bar" and t.meta.endswith(":bonus")}
    strips = {by_meta(fig, f"{m}:strip").xaxis for m in ("oilbird", "goose")}
    marks = {(sh.xref, sh.x0) for sh in fig.layout.shapes if sh.line.dash == "dot"}
    oil_x, goose_x = by_meta(fig, "oilbird:bonus").xaxis, by_meta(fig, "goose:bonus").xaxis
    assert (oil_x, 2) in marks and (goose_x, 4) in marks and (goose_x, 2) not in marks
    assert {(x, 4) for x in strips} <= marks and len(top) == 2


def test_neighbour_cells_break_at_visible_spaces_before_breaking_a_word():
    """Token text shows spaces as '·' (and newlines as '↵'): a static export's table breaks its
    lines there, and inside a word only when the word alone is too long."""
    from workbench.panels.neighbours import _wrap
    assert _wrap("the·reservation·is·ready", 16) == ["the·reservation·", "is·ready"]
    assert _wrap("ok↵done", 4) == ["ok↵", "done"]
    assert _wrap("abcdefghijklmnopqrstuvwxyz", 10) == ["abcdefghij", "klmnopqrst", "uvwxyz"]
    assert _wrap("a b c", 10) == ["a b c"] and _wrap("", 5) == [""]


def test_bonus_marker_keeps_a_row_and_a_half_from_the_nodes_of_its_column():
    """The bonus hangs off the last accepted node, in the next column; where that node sits
    midway between two rejected children there, half a row from each, its label (drawn above
    it) would land on a node: it moves to a spot a row and a half from every node of the column
    (a whole row, and its larger marker covered the label of the node below it)."""
    c = CycleTrace(request_id="r1", method="oilbird", cycle=1, prefix_len=20, generated_before=1,
                   tokens=[10, 11, 12, 13], token_text=["a", "b", "c", "d"], parents=[-1, 0, 1, 1],
                   depths=[0, 1, 2, 2], sources=[[], ["pld"], ["pld"], ["semantic"]],
                   scores=[{}, {"pld": 1.0}, {"pld": 1.0}, {"semantic": 0.9}], argmax=[11, 99, 0, 0],
                   argmax_text=["b", "!", "", ""], accepted=[0, 1], bonus=99, committed=[11, 99],
                   committed_text=["b", "!"], committed_sources=[["pld"], ["bonus"]])
    pos = F.tree_layout(c.parents)
    assert pos[1][1] == -0.5 and {pos[2][1], pos[3][1]} == {0.0, -1.0}    # the crowded case
    bonus = by_meta(F.tree_figure(c), "bonus")
    bx, by = bonus.x[0], bonus.y[0]
    assert bx == 2.0
    assert all(abs(y - by) >= 1.5 for x, y in pos.values() if x == bx)
    assert abs(by - pos[1][1]) <= 2.0                                     # and still near its parent


def test_a_squeezed_tree_sets_its_leaves_labels_beside_them():
    """Closed up to fit a projector, a row had no room for a label above its marker and the ring of
    the row above (the labels ran into it): a leaf's label goes to its right, where its row is
    free; inner nodes and the last accepted node (the bonus hangs beside it) keep theirs above.
    A tree that is not squeezed does the same with its leaves (above, a leaf's label sat on the
    edge to the sibling above it, the accepted path's too) and keeps every other label above."""
    def wide(n, accepted):       # a root, a chain 0 -> 1 -> 2, and leaves under the root
        parents = [-1, 0, 1] + [0] * (n - 3)
        return CycleTrace(request_id="r", method="m", cycle=1, prefix_len=3, generated_before=1,
                          tokens=list(range(n)), token_text=[f"t{i}" for i in range(n)], parents=parents,
                          depths=[0, 1, 2] + [1] * (n - 3), sources=[[]] + [["pld", "semantic"]] * (n - 1),
                          argmax=[9] * n, argmax_text=["z"] * n, accepted=accepted, bonus=9, committed=[9],
                          committed_text=["z"], committed_sources=[["bonus"]])

    def places(c):
        out = {}
        for t in F.tree_spec(c)["data"]:
            if t.get("meta") in ("multi-source", "pld") and t.get("mode", "").endswith("text"):
                pos = t["textposition"]
                for i, where in zip(t.get("customdata") or [], pos if isinstance(pos, list) else []):
                    out[i] = where
                if t["meta"] == "multi-source":
                    out["ring"] = pos
        return out
    squeezed = places(wide(20, [0, 1]))
    assert squeezed[1] == "top center"                          # inner, and the last accepted node
    assert all(squeezed[i] == "middle right" for i in range(3, 20)) and squeezed[2] == "middle right"
    assert squeezed["ring"].count("top center") == 1 and len(squeezed["ring"]) == 19   # the ring carries the labels
    roomy = places(wide(6, [0, 1]))
    assert roomy["ring"] == ["top center"] + ["middle right"] * 4       # node 1 inner and accepted last
    assert places(wide(20, [0, 1, 2]))["ring"][:2] == ["top center", "top center"]    # node 2 accepted last
    # an inner node with a marker just above it in its column: below it, or, boxed in, to its right
    from workbench.panels.tree import _label_places
    c = wide(20, [0])
    assert _label_places({0: (0, 0), 1: (1, 0), 2: (2, 0), 3: (1, 1)}, c, None)[1] == "bottom center"
    assert _label_places({0: (0, 0), 1: (1, 0), 2: (3, 0), 3: (1, 1), 4: (1, -1)}, c, None)[1] == "middle right"
    # ... but not onto a marker beside it (its child's, the bonus's): above, as where rows do not close up
    assert _label_places({0: (0, 0), 1: (1, 0), 2: (2, 0), 3: (1, 1), 4: (1, -1)}, c, None)[1] == "top center"
    last = replace(c, accepted=[0, 1], parents=[-1, 0, 0, 0, 0])      # node 1, a leaf accepted last, boxed in
    assert _label_places({0: (0, 0), 1: (1, 0), 2: (1, 1), 3: (1, -1), 4: (1, 2)}, last, (2, 0))[1] == "top center"
    assert _label_places({0: (0, 0), 1: (1, 0), 2: (2, 0)}, c, (1, 0.8))[1] == "bottom center"   # the bonus too
    # a small tree of a request whose widest tree is squeezed keeps its own rows' room, and its
    # labels where a roomy tree's go
    lay = F.tree_spec(wide(6, [0, 1]), rows=40)["layout"]
    plot = lay["height"] - lay["margin"]["t"] - lay["margin"]["b"]
    s = F.Style()
    assert plot / (lay["yaxis"]["range"][1] - lay["yaxis"]["range"][0]) >= s.node_size + s.font_size + 8 - 4
    assert lay["height"] == F.tree_spec(wide(41, [0, 1]), rows=40)["layout"]["height"]   # the request's height
    assert places(wide(6, [0, 1]))["ring"] == roomy["ring"]
    # and its top row sits where the request's widest tree puts its own (in pixels from the top)
    def top_px(c):               # the highest marker (the bonus's, here), in pixels under the plot's top
        spec = F.tree_spec(c, rows=40)
        lay, ys = spec["layout"], [y for t in spec["data"] for y in t["y"] if y is not None]
        lo, hi = lay["yaxis"]["range"]
        return (hi - max(ys)) / (hi - lo) * (lay["height"] - lay["margin"]["t"] - lay["margin"]["b"])
    assert abs(top_px(wide(6, [0, 1])) - top_px(wide(41, [0, 1]))) < 1


def test_a_deep_trees_labels_are_cut_to_their_depth_column():
    """A label is drawn centred over its node: in a deep tree, two neighbours of a chain ran into
    each other (a column is ~50 px at a 1024-pixel screen for 13 depths). Each is cut to what a
    column holds (the hover keeps it whole); a shallow tree keeps the style's length."""
    from workbench.panels.tree import LABEL_CHARS_ACROSS

    def chain(depth):
        n = depth + 1
        return CycleTrace(request_id="r", method="m", cycle=1, prefix_len=3, generated_before=1,
                          tokens=list(range(n)), token_text=["·reservation"] * n, parents=[-1] + list(range(n - 1)),
                          depths=list(range(n)), sources=[[]] + [["pld"]] * depth, argmax=[9] * n,
                          argmax_text=["z"] * n, accepted=[0], bonus=9, committed=[9], committed_text=["z"],
                          committed_sources=[["bonus"]])

    def longest(c):
        return max(len(t.replace("…", ".")) for tr in F.tree_spec(c)["data"] if tr.get("meta") == "pld"
                   for t in tr["text"])
    assert longest(chain(3)) == F.Style().max_label_chars                 # 10: "·reservat…"
    assert longest(chain(13)) == LABEL_CHARS_ACROSS // (13 + 2.2) == 6   # "·rese…"
    assert "·reservation" in " ".join(h for tr in F.tree_spec(chain(13))["data"] for h in tr.get("hovertext") or ())
    # a figure drawn 700 px wide (a slide's half, a handout's column) has narrower columns beside its
    # key: cut shorter (labels cut for the app ran into each other there), and wider at 1200 px

    def longest_at(c, width):
        return max(len(t.replace("…", ".")) for tr in F.tree_spec(c, style=F.Style(width=width))["data"]
                   if tr.get("meta") == "pld" for t in tr["text"])
    # (at 700 px the key goes under the plot, which then has the figure's width)
    assert longest_at(chain(13), 700) == longest(chain(13)) == 6 < longest_at(chain(13), 1200) == 9
    assert longest_at(chain(3), 700) == F.Style().max_label_chars


def test_the_text_figure_fills_the_width_it_is_drawn_at():
    """The generated text wrapped at 80 characters whatever the width: a 1200 px export left the
    right 40% empty. It wraps at what the width holds (at 80 still where none is set)."""
    long = request_oilbird()
    long = replace(long, output_text=[" word"] * 300, output_ids=[5] * 300)

    def widest(style):
        spec = F.text_spec(long, style=style)
        lines = [re.sub("<[^>]+>", "", x) for x in spec["data"][0]["text"]]
        return len(lines), max(len(html.unescape(x)) for x in lines)
    n700, w700 = widest(F.Style(width=700))
    n1200, w1200 = widest(F.Style(width=1200))
    assert n1200 < n700 and w700 * F.CHAR_EM * 13 <= 700 - 20 and 1200 * 0.8 < w1200 * F.CHAR_EM * 13 <= 1200 - 20
    assert widest(F.Style())[1] <= 80 and widest(F.Style(width=1200, line_chars=40))[1] <= 40


def test_a_square_node_stays_inside_the_several_sources_ring():
    """A prompt-lookup square drawn at a node's size reached past the several-sources ring with its
    corners: faded (rejected), it printed as a circle. It is drawn smaller, inside the ring."""
    from workbench.panels.tree import MULTI_RING_PAD
    c = cycle1()
    spec = F.tree_spec(c)
    ring = next(t for t in spec["data"] if t["meta"] == "multi-source")["marker"]
    square = next(t for t in spec["data"] if t["meta"] == "pld")["marker"]
    assert square["symbol"] == "square" and ring["size"] == F.DEFAULT_STYLE.node_size + MULTI_RING_PAD
    # plotly draws a square of size d with sides d, a circle of size d with diameter d
    assert square["size"] / 2 * 2 ** 0.5 + 0.4 < ring["size"] / 2 - ring["line"]["width"] / 2


def test_a_700_px_export_keeps_every_title_and_note_within_its_width():
    """Plotly wraps no title or note: at 700 px a replay's tree head, the text figure's key, the
    metrics' whose-numbers line and the gap strip's notes ran past the right edge. Each line
    of each title now fits the figure's width, in the font it is drawn in."""
    import re
    from dataclasses import replace as copy_with
    tr = request_oilbird()
    tr = copy_with(tr, request_id="tau-airline-task17-trial0#17", cycles=[
        copy_with(c, request_id="tau-airline-task17-trial0#17") for c in tr.cycles],
        meta={**tr.meta, "replay": {"recorded_by": "gpt-4o", "mode": "fast"}})
    rid = "customer-support-airline-rebooking-with-travel-insurance-and-two-bags#1234"     # 75 characters
    other = copy_with(tr, request_id=rid, cycles=[copy_with(c, request_id=rid) for c in tr.cycles])
    for width, t in ((700, tr), (1200, tr), (700, other)):
        s = F.Style(width=width)
        specs = {**F.cycle_specs(t, 1, s), "metrics": F.metrics_spec(t, style=s),
                 "compare": F.compare_spec(t, t, 1, style=s),
                 "compare, differing": F.compare_spec(t, copy_with(
                     t, method="goose", model="HuggingFaceTB/SmolLM2-1.7B-Instruct-Q4_K_M.gguf",
                     output_ids=t.output_ids[:-1] + [999]), 1, style=s),
                 "funnel": F.funnel_spec([t], style=s, scope=f"1 request: {rid}, recorded by gpt-4o, replayed")}
        for name, spec in specs.items():
            # each line's width, its characters each in the font of the span they are in
            fonts, line, px = [s.font_size + 2], "", 0.0
            for part in re.findall(r"<br>|<span[^>]*>|</span>|<[^>]+>|[^<]+", spec["layout"]["title"]["text"] + "<br>"):
                if part == "<br>":
                    assert px <= width - 10, (width, name, line)
                    line, px = "", 0.0
                elif part.startswith("<span"):
                    m = re.search(r"font-size:(\d+)px", part)
                    fonts.append(int(m[1]) if m else fonts[-1])
                elif part == "</span>":
                    fonts.pop()
                elif not part.startswith("<"):
                    line += html.unescape(part)
                    px += len(html.unescape(part)) * F.CHAR_EM * fonts[-1]
    # a trace without gap labels: its note wrapped too (cut at both ends), and no cycle's box over it
    gap = F.gap_strip_spec(tr, 1, F.Style(width=700))["layout"]
    assert tr.gap_labels is None and not gap["shapes"]
    assert all(len(x) * F.CHAR_EM * 13 <= 700 - 40 for x in gap["annotations"][0]["text"].split("<br>"))
    tree_head = F.tree_spec(tr.cycles[1], style=F.Style(width=700), replay=True)["layout"]["title"]["text"]
    assert "cycle 1 ·<br>replayed (the recording decides)<br>" in tree_head      # whole phrases on a line


def test_a_tree_of_many_leaves_grows_taller_so_labels_keep_off_the_next_row():
    """Each node's label is drawn above its marker: a row must hold both, so a tree with many
    leaves gets a taller figure than the style's height instead of squeezing its rows."""
    few = F.tree_spec(cycle1())["layout"]
    assert few["height"] == F.DEFAULT_STYLE.height
    parents = [-1] + [0] * 20                                 # 20 leaves under the root
    c = CycleTrace(request_id="r", method="m", cycle=1, prefix_len=3, generated_before=1,
                   tokens=list(range(21)), token_text=[f"t{i}" for i in range(21)], parents=parents,
                   depths=[0] + [1] * 20, sources=[[]] + [["pld"]] * 20, argmax=[9] * 21,
                   argmax_text=["z"] * 21, accepted=[0], bonus=9, committed=[9], committed_text=["z"],
                   committed_sources=[["bonus"]])
    s = F.DEFAULT_STYLE

    def px_per_row(lay):
        lo, hi = lay["yaxis"]["range"]
        return (lay["height"] - lay["margin"]["t"] - lay["margin"]["b"]) / (hi - lo)
    app = F.tree_spec(c)["layout"]
    assert px_per_row(app) >= s.node_size + s.font_size
    # at 700 px a replay's head wraps to a line more and the key goes under the plot: the figure
    # grows by both, and the rows keep the app's pitch (the head's line had squeezed them)
    long = replace(c, request_id="tau-airline-task17-trial0#17", method="oilbird-no-semantic")
    narrow = F.tree_spec(long, style=F.Style(width=700), replay=True)["layout"]
    wide_title = F.tree_spec(long, replay=True)["layout"]["title"]["text"]
    assert narrow["title"]["text"].count("<br>") > wide_title.count("<br>")
    assert narrow["legend"]["orientation"] == "h" and narrow["margin"]["b"] > app["margin"]["b"]
    assert narrow["legend"]["yref"] == "container" and 0 <= narrow["legend"]["y"] <= 1      # (plotly's range)
    # a peer's sources in the key take their room under the plot too (one row had sat on the axis)
    peers = F.tree_spec(long, style=F.Style(width=700), replay=True, keyed=["suffix-arctic", "live"])["layout"]
    assert peers["margin"]["b"] > narrow["margin"]["b"]
    assert px_per_row(narrow) == pytest.approx(px_per_row(F.tree_spec(long, replay=True)["layout"]))


def test_a_gap_cell_says_what_this_methods_drafter_did_at_the_token():
    """The labels read only earlier requests' outputs; a drafter also reads the prompt. Each
    cell's hover says what the selected method's drafter did there (its trace's committed
    sources), in the figure and the HTML alike: the per-position answer to why it missed."""
    r = request_oilbird(LABELS)           # token 1 (a lexical hit): pld and semantic; 2: pld; 4: a bonus
    g = F.gap_cells(r)
    assert g.cells[1].delivered == ("pld", "semantic") and g.cells[4].delivered == ("bonus",)
    fig = F.gap_strip_figure(r)
    assert "oilbird drafted it: prompt lookup, semantic key" in by_meta(fig, "lexical_hit").hovertext[0]
    assert "oilbird drafted it: prompt lookup<br>" in by_meta(fig, "gap_recovered").hovertext[0]
    assert "oilbird had not drafted it: the verifier's own token (bonus)" in by_meta(fig, "absent").hovertext[-1]
    cells = [t for t in _tags(F.gap_strip_html(r), "span") if t.get("class") == "gap-cell"]
    assert "oilbird drafted it: prompt lookup, semantic key" in cells[1]["title"]
    assert "drafted it" not in cells[0]["title"]     # the first token: the prefill's, said as such


def test_every_offline_setup_embeds_plotly_js_once(monkeypatch):
    """A setup cell run again replaces its output, which must hold plotly.js again; plotly's own
    activation of the default renderer (at the first figure) adds no second copy."""
    import IPython
    from plotly.io.base_renderers import NotebookRenderer
    from workbench import offline
    embedded = []
    monkeypatch.setattr(NotebookRenderer, "activate", lambda self: embedded.append(1))
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(offline.pio.renderers, "default", offline.pio.renderers.default)
    offline.use_offline_plots()
    offline.renderer().activate()           # what plotly does when the first figure is shown
    offline.use_offline_plots()             # the setup cell, run again
    assert len(embedded) == 2


def test_the_selected_node_is_outlined_in_full_and_in_no_sources_colour():
    """A selected rejected node is faded; its outline is not, and is not a source's colour."""
    c = cycle1()
    rejected = next(i for i in range(1, len(c.tokens)) if i not in c.accepted)
    spec = F.tree_spec(c, selection=rejected)
    ring, = [t for t in spec["data"] if t.get("meta") == "selection"]
    node = next(t for t in spec["data"] if rejected in (t.get("customdata") or []))
    k = node["customdata"].index(rejected)
    assert (ring["x"], ring["y"]) == ([node["x"][k]], [node["y"][k]])
    assert ring["marker"]["opacity"] == 1.0 and node["marker"]["opacity"][k] < 1.0
    assert ring["marker"]["color"] not in [c for k, c in SOURCE_COLOURS.items() if k != "root"]  # the root is black
    assert not [t for t in F.tree_spec(c)["data"] if t.get("meta") == "selection"]
