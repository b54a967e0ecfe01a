"""The one method registry: every method name a command, a view or a test may ask for, as data.

No torch and no runtime here, so that the views (the workbench's menus and figures) can read
what a method is without loading the model stack. :mod:`oilbird.presets` builds decoders from
a :class:`Method`; :mod:`oilbird.evaluation.bench` runs them.

A method name is a base name with an optional fill after a colon: ``oilbird``,
``oilbird:expected``. Every caller goes through :func:`parse_method` (one name) or
:func:`parse_methods` (a comma-separated list, each name once), and a method's tree is resolved
in one place, :meth:`Method.tree`.

| kind     | names                                                      | drafts a tree |
|----------|------------------------------------------------------------|---------------|
| baseline | ``ar`` (our greedy loop), ``hf-greedy`` (``generate``)     | no            |
| peer     | ``hf-pld`` (transformers' prompt lookup, ``generate``)     | no            |
| peer     | ``suffix-arctic`` (arctic-inference's SuffixDecoding)      | yes           |
| tree     | the presets below                                          | yes           |
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from .errors import repeated

# --------------------------------------------------------------------------- the tree
# how the nodes the lexical subtree leaves are shared (TreeConfig.fill): "reserved" is the paper's
# and the hosts' rule, the Oilbird presets use "expected" (PRESET_FILLS; docs/results.md, "Fill")
FILLS = ("reserved", "expected", "open")


@dataclass(frozen=True)
class TreeConfig:
    """One cycle's draft tree: its node budget and how the passes share it (oilbird.drafter).

    Defaults are the CPU ones; the paper's GPU tree is 60 nodes with 16 semantic. Why these
    numbers: docs/results.md ("CPU tree budget", "Best-first suffix tree").
    """
    budget: int = 12               # nodes per tree, root included
    semantic_budget: int = 2       # nodes reserved for semantic / rejected-pool chains
    spine_share: float = 0.6       # initial share of the remaining budget for lexical chains
    spine_alpha: float = 0.3       # EMA weight of the newest spine acceptance
    min_spine_share: float = 0.3
    max_spine_share: float = 0.9
    max_spine_len: int = 20
    # "reserved" (the paper): semantic chains out of semantic_budget, then adjacency branches by
    # score; "expected": they and the lexical chains' cut-off tails compete node by node by
    # estimated P(accepted), nothing reserved (the Oilbird presets' own: PRESET_FILLS); "open":
    # the same, the lexical sources proposing for the whole budget, so that the alternatives the
    # lexical share leaves out compete too (docs/results.md, "The strongest tree without the key")
    fill: str = "reserved"

    def __post_init__(self):
        if self.budget < 1:
            raise ValueError(f"budget must be >= 1 (the root), not {self.budget}")
        if not 0 <= self.semantic_budget < self.budget:
            raise ValueError(f"semantic_budget must be 0 to budget - 1 = {self.budget - 1} (the root is "
                             f"not drafted), not {self.semantic_budget}")
        if self.fill not in FILLS:
            raise ValueError(f"fill must be one of {', '.join(FILLS)}, not {self.fill!r}")

    @property
    def valued(self) -> bool:
        """Do the nodes after the lexical head compete by learned acceptance (``expected``, ``open``)?"""
        return self.fill != "reserved"

    @classmethod
    def sized(cls, budget: int | None = None, semantic_budget: int | None = None) -> "TreeConfig":
        """The tree of ``--budget`` / ``--semantic-budget`` (defaults where None). A budget too
        small for the default reserve shrinks the reserve to what fits below the root.

        >>> TreeConfig.sized(2).semantic_budget
        1
        """
        if semantic_budget is None and budget is not None:
            semantic_budget = min(cls.semantic_budget, max(0, budget - 1))
        given = {"budget": budget, "semantic_budget": semantic_budget}
        return cls(**{k: v for k, v in given.items() if v is not None})


# --------------------------------------------------------------------------- the methods
# preset -> the draft sources that feed its tree (oilbird.presets builds them; its docstring
# has the table by tree pass)
PRESETS: dict[str, tuple[str, ...]] = {
    "pld": ("pld",),
    "suffix": ("suffix",),
    "recycling": ("recycling",),
    "goose": ("suffix", "pld", "recycling"),
    "oilbird": ("suffix-state", "pld", "recycling", "semantic", "rejected"),
    "oilbird-no-semantic": ("suffix", "pld", "recycling", "rejected"),
    "oilbird-no-suffix": ("pld", "recycling", "semantic", "rejected"),
    "oilbird-no-recycling": ("suffix-state", "pld", "semantic", "rejected"),
    "oilbird-no-rejected": ("suffix-state", "pld", "recycling", "semantic"),
    "oilbird-ungated": ("suffix-state", "pld", "recycling", "semantic-ungated", "rejected"),
    "oilbird-plain-suffix": ("suffix", "pld", "recycling", "semantic", "rejected"),
    "pld+sem": ("pld", "semantic"),
    "recycling+sem": ("recycling", "semantic"),
}
# the fill a preset's tree uses when its name asks for none (``oilbird:reserved`` asks for the
# paper's): the Oilbird family and its ablations share "expected"; the hosts keep their own rule
# (docs/results.md, "Fill (the default, and why)")
PRESET_FILLS = {name: "expected" for name in PRESETS if name.startswith("oilbird")}
BASELINES = ("ar", "hf-greedy")
PEERS: dict[str, tuple[str, ...]] = {"hf-pld": (), "suffix-arctic": ("arctic",)}
# the one peer that drafts inside our verifier (oilbird.evaluation.peers); it has no semantic key
PEER_TREE_METHODS = tuple(p for p, s in PEERS.items() if s)
# sources that pay from the semantic pass ("chains"): without one, a tree reserves nothing
CHAIN_SOURCES = ("semantic", "semantic-ungated", "rejected")


def known_methods() -> list[str]:
    return list(BASELINES) + list(PRESETS) + list(PEERS)


@dataclass(frozen=True)
class Method:
    """One method as asked for: ``name`` is what results and traces are keyed by."""
    name: str                       # as given, e.g. "oilbird:expected"
    base: str                       # "oilbird"
    kind: str                       # "baseline" | "peer" | "tree"
    sources: tuple[str, ...] = ()   # the draft sources of its tree; () for methods without one
    fill: str | None = None         # the fill asked for after the colon, else the preset's own
                                    # (PRESET_FILLS); None: the run's default

    @property
    def drafts_tree(self) -> bool:
        """Does it verify a draft tree (and so have cycles to trace, and take a fill)?"""
        return bool(self.sources)

    @property
    def has_semantic(self) -> bool:
        return any(s.startswith("semantic") for s in self.sources)

    @property
    def semantic_gated(self) -> bool:
        """Does its semantic key look up only after a lexical match (every preset but ``-ungated``)?"""
        return "semantic-ungated" not in self.sources

    def tree(self, base: TreeConfig | None = None) -> TreeConfig:
        """This method's tree: the run's ``base`` with the fill the name asks for, and no
        reserve where no source pays from it."""
        cfg = base or TreeConfig()
        if self.fill is not None:
            cfg = replace(cfg, fill=self.fill)
        if not any(s in CHAIN_SOURCES for s in self.sources):
            cfg = replace(cfg, semantic_budget=0)
        return cfg


def parse_method(name: str) -> Method:
    """``"oilbird:expected"`` -> ``Method("oilbird:expected", "oilbird", "tree", (...), "expected")``.

    Raises ValueError naming the choices for an unknown base, an unknown fill, or a fill on a
    method without a tree.

    >>> parse_method("goose:expected").fill
    'expected'
    >>> parse_method("ar").kind
    'baseline'
    """
    base, *variants = name.strip().split(":")
    if base in PRESETS:
        m = Method(name.strip(), base, "tree", PRESETS[base], PRESET_FILLS.get(base))
    elif base in PEERS:
        m = Method(name.strip(), base, "peer", PEERS[base])
    elif base in BASELINES:
        m = Method(name.strip(), base, "baseline")
    else:
        raise ValueError(f"unknown method '{name}'; choose from {', '.join(known_methods())} (a tree "
                         f"method may add a fill after a colon, e.g. oilbird:reserved)")
    if not variants:
        return m
    if not m.drafts_tree:
        raise ValueError(f"'{name}': only tree methods take a fill after the colon")
    if len(variants) > 1 or variants[0] not in FILLS:
        raise ValueError(f"'{name}': after the colon comes one fill, one of {', '.join(FILLS)}")
    return replace(m, fill=variants[0])


def parse_methods(text: str, traced: bool = False) -> list[Method]:
    """``"ar,goose, oilbird:expected"`` -> the methods, checked before any model loads: each
    known, each named once (two passes through one decoder would pool a warmed store into one
    row), and with ``traced`` each one drafting a tree (the only ones with cycles to trace)."""
    names = [m.strip() for m in text.split(",") if m.strip()]
    if not names:
        raise ValueError(f"no method given; choose from {', '.join(known_methods())}")
    methods = as_methods(names)
    for m in methods:
        if traced and not m.drafts_tree:
            tree_names = [*PRESETS, *PEER_TREE_METHODS]
            raise ValueError(f"'{m.name}' drafts no tree, so it has no cycles to trace; trace one of "
                             f"{', '.join(tree_names)}")
    return methods


def as_methods(methods, default_fill: str = TreeConfig.fill) -> list[Method]:
    """Names or parsed methods -> methods, each named once: a run serves them side by side,
    one decoder each (two passes through one decoder would pool a warmed store into one row).
    Two names of one method (``oilbird`` and ``oilbird:expected``, its preset's fill; ``goose``
    and ``goose:reserved`` where the run's tree fills by ``default_fill``) are one method named twice."""
    out = [parse_method(m) if isinstance(m, str) else m for m in methods]
    twice = repeated([m.name for m in out])
    if twice:
        raise ValueError(f"method '{twice}' is named twice; name each method once")
    seen: dict[tuple, str] = {}
    for m in out:
        same = seen.setdefault((m.base, m.sources, m.fill or default_fill if m.drafts_tree else None), m.name)
        if same != m.name:
            raise ValueError(f"'{m.name}' is '{same}' again (the same sources and fill); name each method once")
    return out


@functools.lru_cache(maxsize=256)
def lookup(method: str) -> Method | None:
    """:func:`parse_method`, or None for a name this registry does not know (a trace from
    elsewhere); parsed once per name, since views ask it once per trace."""
    try:
        return parse_method(method)
    except ValueError:
        return None


def has_semantic(method: str) -> bool:
    """Does ``method`` (a name, optionally with a fill) draft with the semantic key? False for
    a name this registry does not know."""
    m = lookup(method)
    return m is not None and m.has_semantic


def semantic_gated(method: str) -> bool:
    """Does its semantic key look up only after a lexical match (every preset but ``-ungated``)?"""
    m = lookup(method)
    return m is None or m.semantic_gated
