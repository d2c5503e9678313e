"""What a model is handed: the tokens of memory text per query, and recall at a token budget.

Recall at ``k`` turns says nothing of their length: ten LongMemEval turns can run to
thousands of tokens, ten LoCoMo turns to a few hundred. The SYNAPSE paper reports accuracy
at about 814 context tokens per query (95% fewer than the full context). So every bench
reports, per method and category:

* ``context_tokens@k``: the mean number of tokens of the first ``k`` memories' text
  (:func:`context_tokens`), what an agent that shows the top ``k`` pays per query;
* ``tokens_recall@<B>``: recall over the memories that fit a budget of ``B`` tokens
  (:func:`within_budget`: the longest prefix of the ranking whose texts add up to at most
  ``B``; a memory that does not fit ends the context, as a model's prompt would be cut).

Tokens are counted with the all-MiniLM-L6-v2 tokenizer that ships with the packaged model
(WordPiece, read with Hugging Face ``tokenizers``; :class:`TokenCounter`): it is on disk
already, while tiktoken's cl100k downloads its vocabulary on first use, which the benches
may not do. For English chat the two counts are close (WordPiece splits rare words a little
more); the figure is the memory text alone, without a prompt's framing.

>>> lengths = {"a": 400, "b": 700, "c": 100}
>>> context_tokens(["a", "b", "c"], lengths, 2), within_budget(["a", "b", "c"], lengths, 1000)
(1100, ['a'])
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..errors import InvalidInputError
from .metrics import mean_by_group, mean_by_key, recall_at_k

__all__ = ["BUDGETS", "TokenCounter", "context_section", "context_tokens", "within_budget"]

#: The token budgets recall is reported at (the issue's; the paper's 814 lies below the first).
BUDGETS: tuple[int, ...] = (1000, 2000)


def context_tokens(ranked: Sequence[str], lengths: Mapping[str, int], k: int) -> int:
    """Tokens of the first ``k`` ranked memories' text (a memory without a length counts 0).

    >>> context_tokens(["x", "y"], {"x": 3, "y": 4}, 5)
    7
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be a positive integer, got {k!r}")
    return sum(lengths.get(d, 0) for d in ranked[:k])


def within_budget(ranked: Sequence[str], lengths: Mapping[str, int], budget: int) -> list[str]:
    """The longest prefix of ``ranked`` whose texts add up to at most ``budget`` tokens.

    >>> within_budget(["x", "y", "z"], {"x": 3, "y": 4, "z": 1}, 6)
    ['x']
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise InvalidInputError(f"budget must be a positive integer, got {budget!r}")
    out: list[str] = []
    used = 0
    for d in ranked:
        used += lengths.get(d, 0)
        if used > budget:
            break
        out.append(d)
    return out


def _recall_within(ranked: Sequence[str], evidence: Sequence[str], lengths: Mapping[str, int],
                   budget: int) -> float:
    fit = within_budget(ranked, lengths, budget)
    return recall_at_k(fit, evidence, len(fit)) if fit else 0.0


class TokenCounter:
    """Tokens per text with the packaged MiniLM tokenizer (module docstring); each distinct
    text is counted once. ``path``: a ``tokenizer.json`` (default: the packaged model's)."""

    def __init__(self, path: str | None = None) -> None:
        self._path = path
        self._counts: dict[str, int] = {}

    @functools.cached_property
    def _tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        path = self._path
        if path is None:
            from ..embeddings import packaged_model_path

            path = os.path.join(packaged_model_path(), "tokenizer.json")
        tok = Tokenizer.from_file(path)
        tok.no_truncation()
        tok.no_padding()
        return tok

    def counts(self, texts: Iterable[str]) -> list[int]:
        """Each text's token count (special tokens aside), in order."""
        texts = list(texts)
        new = list(dict.fromkeys(t for t in texts if t not in self._counts))
        if new:
            for t, enc in zip(new, self._tokenizer.encode_batch(new, add_special_tokens=False)):
                self._counts[t] = len(enc.ids)
        return [self._counts[t] for t in texts]

    def lengths(self, texts: Mapping[str, str]) -> dict[str, int]:
        """``{id: tokens}`` for ``{id: text}``."""
        ids = list(texts)
        return dict(zip(ids, self.counts(texts[i] for i in ids)))


def context_section(records: Iterable[Any], lengths_of: Callable[[Any], Mapping[str, int]],
                    keys: Sequence[str], pools: Mapping[str, Sequence[str]],
                    ks: Sequence[int], budgets: Sequence[int] = BUDGETS,
                    key_of: Callable[[Any], str] = lambda r: str(r.category)
                    ) -> dict[str, dict[str, float | None]]:
    """``context_tokens@k`` (every record) and ``tokens_recall@<B>`` (records with
    evidence) per key and pool. ``lengths_of(record)`` gives the token length of every
    memory that record's ranking may hold; ``key_of`` its category."""
    recs = list(records)
    out: dict[str, dict[str, float | None]] = {}
    names = [*keys, *pools]
    for k in ks:
        tok = mean_by_group(((key_of(r), float(context_tokens(r.ranked, lengths_of(r), k)))
                             for r in recs), pools)
        out[f"context_tokens@{k}"] = {key: tok.get(key) for key in names}
    for b in budgets:
        rec = mean_by_key(((key_of(r), _recall_within(r.ranked, r.evidence, lengths_of(r), b))
                           for r in recs if r.evidence), pools)
        out[f"tokens_recall@{b}"] = {key: rec.get(key) for key in names}
    return out
