"""A word-level tokenizer with the call signature the extraction code uses, for tiny in-code models.

Ids come from a CRC of each word: ``3 + crc32(word) % (vocab - 3)`` (0 = pad, 1 = CLS/BOS, 2 = SEP/EOS).
With ``specials`` rows are ``[1, words..., 2]``; padding goes right or left as asked.
"""

from __future__ import annotations

import zlib

import torch


class WordTokenizer:
    """Callable like a Hugging Face tokenizer: ``tok(texts, padding=True, truncation=True, max_length=...)``."""

    def __init__(self, vocab: int, *, specials: bool = False, padding_side: str = "right",
                 lowercase: bool = False) -> None:
        self.vocab = vocab
        self.specials = specials
        self.padding_side = padding_side
        self.lowercase = lowercase
        self.pad_token = self.eos_token = self.unk_token = "[PAD]"

    def ids(self, text: str) -> list[int]:
        words = [3 + zlib.crc32((w.lower() if self.lowercase else w).encode()) % (self.vocab - 3) for w in text.split()]
        return [1, *words, 2] if self.specials else words

    def __call__(self, texts, padding=True, truncation=True, max_length=None, return_tensors="pt"):
        rows = [self.ids(t) for t in texts]
        if truncation and max_length:
            rows = [r[:max_length] for r in rows]
        width = max(len(r) for r in rows)
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            sl = slice(0, len(r)) if self.padding_side == "right" else slice(width - len(r), width)
            ids[i, sl] = torch.tensor(r, dtype=torch.long)
            mask[i, sl] = 1
        return {"input_ids": ids, "attention_mask": mask}
