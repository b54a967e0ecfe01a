"""The app's two live-run buttons (:mod:`workbench.ui`), as each event redraws them from the
session: Run live (greyed out where the selection cannot be decoded, or while a run waits or
decodes) and Stop live run (clickable only while there is a run to stop)."""
from __future__ import annotations

import gradio as gr

from .session import Data, Session, cannot_run_live


def live_button(st: Session, data: Data | None, **kw) -> gr.Button:
    """The Run live button for the selection in ``st`` (built with ``kw``, or an event's update):
    greyed out where it cannot be decoded (:func:`~workbench.session.cannot_run_live`: no prompt
    in ``--data``, as for a replay's recorded turns, or a method that is not a preset), its label
    saying so; and while a run of the session waits or decodes ("Running…": a double click queued
    a second run, which then stood in for the first on screen)."""
    can = cannot_run_live(st.request, st.method, data) is None
    running = st.live_pressed > st.live_done
    return gr.Button("Running…" if running else "Run live" if can else "Run live (n/a)",
                     interactive=can and not running, **kw)


def stop_button(st: Session, **kw) -> gr.Button:
    """The Stop live run button (built with ``kw``, or an event's update): clickable while a run
    of this session was pressed, has not ended (waiting in the queue or decoding) and was not
    stopped already."""
    return gr.Button("Stop live run", interactive=st.live_pressed > max(st.live_done, st.stop_upto), **kw)
