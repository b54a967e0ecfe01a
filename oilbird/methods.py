"""The named methods and the sources that feed each one's tree, as plain data.

No torch and no runtime here, so that the views (the workbench's menus and figures) can read
what a method is without loading the model stack; :mod:`oilbird.presets` builds the decoders
from it (its docstring has the table).
"""
from __future__ import annotations

PRESETS: dict[str, tuple[str, ...]] = {
    "pld": ("pld",),
    "suffix": ("suffix",),
    "recycling": ("recycling",),
    "goose": ("suffix", "pld", "recycling"),
    "oilbird": ("suffix", "pld", "recycling", "semantic", "rejected"),
    "oilbird-no-semantic": ("suffix", "pld", "recycling", "rejected"),
    "oilbird-no-suffix": ("pld", "recycling", "semantic", "rejected"),
    "oilbird-no-recycling": ("suffix", "pld", "semantic", "rejected"),
    "oilbird-no-rejected": ("suffix", "pld", "recycling", "semantic"),
    "oilbird-ungated": ("suffix", "pld", "recycling", "semantic-ungated", "rejected"),
    "pld+sem": ("pld", "semantic"),
    "recycling+sem": ("recycling", "semantic"),
}

# the one peer that drafts inside our verifier (oilbird.peers); it has no semantic key
PEER_TREE_METHODS = ("suffix-arctic",)


def has_semantic(method: str) -> bool:
    """Does ``method`` (a preset, optionally with ``:variants``) draft with the semantic key?"""
    return any(p.startswith("semantic") for p in PRESETS.get(method.split(":")[0], ()))


def semantic_gated(method: str) -> bool:
    """Does its semantic key look up only after a lexical match (every preset but ``-ungated``)?"""
    return "semantic-ungated" not in PRESETS.get(method.split(":")[0], ())
