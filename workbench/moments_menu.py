"""The gap-moments menu of the app (:mod:`workbench.ui`): the moments of the selected request
(:mod:`workbench.panels.gap_moments`), each a jump to the cycle that shows it. Every redraw
sets it in the same answer (:func:`menu_update`, a field of the app's outputs), so what it
shows and what the session knows it shows never part."""
from __future__ import annotations

import gradio as gr

from . import figures as F
from .session import Catalogue, Session, find

MENU_MIN_WIDTH = 700    # pixels the gap-moments menu keeps, or it wraps below the request's menus


def shown_moment(st: Session, tr) -> str | None:
    """The moment the menu shows for the cycle on screen: the one picked, while its request and
    cycle are shown (two moments may share a cycle; another request opens on its own), else the
    cycle's own, else None (:func:`~workbench.figures.moment_kept`); kept in ``st.moment_shown``,
    which ``jump`` compares with what the menu sends."""
    st.moment_shown = F.moment_kept(tr, st.moment_shown, st.cycle, st.moment_request == st.request)
    st.moment_request = st.request
    return st.moment_shown


def menu_update(st: Session, tr, full: bool, info: str | None = None) -> gr.Dropdown:
    """The menu after a redraw of ``st`` (its trace ``tr``, or None): the moment shown
    (:func:`shown_moment`), or nothing; with ``full`` (a new selection), or where the menu lists
    another trace's moments or none (``st.menu_of``: a redraw that failed emptied it), the
    request's moments too, and a line over them (``info``, else
    :func:`~workbench.figures.moment_summary`)."""
    shown_moment(st, tr)
    key = (st.request, st.method, id(tr) if info is None else None)
    if not full and key == st.menu_of:
        return gr.Dropdown(value=st.moment_shown)
    st.menu_of = key
    return gr.Dropdown(choices=F.moment_choices(tr), value=st.moment_shown,
                       info=F.moment_summary(tr) if info is None else info)


class GapMomentsMenu:
    """The gap moments of the selected request (:mod:`workbench.panels.gap_moments`) as a menu
    beside the request and method menus: picking one jumps to the cycle that shows it
    (``GapMoment.cycle``; endpoint ``/gap_moment``). Every redraw sets it (:func:`menu_update`)."""

    def __init__(self, st: Session, cat: Catalogue):
        self.cat = cat
        tr = find(st, cat, st.request, st.method)
        self.menu = gr.Dropdown(F.moment_choices(tr), value=F.moment_at(tr, st.cycle), label="gap moments",
                                info=F.moment_summary(tr), elem_id="wb-moments", scale=3,
                                filterable=False,     # typed digits landed inside the shown label
                                # below ~1300 px the menu takes a line of its own, as wide as the
                                # window: beside the others it cut its own line (on a projector, at
                                # "gap: semantic key reac"), the key's verdict lost
                                min_width=MENU_MIN_WIDTH)

    def wire(self, state, step_outputs, goto, fast: dict) -> None:
        def jump(st, key):
            # gradio's dropdown sends its value as an input on every blur, picked or not: the
            # menu's own value again is no pick (jumping then undid a step or a typed cycle)
            if key == st.moment_shown:
                return [gr.skip()] * len(step_outputs)
            m = F.moment_of(find(st, self.cat, st.request, st.method), key)
            if m is None or m.cycle is None:                 # not a moment of this trace: stay
                return goto(st, st.cycle)
            st.moment_shown, st.moment_request = m.key, st.request   # (an API's 3 is the menu's "3"); kept
            return goto(st, m.cycle)
        # unchecked (preprocess=False): a value the menu no longer lists leaves the cycle as it is
        self.menu.input(jump, [state, self.menu], step_outputs, api_name="gap_moment", preprocess=False, **fast)
