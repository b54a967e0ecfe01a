"""The gap-strip panel: one cell per output token, coloured by its identifiability-gap label
(lexical hit / gap within the semantic key's reach / gap missed / absent from the pool), and at
gap positions a mark where the key the drafter can ask when it drafts reaches the token too (the
diagnosis' key reads the state a token later than the drafter has it: the reach the drafter
can turn into accepted tokens is the marked part).

One row list (:func:`gap_cells`: a :class:`GapStrip`) is formatted by two renderers:
:func:`gap_strip_spec` (a plotly figure) and :func:`gap_strip_html` (the app's panel). Reads
the request's ``gap_labels`` and ``drafter_reach`` (written by ``python -m oilbird trace|replay
... --diagnose``, one diagnosis of the output, the same for every method; for the app's live
runs, the session's diagnosis against its store: :func:`gap_words`) and ``output_text``;
the cells of the selected cycle come from its ``committed`` tokens.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from itertools import accumulate

import plotly.graph_objects as go

from oilbird.methods import lookup
from oilbird.trace import GAP_POOL_STORE, RequestTrace

from ..palette import (BONUS, DRAFTER_EXPLANATION, DRAFTER_LEGEND, DRAFTER_MARK, DRAFTER_MISSING, DRAFTER_NOT,
                       DRAFTER_TOO, DRAFTER_UNASKED, DRAFTER_UNMARKED, GAP_COLOURS, GAP_DESCRIPTIONS, GAP_EXPLANATIONS,
                       GAP_KINDS, GAP_LABELS, GAP_PATTERNS, GAP_POOL, GAP_POOL_RECORDED, WARNING_CSS, Style,
                       source_label)
from .base import PATTERN, centred_note, esc, figure, panel_layout, pin_title, style_or_default, visible, wrap_html
from .provenance import committed_upto, is_live, is_replay, local_model, token_sources

GAP_SCOPE = "labels describe the output (the same for every method), not how {method} drafted it"
# a live run in the app is labelled against its own decoder's store (oilbird.evaluation.labels.RunningLabels)
LIVE_SCOPE = "labels: this output against {method}'s own store in the live session, not how {method} drafted it"
LIVE_POOL = ("pool = the outputs of {runs} of {method} in that session{same} (no prompts; "
             "not this run's own; each method's live runs fill a store of their own)")
LIVE_POOL_EMPTY = ("pool = empty: the first live run of {method} in its session, so every token is absent "
                   "(each method's live runs fill a store of their own; run another request next)")
GAP_BORDERS = {"lexical_hit": "solid", "gap_recovered": "double", "gap_missed": "dashed", "absent": "dotted"}
NO_COLOUR = "#777777"
# the gap moment shown: a bar under each of its tokens, black as the strip's other marks (its
# reddish purple until the thirty-fifth session is the rejected-branch pool's in the tree)
MOMENT_COLOUR = "#111111"
MOMENT_BAR = (-0.25, 0.14)     # ... in a plotly strip: its base and height (a cell is 0 to 1)


def gap_words(request: RequestTrace) -> tuple[str, str]:
    """What a request's labels describe and what their pool is, in words: one diagnosis of the
    output against the requests before it in its file (:data:`GAP_SCOPE`, :data:`GAP_POOL`; a
    replay's against the recording's earlier turns, :data:`~workbench.palette.GAP_POOL_RECORDED`), or
    for the app's live run against what the session's store for its method held then (labelled
    by :class:`~oilbird.evaluation.labels.RunningLabels`, which says so in ``meta["gap_pool"]``:
    a notebook's live runs are labelled as a file is), with what that pool held: empty (every
    token absent), or how many earlier runs and how many of this same request (its ``meta``'s
    ``gap_pool_runs``, ``gap_pool_same``; said in general where a trace gives no counts)."""
    meta, m = request.meta, request.method
    if meta.get("gap_pool") == GAP_POOL_STORE:
        runs, same = _count_of(meta.get("gap_pool_runs")), _count_of(meta.get("gap_pool_same"))
        held = f"the {runs} earlier live run{'s' * (runs != 1)}" if runs else "the earlier live runs"
        pool = (LIVE_POOL_EMPTY.format(method=m) if runs == 0 else
                LIVE_POOL.format(runs=held, method=m, same=f", {same} of them of this same request" if same else ""))
        return LIVE_SCOPE.format(method=m), pool
    if is_replay(request):
        return GAP_SCOPE.format(method=m), GAP_POOL_RECORDED.format(model=local_model(request))
    return GAP_SCOPE.format(method=request.method), GAP_POOL


def _count_of(value) -> int | None:
    """A count a trace's meta gives (None where it gives none, or not a whole number >= 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


NO_LABELS = "no gap labels"       # how every reason below begins (a menu's line says it once)


def no_labels_why(request: RequestTrace) -> str:
    """Why a request has no gap labels, as plain text beginning with :data:`NO_LABELS`. They
    come from the command-line diagnosis of a trace file (:func:`diagnose_command`: ``trace``'s
    or, for a replay's recorded turns, ``replay``'s ``--diagnose``), or for the app's live runs
    (``meta["live"]``) from the session (which says why where it could not label one:
    ``meta["no_labels"]``), so advising a command there would mislead."""
    if is_live(request):
        return f"{NO_LABELS}: " + str(request.meta.get("no_labels") or "this live run was not labelled")
    if request.meta.get("sampling"):
        return (f"{NO_LABELS}: the diagnosis labels greedy outputs, and this trace was sampled "
                f"(a greedy trace of the same requests, {diagnose_command(request)}, has them)")
    return f"{NO_LABELS} in this trace: regenerate it with {diagnose_command(request)}"


def diagnose_command(request: RequestTrace) -> str:
    """The command that writes traces like ``request`` with gap labels: ``replay ... --traces
    --diagnose`` for a replay's recorded turns, else ``trace ... --diagnose``."""
    if is_replay(request):
        return "python -m oilbird replay ... --traces --diagnose"
    return "python -m oilbird trace ... --diagnose"


def gap_hover(label: str) -> str:
    """A label's description, what it means and what the pool is (plain text)."""
    what = GAP_EXPLANATIONS.get(label)
    return f"{GAP_DESCRIPTIONS.get(label, label)}: {what}" if what else GAP_DESCRIPTIONS.get(label, label)


@dataclass(frozen=True)
class GapCell:
    """One output token's cell."""
    index: int
    label: str
    text: str        # the token's text, raw ("?" where the trace has fewer texts than labels)
    now: bool        # committed in the selected cycle (outlined)
    # at a gap position a drafter drafts: does the drafter's own key reach it? (None: not a gap,
    # not known, or the first token, which the prefill gives: ``prefill``)
    drafter: bool | None = None
    prefill: bool = False
    # what this trace's method did at the token: the sources that proposed it where it was drafted
    # and accepted, ("bonus",) where the verifier gave it (no draft had it); () where not known
    delivered: tuple[str, ...] = ()
    # at every other drafted position, the same question, for the hover alone (the marks and
    # counts keep to gap positions: :func:`drafter_marks`); None where not known
    reach: bool | None = None
    moment: bool = False   # one of the tokens of the gap moment shown (marked under the cell)
    # the first token after its cycle's root: that cycle's lookup was asked for it (palette's
    # DRAFTER_UNASKED); deeper in a tree, or the bonus after a path, no lookup was asked for it
    asked: bool = True


@dataclass(frozen=True)
class DrafterCount:
    """The drafter's marks of one strip: of the gap tokens a drafter drafts (all but a first
    token), how many its own key reaches, and the same among those within the semantic key's reach."""
    marked: int
    gaps: int
    marked_recovered: int
    recovered: int
    prefill: bool = False     # the first token is a gap token too, left out: the prefill gives it

    def words(self) -> str:
        first = "; the first token, a gap token too, is the prefill's: no drafter drafts it" if self.prefill else ""
        return (f"{self.marked} of the {self.gaps} gap tokens a drafter drafts ({self.marked_recovered} of the "
                f"{self.recovered} within the semantic key's reach){first}")


@dataclass(frozen=True)
class GapStrip:
    """The whole strip of one request, as both renderers show it."""
    method: str
    n_tokens: int
    cells: list[GapCell]                # [] without labels
    counts: dict[str, int | None]       # per label, the four known ones first; None without labels
    span: tuple[int, int] | None        # the selected cycle's tokens [lo, hi), None if it has none
    missing: str                        # why there are no labels ("" when there are)
    inconsistent: str                   # "" unless the labels do not match the output's length
    drafter: DrafterCount | None = None   # None: the trace does not say where the drafter's key reaches
    scope: str = ""                     # what the labels describe, and their pool (gap_words)
    pool: str = GAP_POOL
    keyless: bool = False               # its method drafts without the hidden-state key (:func:`keyless`)

    @property
    def marked(self) -> bool:
        """Whether the strip can carry marks (the drafter's reach known, and gap tokens it drafts)."""
        return self.drafter is not None and self.drafter.gaps > 0

    @property
    def drafter_line(self) -> str:
        """The marks in words ("" without labels), or why there are none; a renderer says what
        the mark looks like before it where there are marks (:data:`DRAFTER_LEGEND`)."""
        if self.missing:
            return ""
        if self.drafter is None:
            return (f"{self.method} has no hidden-state key: no drafter's key to mark (the labels are the "
                    "output's, not its drafter's)" if self.keyless else DRAFTER_MISSING)
        if not self.marked:
            return "no gap tokens a drafter drafts in this request: nothing for the drafter's own key to mark"
        return f"{DRAFTER_LEGEND}: {self.drafter.words()}"


def keyless(method: str, request: RequestTrace | None = None) -> bool:
    """Does ``method`` draft without the hidden-state key (``goose``, ``oilbird-no-semantic``, the
    peers)? Its trace carries the request's ``drafter_reach`` (the diagnosis of the output), but
    no drafter of its own asks that key. For a name this version does not know (a decoder built
    without a preset, a trace from elsewhere), its trace ``request`` says: every drafting cycle
    recorded that the method drafts without the key ("no-source"); False where it does not say
    (its marks are shown)."""
    m = lookup(method)
    if m is not None:
        return not m.has_semantic
    said = [c.retrieval for c in (request.cycles if request is not None else []) if c.retrieval is not None]
    return bool(said) and all(r == "no-source" for r in said)


def drafter_marks(request: RequestTrace) -> list[bool | None] | None:
    """Per output token, whether the drafter's own key reaches it, at the gap tokens a drafter
    drafts (a gap label, and not the first token, which the prefill gives); None at every other
    token. None for the whole request where the trace has no labels or no ``drafter_reach`` (or
    lists of another length), or its method has no hidden-state key (:func:`keyless`). The one
    rule of the strip's marks and the moments' counts."""
    labels, reach = request.gap_labels, request.drafter_reach
    if labels is None or reach is None or len(reach) != len(labels) or keyless(request.method, request):
        return None
    return [bool(x) if lab in GAP_KINDS and k > 0 else None for k, (lab, x) in enumerate(zip(labels, reach))]


def gap_cells(request: RequestTrace, cycle: int | None = None, moment: tuple[int, int] | None = None) -> GapStrip:
    """The cells of ``request``'s strip with cycle index ``cycle``'s tokens marked, and the tokens
    ``[start, end)`` of ``moment`` (a gap moment shown: :func:`~workbench.panels.gap_moments.moment_span`)."""
    labels, n = request.gap_labels, len(request.output_ids)
    span = None
    if cycle is not None and 0 <= cycle < len(request.cycles):
        lo, hi = committed_upto(request, cycle - 1) if cycle > 0 else 0, committed_upto(request, cycle)
        span = (lo, hi) if hi > lo else None
    if labels is None:
        return GapStrip(request.method, n, [], dict.fromkeys(GAP_LABELS), span, no_labels_why(request), "",
                        None, *gap_words(request))
    marks = drafter_marks(request)
    got = token_sources(request)
    reach = request.drafter_reach if marks is not None else None
    asked = asked_positions(request)
    cells = [GapCell(k, lab, request.output_text[k] if k < len(request.output_text) else "?",
                     span is not None and span[0] <= k < span[1], marks[k] if marks else None,
                     marks is not None and k == 0 and lab in GAP_KINDS, tuple(got[k]) if k < len(got) else (),
                     None if reach is None or k == 0 or reach[k] is None else bool(reach[k]),
                     moment is not None and moment[0] <= k < moment[1], asked is None or k in asked)
             for k, lab in enumerate(labels)]
    counts = {g: labels.count(g) for g in dict.fromkeys(list(GAP_LABELS) + list(labels))}
    drafter = None
    if marks is not None:
        seen = [c for c in cells if c.drafter is not None]
        rec = [c for c in seen if c.label == "gap_recovered"]
        drafter = DrafterCount(sum(c.drafter for c in seen), len(seen), sum(c.drafter for c in rec), len(rec),
                               bool(cells) and cells[0].prefill)
    bad = f"{len(labels)} labels for {n} output tokens: the trace is inconsistent" if len(labels) != n else ""
    return GapStrip(request.method, n, cells, counts, span, "", bad, drafter, *gap_words(request),
                    keyless=keyless(request.method, request))


def asked_positions(request: RequestTrace) -> set[int] | None:
    """The output positions a drafting cycle's lookup was keyed for: each such cycle's first
    committed token (the one after its root; not the prefill's). The drafter's key is marked at
    every gap token (what it would find asked there); only at these could a cycle's lookup have
    been asked. None where the trace has no cycle records (it does not say)."""
    if not request.cycles:
        return None
    starts = accumulate((len(c.committed) for c in request.cycles), initial=0)
    return {k for k, c in zip(starts, request.cycles) if c.committed and c.tokens}


def marked_words(c: GapCell) -> str:
    """A marked cell's mark in words: the drafter's key reaches it, and, where no cycle asked for
    that token (:attr:`GapCell.asked`), that it would have (the band's hover, the outlined line)."""
    return DRAFTER_MARK + ("" if c.asked else f", {DRAFTER_UNASKED}")


def cell_hover(c: GapCell, method: str = "") -> str:
    """A cell's label in words, at a gap position whether the drafter's key reaches it, and what
    ``method``'s drafter did there (the label is the output's; this answers why it missed)."""
    said = gap_hover(c.label)
    if c.index == 0:
        return f"{said}; the first token: the prefill gives it, no drafter drafts it"
    if c.drafter is not None:
        said = (f"{said}. The drafter's own key reaches it" + ("" if c.asked else f", {DRAFTER_UNASKED}")
                + f": {DRAFTER_EXPLANATION}" if c.drafter else f"{said}; {DRAFTER_NOT}")
    elif c.reach is not None:
        said = f"{said}; {DRAFTER_TOO if c.reach else DRAFTER_NOT}"
    return f"{said}. {delivered_words(c.delivered, method)}" if c.delivered else said


def delivered_words(sources: tuple[str, ...], method: str = "") -> str:
    """What a method's drafter did at one output token, in words (its trace's committed sources:
    the exact-match labels read only earlier requests' outputs, a drafter also reads the prompt).

    >>> delivered_words(("pld", "semantic"), "oilbird")
    'oilbird drafted it: prompt lookup, semantic key'
    >>> delivered_words(("bonus",), "goose")
    "goose had not drafted it: the verifier's own token (bonus)"
    """
    who = method or "the drafter"
    if tuple(sources) == (BONUS,):
        return f"{who} had not drafted it: the verifier's own token (bonus)"
    return f"{who} drafted it: {', '.join(source_label(x) for x in sources)}"


def _count(c: int | None) -> str:
    return "–" if c is None else str(c)


# the figure's drafter mark: a bar from this base, this tall, over a cell of height 1 (its top
# 22%, as the HTML strip's band is 5 of a cell's 22 pixels)
BAND = (0.78, 0.22)


def gap_strip_spec(request: RequestTrace, cycle: int | None = None, style: Style | None = None,
                   moment: tuple[int, int] | None = None) -> dict:
    """The per-token gap labels of one request (see :func:`gap_strip_figure`)."""
    s = style_or_default(style)
    g = gap_cells(request, cycle, moment)
    pool = wrap_html(g.pool, s, s.font_size - 1, 110, quote=False)
    data = []
    for lab, count in g.counts.items():
        ks = [c for c in g.cells if c.label == lab]
        data.append({
            "type": "bar", "x": [c.index for c in ks] or [None], "y": [1] * len(ks) if ks else [None], "width": 1,
            "name": f"{GAP_DESCRIPTIONS.get(lab, lab)} ({_count(count)})", "legendgroup": lab, "showlegend": True,
            "marker": {"color": GAP_COLOURS.get(lab, NO_COLOUR),
                       "pattern": {"shape": GAP_PATTERNS.get(lab, ""), "fgcolor": "#333333", **PATTERN},
                       "line": {"width": 0.5, "color": "white"}},
            "hovertext": [f"token {c.index}: {esc(c.text)}<br>{html.escape(cell_hover(c, g.method), quote=False)}<br>{pool}"
                          for c in ks] or None,
            "hoverinfo": "text", "meta": lab})
    if g.marked:
        marked = [c for c in g.cells if c.drafter]
        # the app's mark (gap_strip_html's _BAND): a black band across the top of the cell
        data.append({
            "type": "bar", "x": [c.index for c in marked] or [None], "base": BAND[0], "y": [BAND[1]] * len(marked)
            if marked else [None], "width": 1,
            # (its key swatch is a square, as the moment's bar's is: the name says where each lies)
            "name": f"band across the top: {DRAFTER_MARK} ({g.drafter.marked} of {g.drafter.gaps} gap tokens)",
            "marker": {"color": "#111111", "line": {"width": 0.5, "color": "white"}}, "showlegend": True,
            "hovertext": [f"token {c.index}: {esc(c.text)}<br>"
                          f"{html.escape(marked_words(c) + ': ' + DRAFTER_EXPLANATION, quote=False)}"
                          for c in marked] or None,
            "hoverinfo": "text", "meta": "drafter"})
    under = [c for c in g.cells if c.moment]
    if under:
        # the app's bar under the tokens of the gap moment shown (gap_strip_html's _UNDER)
        data.append({
            "type": "bar", "x": [c.index for c in under], "base": MOMENT_BAR[0], "y": [MOMENT_BAR[1]] * len(under),
            "width": 1, "name": "bar under: the gap moment shown ("
                                + (f"token {under[0].index})" if len(under) == 1
                                   else f"tokens {under[0].index}-{under[-1].index})"),
            "marker": {"color": MOMENT_COLOUR, "line": {"width": 0}}, "showlegend": True,
            "hovertext": [f"token {c.index}: {esc(c.text)}<br>the gap moment shown" for c in under],
            "hoverinfo": "text", "meta": "moment"})
    notes, shapes = [], []
    if g.missing:      # wrapped to the width: at 700 px it was cut at both ends
        notes.append(centred_note(wrap_html(g.missing, s, 13, margin=40)))
    elif g.inconsistent:
        notes.append(centred_note(g.inconsistent, y=1.0))
    if g.span is not None and not g.missing:      # (no cells to outline: the box was drawn over the note)
        shapes.append({"type": "rect", "x0": g.span[0] - 0.5, "x1": g.span[1] - 0.5, "y0": -0.05, "y1": 1.1,
                       "xref": "x", "yref": "y", "line": {"width": 2.5, "color": "#111111"},
                       "fillcolor": "rgba(0,0,0,0)"})
    # the count and the prefill's note on lines of their own: one line was cut at an export's width;
    # each wrapped to the figure's width where it has one (at 700 px every line ran past the edge)
    def lines(*texts: str, fallback: int | None = None) -> str:
        return "".join(f"<br>{w}" for text in texts
                       if (w := wrap_html(text, s, s.font_size - 1, fallback, quote=False)))
    parts = g.drafter.words().split("; ") if g.marked else []
    drafter = (lines(f"black band: {DRAFTER_LEGEND}:", *[p + ";" for p in parts[:-1]], parts[-1]) if g.marked
               else lines(g.drafter_line) if g.drafter_line else "")
    # the outlined cells in words (an export has no hover; the app's strip says the same under its cells)
    now = lines(now_line(g), fallback=110)
    head = wrap_html(f"gap strip · {request.request_id} · {request.method}: one cell per output token ({g.n_tokens})",
                     s, s.font_size + 2)
    title = (head + f"<span style='font-size:{s.font_size - 1}px;color:#666'>"
             f"{lines(g.scope)}<br>{pool}{drafter}</span>"
             + (f"<span style='font-size:{s.font_size - 1}px'>{now}</span>" if now else ""))
    more = title.count("<br>") - 2          # lines below the head, scope and pool: the title grows downwards
    lay = panel_layout(s, title, height=240 + 30 * more, annotations=notes,
                       shapes=shapes, barmode="overlay", bargap=0, legend={"orientation": "h", "y": -0.3},
                       margin={"l": 20, "r": 10, "t": 85 + 25 * more, "b": 20},
                       xaxis={"range": [-0.5, max(g.n_tokens, 1) - 0.5], "showgrid": False},
                       yaxis={"visible": False, "range": [MOMENT_BAR[0] - 0.03 if under else 0, 1.15]})
    return {"data": data, "layout": pin_title(lay, top=22)}     # its lines run downwards from the top


def gap_strip_figure(request: RequestTrace, cycle: int | None = None, style: Style | None = None,
                     moment: tuple[int, int] | None = None) -> go.Figure:
    """One cell per output token, coloured and patterned by its diagnosis label (lexical hit /
    gap within the semantic key's reach / gap missed / absent from the pool; counts in the
    legend). The labels come from a diagnosis of the output, not from the method's drafting, so
    every method's strip of a request in one trace file is the same (the title says so; a live
    run's are against its own session's store, :func:`gap_words`). The tokens committed
    in cycle index ``cycle`` are outlined. The title and every cell's hover say what the pool
    is (:data:`~workbench.palette.GAP_POOL`: earlier requests' outputs, not this request's
    prompt or own output), so "absent from pool" is not read as absent from the prompt. Without
    labels (``gap_labels is None``) the strip is empty and says where they come from. A live
    run's labels are against the session's store for its method (:func:`gap_words`). A bar
    runs under the output tokens ``[start, end)`` of ``moment`` (the gap moment shown:
    :func:`~workbench.panels.gap_moments.moment_span`), as in the app's strips."""
    return figure(gap_strip_spec(request, cycle, style, moment), style)


_CELL = "display:inline-block;width:9px;height:22px;margin:0 1px 10px 0;vertical-align:top;"   # room for the bar
# black text on the key's swatches, set here: the theme's text colour read at 3.9:1 on vermillion,
# and a dark theme turns it light on the light swatches
_KEY = "display:inline-block;padding:1px 6px;margin:4px 4px 0 0;font-size:0.85em;color:#000;"


_BAND = "inset 0 5px 0 #111"     # the drafter's mark: a black band across a cell's top
_MARK = f"box-shadow:{_BAND};"
# the moment's bar 4 px below the cell, white between: the cycle's frame (the same black) is
# drawn around the cell, and a bar against it read as a thicker frame
_UNDER = f"0 4px 0 white, 0 9px 0 {MOMENT_COLOUR}"


def _html_key(g: GapStrip) -> str:
    """The key: one swatch per label with its count (its title says what it means), then the
    drafter's mark and its count (or why the trace has none)."""
    mark = ""
    if g.drafter_line:
        swatch = (f"<span style='{_CELL}width:14px;background:{GAP_COLOURS['gap_recovered']};{_MARK}'></span> "
                  "black band: " if g.marked else "")
        mark = (f"<div class='gap-drafter' title='{html.escape(DRAFTER_EXPLANATION, quote=True)}' "
                f"style='font-size:0.85em;margin-top:4px'>{swatch}{html.escape(g.drafter_line, quote=False)}</div>")
    return " ".join(
        f"<span class='gap-key' title='{html.escape(gap_hover(lab) + '; ' + g.pool, quote=True)}' "
        f"style='{_KEY}background:{GAP_COLOURS.get(lab, NO_COLOUR)}"
        + ("" if g.missing else f";border-bottom:4px {GAP_BORDERS.get(lab, 'solid')} #333")
        + f"'>{GAP_DESCRIPTIONS.get(lab, html.escape(lab))} ({_count(c)})</span>" for lab, c in g.counts.items()) + mark


def gap_strip_html(request: RequestTrace, cycle: int | None = None, style: Style | None = None,
                   moment: tuple[int, int] | None = None) -> str:
    """The strip of :func:`gap_strip_figure` as an HTML fragment: one cell per output token
    (colour plus a border style per label, the token in its ``title``; a black band across the
    top of a gap cell the drafter's key reaches), the cells of cycle index ``cycle`` outlined,
    and the counts per label and of the marks; a bar under the tokens of ``moment`` (the gap
    moment shown, :func:`~workbench.panels.gap_moments.moment_span`)."""
    g = gap_cells(request, cycle, moment)
    under = (f" · <span style='border-bottom:4px solid {MOMENT_COLOUR}'>the gap moment shown</span> underlined"
             if moment else "")
    head = (f"<b>gap strip</b> · one cell per output token{under} · <span style='color:#666'>"
            f"{html.escape(g.scope, quote=False)}<br>"
            f"{html.escape(g.pool, quote=False)}</span>")
    if g.missing:
        command = diagnose_command(request)
        why = html.escape(g.missing).replace(command, f"<code>{command}</code>")
        return f"<div class='wb-gap'>{head}<div style='color:#666;padding:6px 0'>{why}</div>{_html_key(g)}</div>"
    now = "outline:2px solid #111;outline-offset:-2px;"
    cells = "".join(_cell_html(c, g.method, "gap-cell", _CELL, 4, _BAND, now) for c in g.cells)
    warn = f"<div style='{WARNING_CSS}'>{g.inconsistent}</div>" if g.inconsistent else ""
    return f"<div class='wb-gap'>{head}{warn}<div class='gap-row'>{cells}</div>{_now_html(g)}{_html_key(g)}</div>"


NOW_SHOWN = 16     # the outlined cells said in words, at most (a long cycle's rest is counted)


def now_words(g: GapStrip) -> list[tuple[list[str], str]]:
    """The selected cycle's cells (the outlined ones) in words, for a screen where nobody hovers
    (a projector): runs of neighbouring tokens said the same way, each as its tokens' texts and
    its words (the label, and at a gap token a drafter drafts whether the drafter's own key
    reaches it); at most :data:`NOW_SHOWN` tokens, then how many more (an item with no tokens).

    >>> cells = [GapCell(0, "absent", " a", True), GapCell(1, "absent", "b", True),
    ...          GapCell(2, "gap_recovered", "c", True, drafter=True)]
    >>> now_words(GapStrip("oilbird", 3, cells, {}, (0, 3), "", ""))
    [(['·a', 'b'], 'absent from pool (as a pair)'), (['c'], "gap: semantic key reaches; drafter's key reaches it")]
    """
    now = [c for c in g.cells if c.now]
    said: list[tuple[list[str], str]] = []
    for c in now[:NOW_SHOWN]:
        words = GAP_DESCRIPTIONS.get(c.label, c.label) + (
            "" if c.drafter is None else f"; {marked_words(c) if c.drafter else DRAFTER_UNMARKED}")
        if said and said[-1][1] == words:
            said[-1][0].append(visible(c.text))
        else:
            said.append(([visible(c.text)], words))
    more = len(now) - NOW_SHOWN
    return said + ([([], f"and {more} more token{'s' * (more != 1)}")] if more > 0 else [])


def now_line(g: GapStrip, code=lambda text: f"'{text}'", escape=lambda text: text) -> str:
    """:func:`now_words` as one line ("" where the cycle committed no labelled token, or the strip
    has no labels): each run's tokens (apart by a thin space, as a space shows as '·') through
    ``escape`` then ``code``, then its words through ``escape``; items apart by " · ". Plain text
    by default (quoted tokens); the app's HTML escapes and puts the tokens in ``<code>``."""
    said = now_words(g) if not g.missing else []
    items = [(f"{code(escape(chr(0x2009).join(ts)))} " if ts else "") + escape(w) for ts, w in said]
    return f"outlined, this cycle's tokens: {' · '.join(items)}" if items else ""


def _now_html(g: GapStrip) -> str:
    """:func:`now_line` as a line under the strip, each run's tokens in ``<code>``."""
    line = now_line(g, lambda text: f"<code>{text}</code>", lambda text: html.escape(text, quote=False))
    return f"<div class='gap-now' style='font-size:0.85em;margin:2px 0 4px 0'>{line}</div>" if line else ""


def _cell_html(c: GapCell, method: str, kind: str, size: str, border: int, band: str, now: str) -> str:
    """One cell of an HTML strip: its label's colour and border pattern (``border`` px), the
    drafter's ``band`` (a box shadow) where its key reaches the token, a bar under the tokens of
    the moment shown, ``now`` (an outline) on the cycle's tokens, and the token and what its label
    means in the hover."""
    now = now if c.now else ""
    shadows = [band] * bool(c.drafter) + [_UNDER] * c.moment     # the drafter's band; the moment's bar under
    mark = f"box-shadow:{', '.join(shadows)};" if shadows else ""
    drafter = "" if c.drafter is None else f" data-drafter='{str(c.drafter).lower()}'"
    return (f"<span class='{kind}' data-label='{html.escape(c.label)}'{drafter} title='{c.index}: "
            f"{html.escape(visible(c.text), quote=True)} · {html.escape(cell_hover(c, method), quote=True)}' "
            f"style='{size}background:{GAP_COLOURS.get(c.label, NO_COLOUR)};"
            f"border-bottom:{border}px {GAP_BORDERS.get(c.label, 'solid')} #333;{mark}{now}'></span>")


_MINI = "display:inline-block;width:{w}px;height:12px;margin:0 1px 10px 0;vertical-align:top;"
MINI_ROW = 900     # pixels the small strip's cells may take on one line (a 1024-pixel window's bar)
MINI_WIDEST = 12   # a short output's cells widen up to this (a projector shows them), a long one's narrow to 1
MINI_PATTERNED = 8   # cells at least this wide keep their label's border pattern
_SWATCH = "display:inline-block;width:10px;height:10px;margin:0 3px 0 8px;vertical-align:middle;"


def gap_strip_mini_html(request: RequestTrace | None, cycle: int | None = None,
                        moment: tuple[int, int] | None = None) -> str:
    """The strip's cells alone, small, for a bar that stays in view beside the tree (the app's
    buttons): the same colours and hovers as :func:`gap_strip_html` (the border patterns only
    in cells of :data:`MINI_PATTERNED` pixels or more), the drafter's band thinner, the cells of
    cycle index ``cycle`` framed outside (an outline inside would hide a thin cell's colour).
    Cells are as wide as one line of :data:`MINI_ROW` pixels allows, from :data:`MINI_WIDEST`
    down to 1 (the app scrolls past two lines), and a key of the four labels with their counts
    and of the drafter's band follows (the text's legend nearby colours sources, not labels),
    with a live run's empty pool said there too; a bar under the tokens of ``moment``. Empty
    without labels (the full strip says why)."""
    if request is None:
        return ""
    g = gap_cells(request, cycle, moment)
    if g.missing or g.inconsistent:
        return ""
    width = max(1, min(MINI_WIDEST, MINI_ROW // max(1, g.n_tokens) - 1))
    size = _MINI.format(w=width)
    # the border patterns where a cell is wide enough to show them (a few pixels of dashes, dots
    # or a double line read as one dark line that hid the colours)
    pattern = 3 if width >= MINI_PATTERNED else 0
    cells = "".join(_cell_html(c, g.method, "gap-mini", size, pattern, "inset 0 3px 0 #111",
                               "outline:2px solid #111;") for c in g.cells)
    key = "".join(f"<span style='{_SWATCH}background:{GAP_COLOURS[lab]}'></span>"
                  f"{html.escape(GAP_DESCRIPTIONS[lab].split(' (')[0])} {_count(g.counts.get(lab))}"
                  for lab in GAP_LABELS)
    if g.marked:      # the band is in the small strip too: its meaning beside the colours'
        key += (f"<span style='{_SWATCH}background:{GAP_COLOURS['gap_recovered']};box-shadow:inset 0 3px 0 #111'>"
                f"</span>{html.escape(DRAFTER_MARK)} {g.drafter.marked}")
    empty = " · pool empty: the first live run of this method" if g.pool.startswith("pool = empty") else ""
    return (f"<div class='wb-gap-mini' title='gap strip (in full below the tree): one cell per output token, "
            f"this cycle framed'>{cells}</div><div class='wb-gap-mini-key' style='font-size:0.8em;color:#444'>"
            f"<b>gap strip</b>, tokens (this cycle framed{'; the gap moment shown underlined' if moment else ''}):"
            f"{key}{html.escape(empty)}</div>")
