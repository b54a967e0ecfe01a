"""The gap-moments menu of the app (:mod:`workbench.ui`): the moments of the selected request
(:mod:`workbench.panels.gap_moments`), each a jump to the cycle that shows it."""
from __future__ import annotations

import gradio as gr

from . import figures as F
from .session import Catalogue, Session, find


class GapMomentsMenu:
    """The gap moments of the selected request (:mod:`workbench.panels.gap_moments`) as a menu
    beside the request and method menus: picking one jumps to the cycle that shows it (``GapMoment.cycle``; endpoint
    ``/gap_moment``); the menu follows every new selection (a ``.then`` after it)."""

    def __init__(self, st: Session, cat: Catalogue):
        self.cat = cat
        tr = find(st, cat, st.request, st.method)
        self.menu = gr.Dropdown(F.moment_choices(tr), value=F.moment_at(tr, st.cycle), label="gap moments",
                                info=F.moment_summary(tr), elem_id="wb-moments", scale=3)

    def _show(self, st: Session):
        """The selection's trace, and the moment of the cycle on screen (or None), which the menu
        now shows: ``st.moment_shown`` is kept beside it (see ``jump``)."""
        tr = find(st, self.cat, st.request, st.method)
        st.moment_shown = F.moment_at(tr, st.cycle)
        return tr, st.moment_shown

    def update(self, st: Session):
        tr, shown = self._show(st)
        return gr.Dropdown(choices=F.moment_choices(tr), value=shown, info=F.moment_summary(tr))

    def follow(self, st: Session):
        """After a step: the menu shows the moment of the cycle on screen, or nothing."""
        return gr.Dropdown(value=self._show(st)[1])

    def wire(self, state, selections, steps, step_outputs, goto, fast: dict) -> None:
        def jump(st, key):
            # gradio's dropdown sends its value as an input on every blur, picked or not: the
            # menu's own value again is no pick (jumping then undid a step or a typed cycle)
            if key == st.moment_shown:
                return [gr.skip()] * len(step_outputs)
            st.moment_shown = key
            k = F.moment_cycle(find(st, self.cat, st.request, st.method), key)
            return goto(st, st.cycle if k is None else k)
        # unchecked (preprocess=False): a value the menu no longer lists leaves the cycle as it is
        self.menu.input(jump, [state, self.menu], step_outputs, api_name="gap_moment", preprocess=False, **fast)
        for dep in selections:
            dep.then(self.update, state, self.menu, **fast)
        for dep in steps:
            dep.then(self.follow, state, self.menu, **fast)
