"""Plotly in the notebooks with nothing fetched from a CDN.

    from workbench.offline import use_offline_plots
    use_offline_plots()          # once, in a notebook's setup cell

Why not plotly's own renderers: ``notebook_connected`` loads plotly.js from a CDN, and even
``notebook`` (which embeds plotly.js) writes ``<script src="https://cdnjs.cloudflare.com/...
mathjax...">`` into every figure it draws. :class:`OfflineRenderer` is ``notebook`` without
that: it embeds plotly.js in the setup cell (the one that calls :func:`use_offline_plots`) and draws each figure with the
embedded copy; no figure here uses LaTeX, so MathJax is not needed. The notebooks render with
``plotly_mimetype+workbench_offline``: JupyterLab (and Notebook 7, VS Code) draw the plotly
mimetype with the plotly.js their extension ships, anything else uses the HTML.
"""
from __future__ import annotations

import plotly.io as pio
from plotly.io.base_renderers import NotebookRenderer

NAME = "workbench_offline"
DEFAULT = f"plotly_mimetype+{NAME}"


class OfflineRenderer(NotebookRenderer):
    """plotly's ``notebook`` renderer, minus the MathJax CDN script. :meth:`embed` puts the
    whole plotly.js (~4.7 MB) in the current cell's output; plotly's own activation of the
    default renderer (on the first figure shown after it is set) adds no second copy."""

    def __init__(self):
        super().__init__(connected=False)
        self.activated = False

    def embed(self) -> None:
        super().activate()
        self.activated = True

    def activate(self):
        if not self.activated:
            self.embed()

    def to_mimebundle(self, fig_dict):
        html = pio.to_html(fig_dict, config=self.config, include_plotlyjs=False, include_mathjax=False,
                           full_html=False, default_width="100%", default_height=525, validate=False)
        return {"text/html": html}


def renderer() -> OfflineRenderer:
    """The registered offline renderer (registered on first use)."""
    r = pio.renderers[NAME] if NAME in pio.renderers else None
    if not isinstance(r, OfflineRenderer):
        r = OfflineRenderer()
        pio.renderers[NAME] = r
    return r


def use_offline_plots() -> None:
    """Make ``plotly_mimetype+workbench_offline`` the default renderer and, in IPython, embed
    plotly.js now (in the calling cell's output), so the first figure needs nothing more. Every
    call embeds it: a setup cell run again replaces its output, which must still hold the
    library (a saved or exported notebook draws its figures from it)."""
    r = renderer()
    pio.renderers.default = DEFAULT
    from IPython import get_ipython
    if get_ipython() is not None:   # outside IPython there is no page to embed plotly.js into
        r.embed()


def figure_bundle(fig) -> dict:
    """A figure's display bundle (plotly mimetype + offline HTML), for outputs that are not the
    current cell's, such as an ``ipywidgets.Output`` filled from a callback."""
    d = fig.to_dict()
    bundle = {"text/plain": f"<plotly figure: {fig.layout.title.text or ''}>"}
    bundle.update(renderer().to_mimebundle(d))
    bundle.update(pio.renderers["plotly_mimetype"].to_mimebundle(d))
    return bundle
