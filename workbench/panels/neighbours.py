"""The nearest-neighbours panel: the store records the semantic key retrieved in one cycle.

Two questions about provenance are answered in ONE function each, so that the views never
guess twice:

* :func:`semantic_outcome`: what the semantic key did this cycle (no source, gate closed, no
  query, empty store, below the similarity floor, muted, retrieved) and the floor it used;
* :func:`neighbour_result`: what became of one retrieved neighbour's chain (how many of its
  nodes the verifier accepted, or why it got no node).

Both read what the drafter recorded (``CycleTrace.retrieval`` / ``retrieval_floor``,
``Neighbour.why_no_node``), in the words of :mod:`oilbird.trace`'s provenance vocabulary; a
view never derives them (traces written before they were recorded are refused on load).

One row list (:func:`neighbour_table`) is formatted by two renderers: :func:`neighbours_spec`
(a plotly table, for notebooks and exports: plain text broken to fit its columns, a height
that holds every row) and :func:`neighbours_html` (the app's panel: a plain table that
redraws fast and wraps in the browser). Reads one :class:`~oilbird.trace.CycleTrace`.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import NamedTuple

import plotly.graph_objects as go

from oilbird.trace import (BUDGET_BY_FILL, LEXICAL_SOURCES, NO_NODE_REASONS, RETRIEVAL_OUTCOMES, CycleTrace,
                           Neighbour, RequestTrace, cycle_truth, lexical_sources, lexically_reachable, right_run)
from oilbird.tree import root_path

from ..palette import Style
from .base import (CHAR_EM, TABLE_WIDTH, esc, figure, panel_layout, pin_title, price, style_or_default, visible,
                   wrap_html)

NB_HEADER = ("#", "similarity", "from", "context (matched token in [ ])", "proposed", "accepted", "lexical key?")
# what each column means (the HTML header's tooltips; the caption says the two a class asks first)
NB_HEADER_HELP = (
    "the neighbour's number, most similar first (the trace tables' 'neighbour')",
    "cosine similarity of the record's stored state to the query (the state of the token before our root); "
    "'N agree': how many of our last tokens, the root first, equal the record's own (the tree prices a chain "
    "by it beside the similarity)",
    "the request and output position the record came from",
    "the record's text around it; [ ]: the record the key found, whose state is near the query; the token "
    "after it equals our root, so its proposal starts one token later",
    "the tokens that followed in its request: the chain it offered the tree; bold: accepted, plain: in the "
    "tree and rejected, grey: no node in the tree (the figure puts ¦ before those)",
    "of its chain's nodes in the tree, how many the verifier accepted (hover: why not more); 'right for N': "
    "how many tokens of the record's continuation, before any cut (in traces that recorded it; older ones: "
    "its proposal), equal the output from here (more than it got accepted: the tree cut a right neighbour); "
    "'next p': where the fill cut a chain whose nodes were all accepted, the chance it gave the path through "
    "the first token it left out (the product of its cells' rates: a deep token's is small however likely it "
    "was once the chain held); the footnote gives the last node the fill took",
    "did a lexical source (prompt lookup, the suffix index: the exact-match keys) propose the same first "
    "token? 'no': only the hidden-state key (or token recycling, or the rejected-branch pool) could",
)
NB_CAPTION = ("[ ] = the record the key found (the token before our root); the token after it is our root, and "
              "'proposed' follows that · 'N agree' = our last N tokens, the root first, equal its own")
# how each renderer marks the parts of a "proposed" cell (NeighbourRow.parts)
HTML_PARTS = " · proposed: <b>bold</b> = accepted, <span style='color:#767676'>grey</span> = no node in the tree"
FIGURE_PARTS = " · proposed: after ¦ = no node in the tree"
# oilbird.sources.semantic.SemanticConfig.entry_floor, the default (a view never imports the
# runtime; tests/test_figures.py checks it)
SIMILARITY_FLOOR = 0.80
NOT_IN_TREE = "not in the tree"
# an empty "proposed" cell, by why its chain got no node (Neighbour.why_no_node): the funnel's words
EMPTY_PROPOSAL = {"no-tokens": "copy depth 0", "below-floor": "below the entry floor", "muted": "muted"}

# --------------------------------------------------------------------------- provenance

# what the semantic key did in one cycle (SemanticOutcome.outcome): the drafter's record, a key of
# oilbird.trace.RETRIEVAL_OUTCOMES, and the prefill, where none runs
PREFILL = "prefill"            # cycle 0: nothing is drafted, so no lookup runs
NO_SOURCE = "no-source"        # the method has no semantic source
GATE_CLOSED = "gate-closed"    # no lexical match (and no adjacency row for the root): no lookup ran
NO_QUERY = "no-query"          # no hidden state to look up with
EMPTY_STORE = "empty-store"    # looked up in a store that held no records yet
BELOW_FLOOR = "below-floor"    # the best match was below the similarity floor
NO_ROOT_MATCH = "no-root-match"  # no stored record followed by the root token was found
MUTED = "muted"                # found matches, but self-calibration muted the source
RETRIEVED = "retrieved"        # found matches and proposed them: the table lists them

# how the panel says each (the trace's words, with what this panel knows filled in)
_HELD = {**RETRIEVAL_OUTCOMES,
         PREFILL: "cycle 0 is the prefill: nothing is drafted, so nothing is retrieved",
         NO_SOURCE: "{method} drafts without the semantic key",
         BELOW_FLOOR: "the best matches were below the similarity floor ({floor:.2f})",
         RETRIEVED: "{n} retrieved"}
MUTED_BY = "semantic source muted by self-calibration"


@dataclass(frozen=True)
class SemanticOutcome:
    """What the semantic key did in one cycle.

    ``outcome``: one of :data:`PREFILL`, :data:`NO_SOURCE`, :data:`GATE_CLOSED`,
    :data:`NO_QUERY`, :data:`EMPTY_STORE`, :data:`BELOW_FLOOR`, :data:`NO_ROOT_MATCH`, :data:`MUTED`,
    :data:`RETRIEVED`.
    ``muted``: self-calibration had muted the source. ``floor``: the similarity floor the lookup used.
    """
    outcome: str
    muted: bool = False
    floor: float = SIMILARITY_FLOOR
    method: str = ""
    retrieved: int = 0

    def why(self) -> str:
        """The outcome in words, as the panel says it where nothing was retrieved."""
        fill = {"method": self.method, "floor": self.floor, "n": self.retrieved}
        text = _HELD.get(self.outcome, f"the semantic key's outcome: {self.outcome}").format(**fill)
        return f"{MUTED_BY}; {text}" if self.muted and self.outcome == BELOW_FLOOR else text


def semantic_outcome(cycle: CycleTrace) -> SemanticOutcome:
    """What the semantic key did in ``cycle``, as the drafter recorded it (``cycle.retrieval``,
    with the floor it applied); the prefill drafts nothing, so no lookup runs there."""
    if cycle.retrieval is None:
        return SemanticOutcome(PREFILL)
    floor = SIMILARITY_FLOOR if cycle.retrieval_floor is None else cycle.retrieval_floor
    return SemanticOutcome(cycle.retrieval, muted=cycle.semantic_muted, floor=floor, method=cycle.method,
                           retrieved=len(cycle.neighbours))


class NeighbourResult(NamedTuple):
    """The "accepted" cell of a neighbour and why it says so ("" where the cell says it all)."""
    cell: str
    why: str


def neighbour_result(cycle: CycleTrace, nb: Neighbour, fill: str | None = None) -> NeighbourResult:
    """What became of neighbour ``nb``'s chain in ``cycle``.

    ``accepted / walked``: of the chain's nodes in the tree, how many the verifier accepted.
    A chain with no node in the tree was never verified, so it is "not in the tree", not
    "0 / its length", with the reason the drafter recorded (``nb.why_no_node``, a key of
    :data:`oilbird.trace.NO_NODE_REASONS`): the semantic node budget was spent before its turn
    (the drafter gives the most similar neighbours the budget first), or the muted source only
    looked it up; one whose similarity allowed it no tokens is a dash. ``fill``: the tree's fill,
    as its trace records it (``meta["tree"]``), which says why a chain found no node left."""
    why = nb.why_no_node
    if not why:
        return NeighbourResult(f"{nb.accepted} / {len(nb.walked_nodes)}", "")
    said = BUDGET_BY_FILL.get(fill, NO_NODE_REASONS["budget"]) if why == "budget" else NO_NODE_REASONS.get(why, why)
    return NeighbourResult("—" if why == "no-tokens" else NOT_IN_TREE, said)


# --------------------------------------------------------------------------- the rows

@dataclass(frozen=True)
class NeighbourRow:
    """One retrieved neighbour, as both renderers show it."""
    index: int                 # into cycle.neighbours
    similarity: float
    agreement: int | None      # context tokens it shares with ours, root first (None: not recorded)
    origin: str                # "request @ position"
    context: tuple[str, ...]   # the context's tokens, raw
    matched: int               # the index in ``context`` of the matched token
    proposed: str              # the continuation it proposed, whitespace visible
    parts: tuple[str, str, str]  # ... split: accepted, in the tree and rejected, with no node (whitespace visible)
    result: NeighbourResult
    lexical: bool              # a lexical source proposed the same first token
    selected: bool
    # how many tokens of the record's continuation, before any cut (proposed + withheld), equal the
    # output from this cycle on; None where the table was not given the request's output
    right: int | None = None
    left_out: float | None = None    # Neighbour.left_out: the fill's price of its first token left out
    outbid: str = ""                 # what the fill took above that price (:func:`outbid`)

    @property
    def similarity_cell(self) -> str:
        """The similarity, and the context agreement where the trace recorded it: "0.945 · 9 agree"."""
        return f"{self.similarity:.3f}" + ("" if self.agreement is None else f" · {self.agreement} agree")

    @property
    def lexical_cell(self) -> str:
        """The "lexical key?" cell: "yes" / "no", or "—" where the record proposed nothing (no first
        token to ask about: a bold "no" there read as a find of the key alone)."""
        return "—" if not any(self.parts) else "yes" if self.lexical else "no"

    @property
    def accepted_cell(self) -> str:
        """The "accepted" cell; a "*" sends the reader to the footnote that says why."""
        return self.result.cell + ("*" if self.result.cell == NOT_IN_TREE else "") + (
            "" if self.right is None else f" · right for {self.right}") + (
            "" if self.left_out is None else f" · next {price(self.left_out)}")


def outbid(cycle: CycleTrace, p: float, own=()) -> str:
    """What the fill took above a chain it cut at price ``p``: its nodes priced higher, the chain's
    ``own`` nodes (and the exact-match head's, placed before the fill) aside, and how each fared:
    "the fill took 5 nodes worth more (0.0668 to 0.25): 1 accepted, 3 rejected, 1 never reached"
    ("" where it took none)."""
    if cycle.fill_from is None:
        return ""
    acc, own = set(cycle.accepted), set(own)
    over = [i for i in range(cycle.fill_from, len(cycle.prices)) if cycle.prices[i] > p and i not in own]
    if not over:
        return ""
    hit = sum(i in acc for i in over)
    missed = sum(i not in acc and cycle.parents[i] in acc for i in over)
    worth = [cycle.prices[i] for i in over]
    span = price(worth[0]) if len(set(worth)) == 1 else f"{price(min(worth))} to {price(max(worth))}"
    return (f"the fill took {len(over)} node{'s' if len(over) > 1 else ''} worth more ({span}): {hit} accepted, "
            f"{missed} rejected, {len(over) - hit - missed} never reached")


def _cut_cost(nb: Neighbour) -> float | None:
    """``nb.left_out`` where the cut could have cost a token (every node of its chain in the tree was
    accepted); None where the chain was rejected inside the tree (the cut lost nothing)."""
    return nb.left_out if nb.accepted >= len(nb.walked_nodes) else None


def price_note(cycle: CycleTrace) -> str:
    """The footnote for the table's "next p" (what the fill priced a cut chain's first token left
    out), with the bar it did not clear: the last node the fill took."""
    bar = "" if cycle.fill_bar is None else f"; the last node the tree took was worth {price(cycle.fill_bar)}"
    head = cycle.fill_from - 1 if cycle.fill_from else 0
    first = (f"; the exact-match head placed {head} of the tree's {len(cycle.tokens) - 1} nodes before the "
             f"fill's contest" if head > 0 else "")
    return (f"next p = the chance the fill gave the path through the first token it left out of that chain "
            f"(the product of its cells' rates along the path){bar}{first}")


@dataclass(frozen=True)
class NeighbourTable:
    """The whole panel of one cycle: its rows (most similar first) and what is said around them."""
    cycle: int
    rows: list[NeighbourRow]
    store: str                 # " from N records in the store", "" where the cycle does not record N
    empty_why: str             # why nothing was retrieved ("" when there are rows)
    footnotes: list[str]       # one per distinct reason a neighbour is not in the tree, then the prices' note


def neighbour_table(cycle: CycleTrace, selection: int | None = None, lexical: frozenset[str] | None = None,
                    request: RequestTrace | None = None) -> NeighbourTable:
    """The rows of ``cycle``'s neighbour table; ``selection``: a neighbour index to highlight.
    ``request``: the cycle's request trace, whose output says how far each neighbour was right
    (:attr:`NeighbourRow.right`) and whose exact-match sources (:func:`oilbird.trace.lexical_sources`)
    the "lexical key?" column counts; ``lexical`` sets those sources instead (without either, the
    built-in ones)."""
    if lexical is None:
        lexical = lexical_sources(request) if request is not None else LEXICAL_SOURCES
    truth = cycle_truth(cycle, request.output_ids if request is not None else [])
    tree = request.meta.get("tree") if request is not None else None
    fill = tree.get("fill") if isinstance(tree, dict) else None
    order = sorted(range(len(cycle.neighbours)), key=lambda k: -cycle.neighbours[k].similarity)
    rows = []
    for k in order:
        nb = cycle.neighbours[k]
        toks = [visible(t) for t in nb.proposed_text]
        acc, nodes = min(nb.accepted, len(toks)), min(max(nb.accepted, len(nb.walked_nodes)), len(toks))
        parts = ("".join(toks[:acc]), "".join(toks[acc:nodes]), "".join(toks[nodes:]))
        cost = _cut_cost(nb)
        rows.append(NeighbourRow(
            index=k, similarity=nb.similarity, agreement=nb.agreement, origin=f"{nb.request_id} @ {nb.position}",
            context=tuple(nb.context_text), matched=nb.context_index,
            # (a chain with no node at all is all after the ¦, which then opens the cell)
            proposed=(f"{parts[0]}{parts[1]}¦{parts[2]}" if parts[2] else "".join(parts))
            or f"— ({EMPTY_PROPOSAL.get(nb.why_no_node, 'nothing proposed')})", parts=parts,
            result=neighbour_result(cycle, nb, fill), lexical=lexically_reachable(cycle, nb, lexical),
            selected=k == selection,
            right=None if truth is None else right_run(nb, truth), left_out=cost,
            # (the chain's own path is priced above its cut too, but it is no rival)
            outbid="" if cost is None else outbid(cycle, cost, root_path(cycle.parents, (nb.walked_nodes or [0])[-1]))))
    whys = dict.fromkeys(r.result.why for r in rows if r.result.cell == NOT_IN_TREE)
    priced = [price_note(cycle)] if any(r.left_out is not None for r in rows) else []
    return NeighbourTable(
        cycle=cycle.cycle, rows=rows,
        store=("" if cycle.store_records is None or cycle.retrieval == NO_SOURCE
               else f" from {cycle.store_records} records in the store"),
        empty_why="" if rows else semantic_outcome(cycle).why(),
        footnotes=[f"* {NOT_IN_TREE}: {w}" for w in whys] + priced)


# --------------------------------------------------------------------------- plotly table
# plotly wraps cell text only at spaces, and a static export draws only the rows that fit its
# height, so lines are broken here and the height counted
NB_COLUMN_PX = (30, 95, 90, 165, 130, 95, 75)   # relative widths (px at plotly's 700 px)
CELL_PAD = 8                 # plotly's table cell padding, px per side
CELL_HEIGHT = 24             # one line of a cell, px


def _cell_chars(s: Style, col: int, font: int) -> int:
    """Characters that fit on one line of column ``col`` at the figure's width."""
    px = ((s.width or TABLE_WIDTH) - 20) * NB_COLUMN_PX[col] / sum(NB_COLUMN_PX)
    return max(4, int((px - 2 * CELL_PAD) / (CHAR_EM * font)))


def _wrap(text: str, chars: int) -> list[str]:
    """``text`` in lines of at most ``chars`` characters, broken after spaces (and after the
    visible ones, '·' and '↵', which token text shows for them) or hyphens where it can, and
    inside a word only where it must (a request id broke as "tau-airline-task16-t", "rial0#3").

    >>> _wrap("the·reservation·is·ready", 16)
    ['the·reservation·', 'is·ready']
    >>> _wrap("tau-airline-task16-trial0#3 @ 82", 22)
    ['tau-airline-task16-', 'trial0#3 @ 82']
    >>> _wrap("get(id='12')->{'a': -12}", 14)
    ["get(id='12')->", "{'a': -12}"]
    """
    lines, cur = [], ""
    for word in re.split(r"(?<=[ ·↵])|(?<=[^\W_]-)(?=[^\W_])", text):     # (not inside "->" nor "-12")
        if cur and len(cur) + len(word.rstrip()) > chars:
            lines.append(cur.rstrip())
            cur = ""
        while len(word.rstrip()) > chars:
            lines.append(word[:chars])
            word = word[chars:]
        cur += word
    return lines + [cur.rstrip()] if cur or not lines else lines


def _table_cells(columns: list[list[str]], s: Style, font: int) -> tuple[list[list[str]], list[int]]:
    """Cells broken into lines ('<br>', each line HTML-escaped) and the lines of each row."""
    out, rows = [], [1] * len(columns[0])
    for col, cells in enumerate(columns):
        wrapped = [_wrap(c, _cell_chars(s, col, font)) for c in cells]
        out.append(["<br>".join(html.escape(x, quote=False) for x in w) for w in wrapped])
        rows = [max(r, len(w)) for r, w in zip(rows, wrapped)]
    return out, rows


def _brackets(text: str) -> str:
    """The HTML table's "[ ]" as the figure's cells write the matched token, "⟦ ⟧"."""
    return text.replace("[ ]", "⟦ ⟧")


def _plain_context(row: NeighbourRow) -> str:
    """The context as plain text, the matched token in white square brackets ⟦ ⟧, which no
    tool call's JSON holds (no markup: a plotly table cell shows a styled span as its raw HTML)."""
    return "".join(f"⟦{visible(t)}⟧" if j == row.matched else visible(t) for j, t in enumerate(row.context)) or "—"


def neighbours_spec(cycle: CycleTrace, selection: int | None = None, style: Style | None = None,
                    lexical: frozenset[str] | None = None, request: RequestTrace | None = None) -> dict:
    """The nearest-neighbour table of one cycle (see :func:`neighbours_figure`)."""
    s = style_or_default(style)
    font = s.font_size - 1
    t = neighbour_table(cycle, selection, lexical, request)
    if t.rows:
        plain = [[str(r.index) for r in t.rows], [r.similarity_cell for r in t.rows],
                 [r.origin for r in t.rows], [_plain_context(r) for r in t.rows], [r.proposed for r in t.rows],
                 [r.accepted_cell for r in t.rows], [r.lexical_cell for r in t.rows]]
        fill = [["#FBE3D6" if r.selected else ("#F3F3F3" if n % 2 else "white") for n, r in enumerate(t.rows)]]
    else:
        plain = [[""], [""], [""], ["no neighbours this cycle"], [""], [""], [""]]
        fill = [["white"]]
    cols, lines = _table_cells(plain, s, font)
    # the figure marks the matched token ⟦ ⟧ (its cells are plain text): its header and caption say so
    head, head_lines = _table_cells([[_brackets(h)] for h in NB_HEADER], s, s.font_size)
    line_px = round(1.35 * font) + 1
    table = {"type": "table", "columnwidth": list(NB_COLUMN_PX), "meta": "neighbours",
             "header": {"values": [f"<b>{h[0]}</b>" for h in head], "align": "left", "fill": {"color": "#E8E8E8"},
                        "font": {"size": s.font_size}, "height": CELL_HEIGHT},
             "cells": {"values": cols, "align": "left", "fill": {"color": fill}, "height": CELL_HEIGHT,
                       "font": {"size": font}}}
    # the count on a line of its own: at plotly's 700 px one line was cut off
    head = wrap_html(f"nearest neighbours · {cycle.request_id} · {cycle.method} · cycle {t.cycle}:", s,
                     s.font_size + 2)
    title = f"{head}<br>{len(t.rows)} retrieved{t.store}"
    # what outbid each chain whose cut cost a token (right past what was accepted, or no output to
    # tell), which the app's table says in a hover (a figure's table cell has none); chains cut at
    # one price by the same nodes share a line
    said: dict[str, list[str]] = {}
    for r in t.rows:
        if r.outbid and (r.right is None or r.right > cycle.neighbours[r.index].accepted):
            said.setdefault(f"cut where the fill priced its next token {price(r.left_out)}: {r.outbid}",
                            []).append(f"#{r.index}")
    cut = [f"{', '.join(rows)} {line}" for line, rows in said.items()]
    notes = t.footnotes + cut + [_brackets(NB_CAPTION) + FIGURE_PARTS] if t.rows else [f"({t.empty_why})"]
    chars = int(((s.width or TABLE_WIDTH) - 20) / (CHAR_EM * font))
    notes = [line for n in notes for line in _wrap(n, chars)]
    for line in notes:
        title += f"<br><span style='font-size:{font}px;color:#666'>{html.escape(line)}</span>"
    top = 70 + 18 * len(notes) + 20 * head.count("<br>")
    body = (CELL_HEIGHT + line_px * (max(head_lines) - 1)
            + sum(CELL_HEIGHT + line_px * (n - 1) for n in lines))
    lay = panel_layout(s, title, height=top + body + 30, margin={"l": 10, "r": 10, "t": top, "b": 10})
    return {"data": [table], "layout": pin_title(lay)}     # (a centred title's last line ran into the table)


def neighbours_figure(cycle: CycleTrace, selection: int | None = None, style: Style | None = None,
                      lexical: frozenset[str] | None = None, request: RequestTrace | None = None) -> go.Figure:
    """A table of the store records the semantic key retrieved in this cycle, most similar
    first: cosine similarity (and, where the trace recorded it, the record's context agreement:
    how many of our tokens, the root first, equal its own, "0.945 · 9 agree", what the tree
    prices a neighbour by beside its similarity), the request and position it came from, its context with the
    matched token in ⟦ ⟧, the continuation it proposed, how many of its chain's nodes the
    verifier accepted ("not in the tree" for a chain that got no node; the title says why,
    :func:`neighbour_result`), and whether a lexical source proposed the same first token (the
    "lexical key?" column: "no" is what no lexical source could propose; token recycling and
    the rejected-branch pool still may have). Where nothing was retrieved, the title says why
    (:func:`semantic_outcome`). Cells are plain text broken into lines that fit their column at
    the figure's width (``style.width``, else plotly's 700 px), and the height holds every row,
    so a static export shows them all.
    ``selection``: a neighbour index (into ``cycle.neighbours``) to highlight; ``request``: the
    cycle's request trace, for how far each neighbour was right ("6 / 6 · right for 31": the
    tree cut a right neighbour short) and for the exact-match sources the "lexical key?" column
    counts (:func:`oilbird.trace.lexical_sources`: a trace whose drafter had a spine source of
    its own names it); ``lexical``: those sources, given instead."""
    return figure(neighbours_spec(cycle, selection, style, lexical, request), style)


# --------------------------------------------------------------------------- HTML table
# fixed column shares of the panel's width, and cells that wrap anywhere (a token is one long
# run with its spaces shown as '·'); the div scrolls as a last resort, below the table's
# minimum width
NB_COLUMN_PCT = (4, 10, 12, 26, 22, 15, 11)   # (the accepted cell says how far a record was right too)
_WRAP = "overflow-wrap:anywhere;word-break:break-word;vertical-align:top;"


def _proposed_html(r: NeighbourRow) -> str:
    """The "proposed" cell: its accepted tokens bold, those in the tree and rejected plain, those
    that got no node grey (what the budget or the fill left out: why a right record gave less)."""
    acc, tried, left = (html.escape(x, quote=False) for x in r.parts)
    if not (acc or tried or left):
        return html.escape(r.proposed, quote=False)
    return ((f"<b>{acc}</b>" if acc else "") + tried
            + (f"<span style='color:#767676' title='no node in the tree'>{left}</span>" if left else ""))


def neighbours_html(cycle: CycleTrace, selection: int | None = None, style: Style | None = None,
                    lexical: frozenset[str] | None = None, request: RequestTrace | None = None) -> str:
    """The table of :func:`neighbours_figure` as an HTML fragment (the app's panel: a plain
    table redraws far faster than a plotly one on every step). It fits its panel: fixed
    column shares (context and proposed capped), cells that wrap, and a horizontally
    scrolling div only below a minimum width."""
    s = style_or_default(style)
    t = neighbour_table(cycle, selection, lexical, request)
    head = "".join(f"<th style='{_WRAP}' title='{html.escape(why, quote=True)}'>{h}</th>"
                   for h, why in zip(NB_HEADER, NB_HEADER_HELP))
    cols = "".join(f"<col style='width:{w}%'>" for w in NB_COLUMN_PCT)
    td = f"<td style='{_WRAP}'>"
    rows = []
    for r in t.rows:
        ctx = "".join(f"<b style='color:{s.colour('semantic')}'>[{esc(x)}]</b>" if j == r.matched else esc(x)
                      for j, x in enumerate(r.context)) or "—"
        why = " · ".join(w for w in (r.result.why, r.outbid) if w)      # (hover: why not more)
        acc = f"<span title='{html.escape(why, quote=True)}'>{r.accepted_cell}</span>" if why else r.accepted_cell
        bg = " style='background:#FBE3D6'" if r.selected else ""
        rows.append(f"<tr{bg}>{td}{r.index}</td>{td}{r.similarity_cell}</td>{td}{html.escape(r.origin)}</td>"
                    f"<td class='mono' style='{_WRAP}'>{ctx}</td>"
                    f"<td class='mono' style='{_WRAP}'>{_proposed_html(r)}</td>{td}{acc}</td>"
                    f"{td}{'<b>no</b>' if r.lexical_cell == 'no' else r.lexical_cell}</td></tr>")
    if not rows:
        why = html.escape(t.empty_why, quote=False)
        rows.append(f"<tr><td colspan='7' style='color:#666;{_WRAP}'>no neighbours this cycle ({why})</td></tr>")
    notes = "".join(f"<div style='color:#666;font-size:0.85em'>{html.escape(n)}</div>" for n in t.footnotes)
    # focusable (tabindex): a keyboard scrolls it, and its arrow keys scroll it, not the cycles
    return (f"<div class='wb-neighbours' tabindex='0' style='max-width:100%;overflow-x:auto'>"
            f"<b>nearest neighbours</b> · cycle {t.cycle}: {len(t.rows)} retrieved{t.store}"
            + (f"<div style='color:#666;font-size:0.8em'>{html.escape(NB_CAPTION, quote=False)}{HTML_PARTS}</div>"
               if t.rows else "")
            + f"<table style='font-size:0.85em;width:100%;min-width:480px;table-layout:fixed'>"
            f"<colgroup>{cols}</colgroup><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>{notes}</div>")
