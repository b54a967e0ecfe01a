"""The app's two live-run buttons (:mod:`workbench.ui`), as each event redraws them from the
session: Run live (greyed out where the selection cannot be decoded, or while a run waits or
decodes and was not stopped) and Stop live run (clickable only while there is a run to stop),
and the numbers of the session's runs that both follow (:func:`press`, :func:`start`, :func:`end`,
:func:`stop`).

A run's number is its press's: Run's press handler counts it and hands it to the run through the
page (a hidden field the queued event reads when it is sent), so a run gradio dropped from its
queue without running it (as when the page's connection broke) takes no later run's number: the
next run that ends gives Run back, and a Stop pressed meanwhile stops the dropped run's
successors only if they were pressed before it."""
from __future__ import annotations

import gradio as gr

from .session import Data, Session, cannot_run_live


def live_button(st: Session, data: Data | None, **kw) -> gr.Button:
    """The Run live button for the selection in ``st`` (built with ``kw``, or an event's update):
    greyed out where it cannot be decoded (:func:`~workbench.session.cannot_run_live`: no prompt
    in ``--data``, as for a replay's recorded turns, or a method that is not a preset), its label
    saying so; and while a run of the session waits or decodes ("Running…", so that a second press
    queues no second run to stand in for the first on screen), until Stop is pressed: a stopped
    run ends after its current cycle (one still waiting decodes nothing), and Run comes back at
    the press (a run gradio dropped from its queue, as when the page's connection broke, never
    ends, and would otherwise keep Run greyed out until the page reloads)."""
    can = cannot_run_live(st.request, st.method, data) is None
    running = _pending(st)
    return gr.Button("Running…" if running else "Run live" if can else "Run live (n/a)",
                     interactive=can and not running, **kw)


def stop_button(st: Session, **kw) -> gr.Button:
    """The Stop live run button (built with ``kw``, or an event's update): clickable while a run
    of this session was pressed, has not ended (waiting in the queue or decoding) and was not
    stopped already."""
    return gr.Button("Stop live run", interactive=_pending(st), **kw)


def _pending(st: Session) -> bool:
    """Whether a run pressed last has neither ended nor been stopped (runs end in press order)."""
    return st.live_pressed > max(st.live_done, st.stop_upto)


def press(st: Session) -> int:
    """Count Run pressed; the number the run it queues carries."""
    st.live_pressed += 1
    return st.live_pressed


def start(st: Session, number: float | None) -> int:
    """The number of a run that starts: its press's, or, for a run called without the button (the
    API's ``run_live``: no number, or one no press of this session handed out that has not
    ended, as a client's own), the next one, counted as pressed."""
    if isinstance(number, (int, float)) and st.live_done < number <= st.live_pressed and number == int(number):
        return int(number)
    st.live_pressed += 1        # (only here or in press: a pressed number is never written back)
    return st.live_pressed


def end(st: Session, ticket: int) -> None:
    """Run ``ticket`` ended, whatever it ended in (every run pressed before it has too)."""
    st.live_done = max(st.live_done, ticket)


def stop(st: Session) -> None:
    """Stop every run pressed so far: each ends after its current cycle (``ticket <= stop_upto``;
    one that has not begun decoding does not begin), and Run comes back now."""
    st.stop_upto = st.live_pressed
