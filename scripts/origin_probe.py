"""Probe: would the fill choose better if it knew which neighbours come from the same task?

    python scripts/origin_probe.py replay --data agent-transcripts --cache runs/tcache100 \\
        --methods oilbird,oilbird-kin --out runs/origin-probe --force

The semantic key's neighbours come from any earlier request. A serving layer often knows more
than the tokens: which workflow, user or task a request belongs to. This probe asks what that
label is worth to the fill, as an upper bound: it adds, for one run, a preset ``oilbird-kin``,
``oilbird`` with its semantic source split in two by the label of the neighbour's request, so
that the ``expected`` fill learns separate acceptance rates (and prices the nodes separately)
for neighbours of the same label (source ``semantic-kin``) and of another (``semantic``). The
lookup, the kept neighbours, their chains and everything else are ``oilbird``'s.

The label is the first group of ``--label`` (a regular expression, default ``task(\\d+)``) in a
request id; a request whose id does not match has no label and no kin. On the recorded airline
set (``tau-airline-task<N>-trial<K>#<turn>``) it is the tau-bench task: each task is recorded in
four trials (conversations 1-25, 26-50, ... in file order), so from conversation 26 on a request
has kin in the store. Fast replay only; nothing of the library changes. Results: docs/results.md
("What a neighbour's origin is worth").
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


class SplitSemantic(SemanticSource):
    """``oilbird``'s semantic source, keeping the chains of neighbours from another label; those
    of the request's own label wait in :attr:`kin` for :class:`KinSemantic` to propose."""

    def __init__(self, store):
        super().__init__(store)
        self.kin: list = []

    def propose(self, ctx, budget):
        p = super().propose(ctx, budget)
        mine = label(ctx.request_id)
        same = [mine is not None and label(c.meta.get("request_id")) == mine for c in p.chains]
        self.kin = [c for c, s in zip(p.chains, same) if s]
        return replace(p, chains=[c for c, s in zip(p.chains, same) if not s])


class KinSemantic(DraftSource):
    """The same lookup's neighbours from the request's own label, under their own name."""
    name = "semantic-kin"
    role = "chains"
    retrieves = True

    def __init__(self, split: SplitSemantic):
        self.split = split

    def propose(self, ctx, budget):
        return Proposal(list(self.split.kin), retrieval="retrieved" if self.split.kin else "below-floor",
                        floor=self.split.cfg.entry_floor, muted=self.split.muted)


def _install() -> None:
    sources = M.PRESETS["oilbird"]
    at = sources.index("semantic") + 1
    M.PRESETS["oilbird-kin"] = sources[:at] + ("semantic-kin",) + sources[at:]
    M.PRESET_FILLS["oilbird-kin"] = "expected"
    make_sources = PR.make_sources

    def _make_sources(names, store, *a, **k):
        if "semantic-kin" not in names:
            return make_sources(names, store, *a, **k)
        rest = make_sources([n for n in names if n not in ("semantic", "semantic-kin")], store, *a, **k)
        split = SplitSemantic(store)
        mine = {"semantic": split, "semantic-kin": KinSemantic(split)}
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
    if "--label" in argv[:-1]:
        i = argv.index("--label")
        try:
            LABEL = re.compile(argv[i + 1])
        except re.error as e:
            print(f"--label: not a regular expression ({e})", file=sys.stderr)
            return 2
        del argv[i:i + 2]
    _install()
    return oilbird_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
