"""Named methods: which sources feed the tree, at one shared node budget.

``make_decoder(method, verifier, store)`` returns a ready :class:`SpeculativeDecoder`. Sources
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
| oilbird-state          | suffix' + pld   | semantic + rejected  | adjacency  |
| oilbird-agree          | suffix + pld    | semantic+ + rejected | adjacency  |
| oilbird-state-agree    | suffix' + pld   | semantic+ + rejected | adjacency  |
| pld+sem                | prompt lookup   | semantic             | -          |
| recycling+sem          | -               | semantic             | adjacency  |

``semantic*``: the semantic key without its gate (``SemanticConfig(require_lexical=False)``): it
also fires where no lexical key matched, i.e. on root tokens the suffix index, prompt lookup and
the adjacency table have never seen, which is where the identifiability gap is.

``semantic+``: the semantic key claiming ``AGREE_CLAIM`` nodes beyond its reserve, out of the
adjacency branches' share, when two of its neighbours agree on their first tokens
(``SemanticConfig(agree_claim=...)``).

``suffix'``: the suffix source weighing each pool occurrence of the context by how close its
stored state is to the query state (``SuffixConfig(state_temp=STATE_TEMP)``,
:mod:`oilbird.sources._states`): the state chooses among the lexical match's occurrences.
"""
from __future__ import annotations

from .decoding import SpeculativeDecoder
from .drafter import Drafter
from .methods import PRESETS, Method, TreeConfig, parse_method  # noqa: F401  (PRESETS importable here)
from .sources.prompt_lookup import PromptLookupSource
from .sources.recycling import RecyclingSource
from .sources.rejected import RejectedPoolSource
from .sources.semantic import SemanticConfig, SemanticSource
from .sources.suffix import SuffixConfig, SuffixSource
from .store import Store
from .verifier import Verifier

# suffix': how fast an occurrence's evidence fades with its state's distance from the best one
# (docs/results.md, "State-ranked occurrences", for how it was chosen)
STATE_TEMP = 0.05
# semantic+: nodes the semantic key may claim beyond the reserve when two neighbours agree
AGREE_CLAIM = 4


def make_decoder(method: str | Method, verifier: Verifier, store: Store | None = None,
                 tree: TreeConfig | None = None, trace: bool = True, tenant: str = "default",
                 store_kwargs: dict | None = None) -> SpeculativeDecoder:
    """Build the decoder of a preset, by name (``"oilbird"``, ``"oilbird:expected"``) or as a
    parsed :class:`~oilbird.methods.Method`; its tree is ``method.tree(tree)``.

    A fresh store for ``tenant`` is made if none is given, with ``store_kwargs`` (e.g.
    ``max_records``, ``state_dtype``; see :class:`~oilbird.store.Store`).
    """
    m = parse_method(method) if isinstance(method, str) else method
    if m.kind != "tree":
        raise ValueError(f"'{m.name}' is not a preset; choose from {', '.join(PRESETS)}")
    lm = verifier.lm
    dim = int(lm.model.config.hidden_size)
    if store is None:
        store = Store(dim=dim, tenant=tenant, **(store_kwargs or {}))
    make = {
        "pld": lambda: PromptLookupSource(),
        "suffix": lambda: SuffixSource(store),
        "suffix-state": lambda: SuffixSource(store, SuffixConfig(state_temp=STATE_TEMP)),
        "recycling": lambda: RecyclingSource(int(lm.model.config.vocab_size)),
        "semantic": lambda: SemanticSource(store),
        "semantic-ungated": lambda: SemanticSource(store, SemanticConfig(require_lexical=False)),
        "semantic-agree": lambda: SemanticSource(store, SemanticConfig(agree_claim=AGREE_CLAIM)),
        "rejected": lambda: RejectedPoolSource(dim),
    }
    sources = [make[p]() for p in m.sources]
    return SpeculativeDecoder(verifier, Drafter(sources, m.tree(tree)), store=store, method=m.name, trace=trace)
