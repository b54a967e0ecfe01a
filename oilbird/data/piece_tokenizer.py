"""Token ids of many overlapping chat-template texts, each distinct piece tokenized once (replay's encoding)."""
from __future__ import annotations

import re


def ids_of(x) -> list[int]:
    """Token ids from what a tokenizer call or apply_chat_template returned (a list or a dict of them)."""
    if isinstance(x, dict) or hasattr(x, "keys"):
        x = x["input_ids"]
    return [int(i) for i in x]


class PieceTokenizer:
    """A fast Hugging Face tokenizer applied piece by piece, each distinct piece tokenized once.

    Such a tokenizer first cuts a text at its added tokens (``<|im_start|>``, ``<|im_end|>``, ...)
    and tokenizes the text between them independently; so the ids of a text are the ids of its
    pieces, and a conversation's pieces (about one per message) are tokenized once however many
    turns repeat them. Used only when no added token strips whitespace or matches whole words;
    :func:`oilbird.data.conversations.encode_conversation` also checks it against the tokenizer itself before trusting it."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.added = {str(t): int(i) for t, i in tokenizer.get_added_vocab().items()}
        pattern = "|".join(re.escape(t) for t in sorted(self.added, key=len, reverse=True))
        self.split = re.compile(f"({pattern})").split if pattern else (lambda text: [text])
        self.memo: dict[str, list[int]] = {}

    @staticmethod
    def usable(tokenizer) -> bool:
        if not (getattr(tokenizer, "is_fast", False) is True and getattr(tokenizer, "chat_template", None)
                and callable(getattr(tokenizer, "get_added_vocab", None))):
            return False
        decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
        return not any(getattr(t, a, False) for t in decoder.values() for a in ("lstrip", "rstrip", "single_word"))

    def learn(self, texts: list[str], whole: list[str] = ()) -> list[list[int]]:
        """Tokenize every piece of ``texts`` not seen yet, and the ``whole`` texts directly, in
        one batch call; returns the ids of the ``whole`` texts."""
        new = list(dict.fromkeys(p for t in texts for p in self.split(t)
                                 if p and p not in self.added and p not in self.memo))
        batch = new + list(whole)
        ids = [ids_of(x) for x in self.tokenizer(batch, add_special_tokens=False)["input_ids"]] if batch else []
        self.memo.update(zip(new, ids))
        return ids[len(new):]

    def __call__(self, text: str) -> list[int]:
        out: list[int] = []
        for piece in self.split(text):
            if piece in self.added:
                out.append(self.added[piece])
            elif piece:
                ids = self.memo.get(piece)
                if ids is None:
                    self.learn([piece])
                    ids = self.memo[piece]
                out.extend(ids)
        return out
