"""The workbench's panels, one module per panel, each a pure function of trace records.

Import them through :mod:`workbench.figures` (the facade the app and the notebooks use); the
modules here are:

* :mod:`.base`: plotly plumbing shared by every panel (layout, legend entries, grids, the
  spec -> Figure step) and :func:`~.base.visible` (whitespace made visible);
* :mod:`.provenance`: what the trace says each cycle committed and who delivered each token;
* :mod:`.tree`, :mod:`.text`, :mod:`.neighbours`, :mod:`.gap`, :mod:`.metrics`,
  :mod:`.compare`, :mod:`.funnel` (where the semantic key's reach is lost, over many
  requests): one panel each. The text, neighbours and gap panels are drawn twice, as a
  plotly figure (notebooks, exports) and as HTML (the app); both renderers format one row list
  built once per panel (``text_cells``, ``neighbour_table``, ``gap_cells``);
* :mod:`.cycle`: the cycle counter, the opening cycle, and every panel of one cycle at once.

Nothing here reads the model, the store or the sources, and nothing global is written.
"""
