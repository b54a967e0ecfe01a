"""One request's generated tokens on their way to the cross-request store (:mod:`oilbird.store`):
the bookkeeping the decoder and the vLLM proposer share."""
from __future__ import annotations

import numpy as np

from .store import Store


class RequestRecords:
    """One request's generated tokens on their way to a store: the decoder's and the vLLM
    proposer's one bookkeeping (:class:`oilbird.decoding.SpeculativeDecoder`,
    :class:`oilbird.serving.chains.RequestDrafter`).

    Each cycle, :meth:`record` queues the positions whose states the verify forward computed
    (the root and the accepted tokens); a position the request passed without a state (a cycle
    that had none) is queued with state None, so one such cycle never stops the rest. When the
    request ends, :meth:`close` queues the rest of its output (the last bonus has no state yet)
    and hands it all to the store as one request. Positions are generated-token indices, 0
    for the first generated token; tokens past the output (a commit cut at EOS or at the token
    limit) are never queued.

    Example: output ``[5, 6, 7, 8]``; ``record(out, 0, [s0, s1])`` queues 5 and 6 with states;
    a cycle without states queues nothing; ``record(out, 3, [s3])`` queues 7 (None) and 8 (s3).
    """

    def __init__(self, request_id: str):
        self.request_id = request_id
        self.records: list[tuple[int, int, np.ndarray | None]] = []     # (position, token, state)

    def record(self, output, first: int, states) -> None:
        """Queue ``output[first + j]`` with ``states[j]``; positions before ``first`` not queued
        yet, with state None. ``first`` may be -1 (the root was the prompt's last token: its
        state is not a generated token's). Positions already queued or past ``output`` are skipped."""
        n = len(output)
        for pos in range(len(self.records), min(first, n)):
            self.records.append((pos, int(output[pos]), None))
        for j, state in enumerate(states):
            pos = first + j
            if pos == len(self.records) and pos < n:
                self.records.append((pos, int(output[pos]), state))

    def close(self, store: Store, output) -> None:
        """The request ended with ``output``: queue the rest (state None), drop what was queued
        past its end, hand everything to ``store`` as one request and make it searchable (the
        store's bounds apply even to an empty one). The queue is emptied whatever happens; a
        request the store refuses leaves nothing queued in it."""
        try:
            del self.records[len(output):]          # queued past an output that was cut short
            self.record(output, len(output), ())
            for pos, token, state in self.records:
                store.add(self.request_id, pos, token, state)
            store.end_request()
        except BaseException:
            store.drop_pending()        # half a request in the queue would block every next one
            raise
        finally:
            self.records = []
