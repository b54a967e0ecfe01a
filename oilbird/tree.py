"""The draft tree as plain data, and the one function that turns it into attention inputs.

A tree is two parallel lists: ``tokens[i]`` and ``parents[i]`` (``parents[0] == -1``; every
other parent index is smaller than the node's own index, so the list is in topological order).
Node 0, the root, is the newest committed token: it is not in the KV cache yet, so the verify
forward computes it together with the drafts hanging below it.

Everything else (mask, position ids, depths, the greedy walk) is derived from ``parents`` by
the pure functions below. Provenance (which source proposed a node, and with what score) is
carried by :class:`DraftTree` next to the two lists.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:      # torch is imported where the mask is built: the plain data needs none (the views)
    import torch


def root_path(parents, node: int) -> list[int]:
    """The nodes from the root down to ``node``, both included.

    >>> root_path([-1, 0, 1, 0, 3], 4)
    [0, 3, 4]
    """
    path = [node]
    while parents[path[-1]] >= 0:
        path.append(int(parents[path[-1]]))
    return path[::-1]


def depths_of(parents: list[int]) -> list[int]:
    """Depth of every node (root = 0). ``parents`` must be topologically ordered."""
    depths = [0] * len(parents)
    for i, p in enumerate(parents):
        if i == 0:
            if p != -1:
                raise ValueError(f"node 0 is the root: its parent must be -1, not {p}")
            continue
        if not 0 <= p < i:
            raise ValueError(f"node {i} has parent {p}; every parent must be an earlier node "
                             f"(parents precede their children)")
        depths[i] = depths[p] + 1
    return depths


def tree_attention(parents: list[int], prefix_len: int, device: torch.device | str = "cpu",
                   window: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention mask and position ids for verifying a tree on top of a KV cache.

    Every node sees the whole cached prefix and its own ancestors (itself included), nothing
    else; its position id is ``prefix_len + depth``, so each root-to-leaf path is numbered
    exactly as if it had been decoded as a plain chain.

    Args:
        parents: parent index per node, ``parents[0] == -1``.
        prefix_len: number of tokens already in the KV cache.
        window: for a sliding-window layer (Gemma 3's local layers, Mistral's): each node sees
            only keys fewer than ``window`` positions before its own, as in plain decoding, and
            the mask covers the keys such a layer's cache hands the forward: the last
            ``window - 1`` cached positions (all of them, when fewer), then the n nodes.

    Returns:
        mask: bool ``[1, 1, n, prefix_len + n]`` (with ``window``: ``[1, 1, n, min(prefix_len,
        window - 1) + n]``), True where attention is allowed.
        position_ids: long ``[1, n]``.

    Example (root r=0 with children a=1, b=2; a has child c=3), prefix_len = 2::

        parents = [-1, 0, 0, 1]
                  p0 p1  r  a  b  c          position ids
        r         1  1   1  0  0  0          2
        a         1  1   1  1  0  0          3
        b         1  1   1  0  1  0          3
        c         1  1   1  1  0  1          4

    With ``window=3`` the cache hands over p0 and p1 (the last two); a and b (position 3) no
    longer see p0 (3 - 0 >= 3), and c (position 4) neither p0 nor p1.
    """
    import torch
    n = len(parents)
    depths = depths_of(parents)
    anc = torch.zeros(n, n, dtype=torch.bool)
    for i, p in enumerate(parents):
        anc[i, i] = True
        if p >= 0:
            anc[i] |= anc[p]
    pos = torch.tensor(depths, dtype=torch.long) + prefix_len
    if window is None:
        mask = torch.cat([torch.ones(n, prefix_len, dtype=torch.bool), anc], dim=1)
    else:
        first = max(0, prefix_len - window + 1)           # the oldest cached position the layer holds
        keys = torch.cat([torch.arange(first, prefix_len), pos])
        mask = torch.cat([torch.ones(n, prefix_len - first, dtype=torch.bool), anc], dim=1)
        mask &= pos[:, None] - keys[None, :] < window
    return mask[None, None].to(device), pos[None].to(device)


def greedy_accept(tokens: list[int], parents: list[int], argmax: list[int]) -> tuple[list[int], int]:
    """Walk the tree greedily from the root.

    At each accepted node, step to the child whose token equals the verifier's argmax at that
    node; stop when no child matches. Children are tried in index order, so when two children
    carry the same token (a merge never makes such twins) the earlier one, the spine, wins.

    Returns:
        (accepted node indices, root first; bonus token = argmax at the last accepted node).

    Example: tokens [7, 8, 9, 5], parents [-1, 0, 0, 1], argmax [8, 5, 1, 4]
    -> root 0 predicts 8 -> node 1 (token 8) predicts 5 -> node 3 (token 5) predicts 4, leaf:
    accepted [0, 1, 3], bonus 4.
    """
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parents[1:], start=1):
        children.setdefault(p, []).append(i)
    path = [0]
    node = 0
    while True:
        want = argmax[node]
        nxt = next((c for c in children.get(node, ()) if tokens[c] == want), None)
        if nxt is None:
            return path, int(want)
        path.append(nxt)
        node = nxt


@dataclass
class DraftTree:
    """A draft tree plus provenance.

    ``sources[i]`` is the set of source names that proposed node i (empty for the root);
    ``scores[i]`` maps source name -> that source's confidence for the node; ``match[i]`` is the
    longest context agreement behind any chain proposing node i (:attr:`Chain.match
    <oilbird.sources.base.Chain>`: how many context tokens, the root included, precede the
    copied occurrence too; 0 when none is known).
    """
    tokens: list[int]
    parents: list[int]
    sources: list[set[str]] = field(default_factory=list)
    scores: list[dict[str, float]] = field(default_factory=list)
    match: list[int] = field(default_factory=list, compare=False)
    _kids: dict[tuple[int, int], int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.parents):
            raise ValueError(f"{len(self.tokens)} tokens but {len(self.parents)} parents")
        depths_of(self.parents)           # raises on a parent that is not an earlier node
        if not self.sources:
            self.sources = [set() for _ in self.tokens]
        if not self.scores:
            self.scores = [{} for _ in self.tokens]
        if not self.match:
            self.match = [0] * len(self.tokens)
        self._kids = {}
        for i, key in enumerate(zip(self.parents, self.tokens)):
            if i > 0:
                self._kids.setdefault(key, i)     # twins (a hand-made tree): the earlier, as greedy_accept

    @classmethod
    def root(cls, token: int) -> "DraftTree":
        return cls(tokens=[int(token)], parents=[-1], sources=[set()], scores=[{}])

    def __len__(self) -> int:
        return len(self.tokens)

    def child(self, node: int, token: int) -> int | None:
        """Index of the child of ``node`` carrying ``token``, or None; of two such children (which
        :meth:`add` never makes) the earlier, the one :func:`greedy_accept` steps to.

        >>> DraftTree([1, 5, 5], [-1, 0, 0]).child(0, 5)
        1
        """
        return self._kids.get((node, token))

    def add(self, parent: int, token: int, source: str, score: float, match: int = 0) -> int:
        """Add (or re-walk) ``token`` under ``parent``; return the node index. ``match``: the
        proposing chain's context agreement (the node keeps the longest).

        If the child already exists, the source is added to its provenance and no node is
        spent: this is how chains that share a prefix share its nodes.
        """
        existing = self.child(parent, token)
        if existing is not None:
            self.sources[existing].add(source)
            self.scores[existing][source] = max(score, self.scores[existing].get(source, score))
            self.match[existing] = max(self.match[existing], int(match))
            return existing
        self.tokens.append(int(token))
        self.parents.append(int(parent))
        self.sources.append({source})
        self.scores.append({source: float(score)})
        self.match.append(int(match))
        self._kids[(int(parent), int(token))] = len(self.tokens) - 1
        return len(self.tokens) - 1

    def shared_prefix(self, chain: list[int], start: int = 0) -> tuple[int, int]:
        """pi(chain, T): how many leading tokens of ``chain`` already hang as a path below
        ``start``, and the node where that path ends."""
        node, k = start, 0
        for tok in chain:
            nxt = self.child(node, tok)
            if nxt is None:
                break
            node, k = nxt, k + 1
        return k, node

    def depths(self) -> list[int]:
        return depths_of(self.parents)
