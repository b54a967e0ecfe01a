"""Probe: would the fill choose better if it knew where each neighbour comes from?

    python scripts/origin_probe.py replay --data agent-transcripts --cache runs/tcache100 \\
        --methods oilbird,oilbird-kin --out runs/origin-probe --force

The semantic key's neighbours come from any stored request: earlier turns of the same
conversation (and the running turn itself), or other conversations. A serving layer often knows
more than the tokens: which workflow, user or task a request belongs to. This probe asks what that
label is worth to the fill, as an upper bound: it adds, for one run, a preset ``oilbird-kin``,
``oilbird`` with its semantic source split in three by where the neighbour's request comes from,
so that the ``expected`` fill learns separate acceptance rates (and prices the nodes separately):
``semantic-self`` (the same conversation: the request id before its ``#``), ``semantic-kin``
(another conversation with the same label) and ``semantic`` (the rest). The lookup, the kept
neighbours, their chains and everything else are ``oilbird``'s; one side effect of the split is
that a node two of the three propose is priced in the cell of nodes several sources propose
("multi+semantic"), where ``oilbird`` prices it as the key's alone.

The label is the first group of ``--label`` (a regular expression with a group, default
``task(\\d+)``) in a request id; a request whose id does not match has no label and no kin. On the
recorded airline set (``tau-airline-task<N>-trial<K>#<turn>``) it is the tau-bench task: each task
is recorded in four trials (conversations 1-25, 26-50, ... in file order), so from conversation 26
on a request has kin in the store. Fast replay only; nothing of the library changes. Results:
docs/results.md ("What a neighbour's origin is worth").
"""
from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oilbird import methods as M, presets as PR  # noqa: E402
from oilbird.sources.base import DraftSource, Proposal  # noqa: E402
from oilbird.sources.semantic import SemanticSource  # noqa: E402

LABEL = re.compile(r"task(\d+)")


def label(request_id) -> str | None:
    """The request's label: the first group of :data:`LABEL` in its id, else None."""
    m = LABEL.search(str(request_id or ""))
    return m.group(1) if m else None


def conversation(request_id) -> str:
    """The conversation a request belongs to: its id before the turn's ``#``."""
    return str(request_id or "").rsplit("#", 1)[0]


def origin(request_id, neighbour_id) -> str:
    """Where a neighbour comes from, seen from ``request_id``: "self" (the same conversation),
    "kin" (another conversation of the same label) or "" (the rest)."""
    if conversation(neighbour_id) == conversation(request_id):
        return "self"
    mine = label(request_id)
    return "kin" if mine is not None and label(neighbour_id) == mine else ""


class SplitSemantic(SemanticSource):
    """``oilbird``'s semantic source, keeping the chains of neighbours from other conversations of
    another label; the others wait in :attr:`held` for their :class:`OriginSemantic` to propose."""

    def __init__(self, store):
        super().__init__(store)
        self.held: dict[str, list] = {"self": [], "kin": []}

    def propose(self, ctx, budget):
        p = super().propose(ctx, budget)
        where = [origin(ctx.request_id, c.meta.get("request_id")) for c in p.chains]
        self.held = {o: [c for c, w in zip(p.chains, where) if w == o] for o in ("self", "kin")}
        return replace(p, chains=[c for c, w in zip(p.chains, where) if not w])


class OriginSemantic(DraftSource):
    """The same lookup's neighbours of one origin ("self" or "kin"), under their own name."""
    role = "chains"
    retrieves = True

    def __init__(self, split: SplitSemantic, which: str):
        self.split, self.which, self.name = split, which, f"semantic-{which}"

    def propose(self, ctx, budget):
        chains = list(self.split.held[self.which])
        return Proposal(chains, retrieval="retrieved" if chains else "below-floor",
                        floor=self.split.cfg.entry_floor, muted=self.split.muted)


OWN = ("semantic", "semantic-self", "semantic-kin")


def _install() -> None:
    sources = M.PRESETS["oilbird"]
    at = sources.index("semantic") + 1
    M.PRESETS["oilbird-kin"] = sources[:at] + OWN[1:] + sources[at:]
    M.PRESET_FILLS["oilbird-kin"] = "expected"
    make_sources = PR.make_sources

    def _make_sources(names, store, *a, **k):
        if "semantic-kin" not in names:
            return make_sources(names, store, *a, **k)
        rest = make_sources([n for n in names if n not in OWN], store, *a, **k)
        split = SplitSemantic(store)
        mine = {"semantic": split, "semantic-self": OriginSemantic(split, "self"),
                "semantic-kin": OriginSemantic(split, "kin")}
        out, it = [], iter(rest)
        for n in names:
            out.append(mine[n] if n in mine else next(it))
        return out

    PR.make_sources = _make_sources


def main(argv: list[str]) -> int:
    global LABEL
    from oilbird.__main__ import main as oilbird_main
    if not argv or argv[0] != "replay" or "--exact" in argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        print("(a fast replay: python scripts/origin_probe.py replay ... --methods oilbird,oilbird-kin "
              "[--label REGEX])", file=sys.stderr)
        return 2
    argv = list(argv)
    for i, a in enumerate(argv):
        if a == "--label" or a.startswith("--label="):
            text = a.split("=", 1)[1] if "=" in a else (argv[i + 1] if i + 1 < len(argv) else "")
            del argv[i:i + (1 if "=" in a else 2)]
            try:
                pattern = re.compile(text)
            except re.error as e:
                print(f"--label: not a regular expression ({e})", file=sys.stderr)
                return 2
            if pattern.groups < 1:
                print(f"--label {text!r}: the expression needs a group, the label (e.g. 'task(\\d+)')",
                      file=sys.stderr)
                return 2
            LABEL = pattern
            break
    _install()
    return oilbird_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
