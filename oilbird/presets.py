"""Named methods: which sources feed the tree, at one shared node budget.

``make_decoder(method, verifier, store)`` returns a ready :class:`SpeculativeDecoder`: the one
builder from a :class:`~oilbird.methods.Method` to a decoder (bench, replay, trace, the app; the
vLLM chains build their drafter's sources with :func:`make_sources`). Sources
that keep state across requests (the store, the adjacency table, the rejected pool) persist for
the life of the decoder, so serve one data set through one decoder per method.

| preset                 | spine           | semantic chains      | branches   |
|------------------------|-----------------|----------------------|------------|
| pld                    | prompt lookup   | -                    | -          |
| suffix                 | suffix          | -                    | -          |
| recycling              | -               | -                    | adjacency  |
| goose                  | suffix + pld    | -                    | adjacency  |
| oilbird                | suffix' + pld   | semantic + rejected  | adjacency  |
| oilbird-no-semantic    | suffix + pld    | rejected             | adjacency  |
| oilbird-no-suffix      | pld             | semantic + rejected  | adjacency  |
| oilbird-no-recycling   | suffix' + pld   | semantic + rejected  | -          |
| oilbird-no-rejected    | suffix' + pld   | semantic             | adjacency  |
| oilbird-ungated        | suffix' + pld   | semantic* + rejected | adjacency  |
| oilbird-plain-suffix   | suffix + pld    | semantic + rejected  | adjacency  |
| pld+sem                | prompt lookup   | semantic             | -          |
| recycling+sem          | -               | semantic             | adjacency  |

``semantic*``: the semantic key without its gate (``SemanticConfig(require_lexical=False)``): it
also fires where no lexical key matched, i.e. on root tokens the suffix index, prompt lookup and
the adjacency table have never seen, which is where the identifiability gap is.

``suffix'``: the suffix source weighing each pool occurrence of the context by how close its
stored state is to the query state (``SuffixConfig(state_temp=STATE_TEMP)``,
:mod:`oilbird.sources._states`): the state chooses among the lexical match's occurrences. It is
the hidden state's second use in ``oilbird`` (since issue 25: +1.7% tau on the whole recorded
agent set at 12 and 24 nodes, docs/results.md); ``oilbird-no-semantic`` uses no state at all,
``oilbird-plain-suffix`` drops only this use.

Every Oilbird preset fills its tree by expected acceptance unless its name asks for another
fill (:data:`oilbird.methods.PRESET_FILLS`); the others keep the paper's reserved fill.
"""
from __future__ import annotations

from dataclasses import replace

from .decoding import SpeculativeDecoder
from .drafter import Drafter
from .methods import PRESETS, Method, TreeConfig, parse_method  # noqa: F401  (PRESETS importable here)
from .sources.base import DraftSource
from .sources.live import LiveOutputs, LiveOutputsSource
from .sources.prompt_lookup import PromptLookupSource
from .sources.recycling import RecyclingSource
from .sources.rejected import RejectedPoolSource
from .sources.semantic import SemanticConfig, SemanticSource
from .sources.suffix import SuffixConfig, SuffixSource
from .store import Store
from .store_snapshot import key_mismatch
from .verifier import Verifier

SOURCE_NAMES = ("pld", "suffix", "suffix-state", "recycling", "semantic", "semantic-ungated", "rejected", "live")
# suffix': how fast an occurrence's evidence fades with its state's distance from the best one
# (docs/results.md, "Turning the key's reach into accepted tokens", for how it was chosen)
STATE_TEMP = 0.05


def make_sources(names, store: Store, dim: int, vocab_size: int, shared: dict | None = None) -> list[DraftSource]:
    """The draft sources named ``names`` (see :data:`SOURCE_NAMES`), in that order, over
    ``store``; ``shared`` maps a name to an instance to reuse instead (an engine's requests share
    one adjacency table), and ``"live-outputs"`` to the :class:`~oilbird.sources.live.LiveOutputs`
    registry an engine's running requests share (``"live"`` without one drafts from nothing: a
    request alone has no other running request to copy from)."""
    shared = shared or {}
    make = {
        "pld": lambda: PromptLookupSource(),
        "suffix": lambda: SuffixSource(store),
        "suffix-state": lambda: SuffixSource(store, SuffixConfig(state_temp=STATE_TEMP)),
        "recycling": lambda: RecyclingSource(vocab_size),
        "semantic": lambda: SemanticSource(store),
        "semantic-ungated": lambda: SemanticSource(store, SemanticConfig(require_lexical=False)),
        "rejected": lambda: RejectedPoolSource(dim),
        "live": lambda: LiveOutputsSource(shared.get("live-outputs") or LiveOutputs()),
    }
    bad = [n for n in names if n not in make]
    if bad:
        raise ValueError(f"unknown draft source {bad[0]!r}; choose from {', '.join(SOURCE_NAMES)}")
    return [shared.get(n) or make[n]() for n in names]


def check_store_fits(store: Store, dim: int, vocab_size: int, state_key: dict | None = None) -> None:
    """Raise ValueError (one line) unless ``store`` can serve a model with hidden size
    ``dim``, ``vocab_size`` token ids and (when both the store and the model are labelled)
    the same :attr:`~oilbird.model.LoadedModel.state_key`: a store belongs to the model that
    wrote it."""
    why = key_mismatch(store.state_key, state_key)
    if why:
        raise ValueError(why)
    if store.dim != int(dim):
        raise ValueError(f"the store holds {store.dim}-dimensional states and the model's hidden size is "
                         f"{int(dim)}: a store serves the model that wrote it")
    toks = store.suffix.live_tokens()
    top = int(toks.max()) if len(toks) else -1
    if top >= int(vocab_size):
        raise ValueError(f"the store holds token id {top}, beyond the model's vocabulary of {int(vocab_size)}: "
                         f"a store serves the model that wrote it")


def make_decoder(method: str | Method, verifier: Verifier, store: Store | None = None,
                 tree: TreeConfig | None = None, trace: bool = True, tenant: str = "default",
                 store_kwargs: dict | None = None) -> SpeculativeDecoder:
    """The one builder: a method, by name (``"oilbird"``, ``"oilbird:expected"``) or as a parsed
    :class:`~oilbird.methods.Method`, to its :class:`SpeculativeDecoder`; its tree is
    ``method.tree(tree)``, resolved here once.

    Every method that drafts inside our verifier is built here: the presets, ``suffix-arctic``
    (the published SuffixDecoding as a source; needs ``requirements-peers.txt``) and ``ar`` (the
    same cycle with a root-only tree: one token per forward, as replay uses it; the bench times
    the plain loop :func:`oilbird.decoding.autoregressive` instead). A fresh store for ``tenant`` is
    made if none is given, with ``store_kwargs`` (e.g. ``max_records``, ``state_dtype``; see
    :class:`~oilbird.store.Store`).
    """
    m = parse_method(method) if isinstance(method, str) else method
    if m.base == "ar":
        drafter, store = Drafter([], TreeConfig(budget=1, semantic_budget=0)), None
    elif m.base == "suffix-arctic":
        from .sources.arctic import ArcticConfig, ArcticSuffixSource
        cfg = replace(m.tree(tree), semantic_budget=0)
        src = ArcticSuffixSource(ArcticConfig(max_spec_tokens=max(1, cfg.budget - 1)))   # budget 1: AR
        drafter, store = Drafter([src], cfg), None
    elif m.kind == "tree":
        lm = verifier.lm
        dim = int(lm.model.config.hidden_size)
        if store is None:
            store = Store(dim=dim, tenant=tenant, **{"state_key": lm.state_key, **(store_kwargs or {})})
        else:
            check_store_fits(store, dim, int(lm.model.config.vocab_size), lm.state_key)
        sources = make_sources(m.sources, store, dim, int(lm.model.config.vocab_size))
        drafter = Drafter(sources, m.tree(tree))
    else:
        raise ValueError(f"'{m.name}' decodes inside transformers' generate, not in our cycle; choose ar, "
                         f"suffix-arctic or a preset ({', '.join(PRESETS)})")
    return SpeculativeDecoder(verifier, drafter, store=store, method=m.name, trace=trace)
