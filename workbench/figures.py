"""Figures of the workbench: pure functions of trace records, shared by the app and notebooks.

Every figure comes in two forms with the same arguments, mostly ``(trace, selection, style)``
(the exceptions take what they compare or count: ``compare_figure(a, b, selection, style)`` and
``funnel_figure(source, methods, style, scope)``):

* ``X_figure(...) -> plotly.graph_objects.Figure``: validated, for notebooks and exports;
* ``X_spec(...) -> dict``: the same figure as a plain plotly JSON dict (``{"data", "layout"}``),
  built without plotly's per-property validation (~100x cheaper), which the app sends to the
  browser as is (:func:`spec_json`). ``X_figure`` is ``figure(X_spec(...))``, so the tests that
  validate the figures also validate what the app shows.

Arguments: ``trace`` is a :class:`~oilbird.trace.CycleTrace` or
:class:`~oilbird.trace.RequestTrace` (read only; never the model, the store or the sources);
``selection`` says what to emphasise (for request-level figures: a cycle index into
``request.cycles``; ``None`` = the whole request); ``style`` is a
:class:`~workbench.palette.Style` (``None``: the default). Nothing global is read or written;
colours, markers and line styles come from :mod:`workbench.palette`. From a notebook::

    from oilbird.trace import load_traces
    from workbench import figures as F
    from workbench.app import TRACES_DIR        # the shipped traces, from any working folder
    req = load_traces(TRACES_DIR / "builtin.jsonl")[7]          # builtin/00-3 with oilbird
    F.tree_figure(req.cycles[3], **F.trace_marks(req))
    F.metrics_figure(req, cycle=3)

(for slides: :func:`workbench.export.export_figures`, the app's export)

Every legend lists all sources / statuses / labels even when a view has none of them (legend
entries are carried by data-less traces, ``x=[None]``), so the key never changes between views
(one exception: the "accepted, not committed" status, which only a request's last cycle can
have, is keyed where it occurs);
a source the palette does not know gets a grey entry of its own where it appears
(:func:`~workbench.palette.shown_sources`).
Tokens are shown with whitespace made visible (:func:`visible`).

This module is the facade: each panel lives in its own module under :mod:`workbench.panels`
(``tree``, ``text``, ``neighbours``, ``gap``, ``gap_moments``, ``metrics``, ``compare``, ``funnel``; the counter
and a whole
cycle at once in ``cycle``; what each token's provenance is in ``provenance``), and every
public name is re-exported here, so ``from workbench import figures as F`` reaches them all.
Where a panel is drawn both as a figure and as HTML (text, neighbours, gap strip), both
renderers format one row list (``text_cells``, ``neighbour_table``, ``gap_cells``). What the
semantic key did in a cycle and why a neighbour got no node are each answered by one function,
:func:`semantic_outcome` and :func:`neighbour_result`.
"""
from __future__ import annotations

from oilbird.trace import lexical_sources    # which sources a trace counts as exact match (its drafter's spine)

from .palette import DEFAULT_STYLE, Style
from .panels.base import (BY_PRIMARY, BY_PRIMARY_KEY, CHAR_EM, CURSOR, PATTERN, SHARE_TITLE, TABLE_WIDTH,
                          WHITESPACE, figure, message_spec, spec_json, visible)
from .panels.compare import compare_figure, compare_spec, first_difference
from .panels.cycle import counter_html, cycle_at, cycle_count, cycle_figures, cycle_specs, first_cycle, last_cycle
from .panels.funnel import FUNNEL_TITLE, LOSSES, as_funnel, funnel_figure, funnel_glossary, funnel_scope, funnel_spec
from .panels.gap import (GAP_BORDERS, GAP_SCOPE, NOW_SHOWN, DrafterCount, GapCell, GapStrip, asked_positions,
                         drafter_marks, gap_cells, gap_strip_figure, gap_strip_html, gap_strip_mini_html,
                         gap_strip_spec, keyless, now_line, now_words)
from .panels.gap_moments import (MOMENT_LABELS, GapMoment, clarity, clearest_moment, gap_moments, lexical_rivals,
                                 moment_at, moment_choices,
                                 moment_cycle, moment_kept, moment_of, moment_span, moment_summary)
from .panels.metrics import metrics_figure, metrics_spec
from .panels.neighbours import (CELL_HEIGHT, CELL_PAD, NB_COLUMN_PCT, NB_COLUMN_PX, NB_HEADER, NB_HEADER_HELP,
                                NOT_IN_TREE, SIMILARITY_FLOOR, NeighbourResult, NeighbourRow, NeighbourTable,
                                SemanticOutcome, neighbour_result, neighbour_table, neighbours_figure,
                                neighbours_html, neighbours_spec, outbid, price, semantic_outcome)
from .panels.provenance import (NO_CYCLES, accepted_share, bonus_committed, committed_drafts, committed_upto,
                                drafted_sources, is_live, is_replay, live_mark, output_stops, token_cycles, token_sources,
                                trace_marks, tree_rows, verdict_text)
from .panels.text import TEXT_BORDERS, TokenCell, text_cells, text_figure, text_html, text_spec
from .panels.tree import tree_figure, tree_layout, tree_spec

__all__ = [
    # plumbing (and the palette's style, which every figure takes)
    "DEFAULT_STYLE", "Style",
    "BY_PRIMARY", "BY_PRIMARY_KEY", "CHAR_EM", "CURSOR", "PATTERN", "SHARE_TITLE", "TABLE_WIDTH", "WHITESPACE",
    "figure", "message_spec", "spec_json", "visible",
    # provenance and the cycle
    "NO_CYCLES", "accepted_share", "bonus_committed", "committed_drafts", "committed_upto", "drafted_sources",
    "lexical_sources", "output_stops", "token_cycles", "token_sources", "verdict_text",
    "counter_html", "cycle_at", "cycle_count", "cycle_figures", "cycle_specs", "first_cycle", "last_cycle",
    # the panels
    "is_live", "is_replay", "live_mark", "trace_marks", "tree_figure", "tree_layout", "tree_rows", "tree_spec",
    "TEXT_BORDERS", "TokenCell", "text_cells", "text_figure", "text_html", "text_spec",
    "CELL_HEIGHT", "CELL_PAD", "NB_COLUMN_PCT", "NB_COLUMN_PX", "NB_HEADER", "NB_HEADER_HELP", "NOT_IN_TREE", "SIMILARITY_FLOOR",
    "NeighbourResult", "NeighbourRow", "NeighbourTable", "SemanticOutcome", "neighbour_result",
    "neighbour_table", "neighbours_figure", "neighbours_html", "neighbours_spec", "outbid", "price",
    "semantic_outcome",
    "GAP_BORDERS", "GAP_SCOPE", "NOW_SHOWN", "DrafterCount", "GapCell", "GapStrip", "asked_positions", "drafter_marks",
    "gap_cells", "now_line", "now_words",
    "gap_strip_figure", "gap_strip_html", "gap_strip_mini_html", "gap_strip_spec", "keyless",
    "MOMENT_LABELS", "GapMoment", "clarity", "clearest_moment", "gap_moments", "lexical_rivals", "moment_at",
    "moment_choices", "moment_cycle", "moment_kept", "moment_of", "moment_span",
    "moment_summary",
    "metrics_figure", "metrics_spec",
    "compare_figure", "compare_spec", "first_difference",
    "FUNNEL_TITLE", "LOSSES", "as_funnel", "funnel_figure", "funnel_glossary", "funnel_scope", "funnel_spec",
]
