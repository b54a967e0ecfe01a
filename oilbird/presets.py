"""Named methods: which sources feed the tree, at one shared node budget.

``make_decoder(name, verifier, store)`` returns a ready :class:`SpeculativeDecoder`. Sources
that keep state across requests (the store, the adjacency table, the rejected pool) persist for
the life of the decoder, so serve one data set through one decoder per method.

| preset                 | spine           | semantic chains      | branches   |
|------------------------|-----------------|----------------------|------------|
| pld                    | prompt lookup   | -                    | -          |
| suffix                 | suffix          | -                    | -          |
| recycling              | -               | -                    | adjacency  |
| goose                  | suffix + pld    | -                    | adjacency  |
| oilbird                | suffix + pld    | semantic + rejected  | adjacency  |
| oilbird-no-semantic    | suffix + pld    | rejected             | adjacency  |
| oilbird-no-suffix      | pld             | semantic + rejected  | adjacency  |
| oilbird-no-recycling   | suffix + pld    | semantic + rejected  | -          |
| oilbird-no-rejected    | suffix + pld    | semantic             | adjacency  |
| oilbird-ungated        | suffix + pld    | semantic* + rejected | adjacency  |
| pld+sem                | prompt lookup   | semantic             | -          |
| recycling+sem          | -               | semantic             | adjacency  |

``semantic*``: the semantic key without its gate (``SemanticConfig(require_lexical=False)``): it
also fires where no lexical key matched, i.e. on root tokens the suffix index, prompt lookup and
the adjacency table have never seen, which is where the identifiability gap is.
"""
from __future__ import annotations

from dataclasses import replace

from .decoding import SpeculativeDecoder
from .drafter import FILLS, Drafter, TreeConfig
from .methods import PRESETS  # noqa: F401  (the names live in oilbird.methods; importable here)
from .sources.prompt_lookup import PromptLookupSource
from .sources.recycling import RecyclingSource
from .sources.rejected import RejectedPoolSource
from .sources.semantic import SemanticConfig, SemanticSource
from .sources.suffix import SuffixSource
from .store import Store
from .verifier import Verifier

# tree variants a method name may carry after colons, e.g. "oilbird:expected:cost-aware": the
# TreeConfig fields each one sets (so one bench run can compare them on the same requests)
TREE_VARIANTS = {"fixed": ("cost_aware", False), "cost-aware": ("cost_aware", True),
                 **{f: ("fill", f) for f in FILLS}}


def tree_variants(name: str) -> tuple[str, dict]:
    """``"oilbird:expected:cost-aware"`` -> ("oilbird", {"fill": "expected", "cost_aware": True}):
    the base name and the :class:`TreeConfig` fields its variants set. A bad variant raises
    ValueError."""
    base, *variants = name.split(":")
    bad = [v for v in variants if v not in TREE_VARIANTS]
    if bad:
        raise ValueError(f"'{name}': tree variant '{bad[0]}' is not one of {', '.join(TREE_VARIANTS)}")
    return base, dict(TREE_VARIANTS[v] for v in variants)


def parse_preset(name: str) -> tuple[str, dict]:
    """:func:`tree_variants` of a preset's name; an unknown preset raises ValueError."""
    base, overrides = tree_variants(name)
    if base not in PRESETS:
        raise ValueError(f"unknown method '{name}'; choose from {', '.join(PRESETS)} (a tree variant may "
                         f"follow a colon, e.g. oilbird:expected)")
    return base, overrides


def make_decoder(name: str, verifier: Verifier, store: Store | None = None,
                 tree: TreeConfig | None = None, trace: bool = True, tenant: str = "default",
                 store_kwargs: dict | None = None) -> SpeculativeDecoder:
    """Build the decoder for preset ``name``, optionally with tree variants after colons
    (``"oilbird:expected"``: :data:`TREE_VARIANTS`), which override ``tree``'s fields.

    A fresh store for ``tenant`` is made if none is given, with ``store_kwargs`` (e.g.
    ``max_records``, ``state_dtype``; see :class:`~oilbird.store.Store`).
    """
    base, overrides = parse_preset(name)
    parts = PRESETS[base]
    lm = verifier.lm
    dim = int(lm.model.config.hidden_size)
    if store is None:
        store = Store(dim=dim, tenant=tenant, **(store_kwargs or {}))
    sources = []
    for p in parts:
        if p == "pld":
            sources.append(PromptLookupSource())
        elif p == "suffix":
            sources.append(SuffixSource(store))
        elif p == "recycling":
            sources.append(RecyclingSource(int(lm.model.config.vocab_size)))
        elif p == "semantic":
            sources.append(SemanticSource(store))
        elif p == "semantic-ungated":
            sources.append(SemanticSource(store, SemanticConfig(require_lexical=False)))
        elif p == "rejected":
            sources.append(RejectedPoolSource(dim))
    cfg = replace(tree or TreeConfig(), **overrides)
    if not any(p in ("semantic", "semantic-ungated", "rejected") for p in parts):
        cfg = replace(cfg, semantic_budget=0)
    return SpeculativeDecoder(verifier, Drafter(sources, cfg), store=store, method=name, trace=trace)
