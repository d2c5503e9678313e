"""The sections of :class:`~synapse_integrations.config.SynapseConfig`, and when each is read.

Every field declares its section once, with :func:`setting`; :data:`SECTIONS` is the one
table that says, per section, whether it is *graph-time* (read when turns are ingested and
consolidated: it shapes what is stored, so it is fixed when the memory is opened) or
*query-time* (read by each retrieval, so a per-call config may change it).
``SynapseConfig.GRAPH_FIELDS`` is derived from this table, in table order, and
:class:`Sectioned` gives ``SynapseConfig`` the methods that read it.

>>> from synapse_integrations.config import SynapseConfig
>>> SECTIONS["graph"][0], SECTIONS["score"][0]
('graph', 'query')
>>> SynapseConfig.section_of("reply_weight")
'signals.replies'
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Literal

from ..errors import ConfigError, InvalidTypeError

__all__ = ["SECTIONS", "Sectioned", "When", "fields_by_section", "graph_fields", "setting"]

When = Literal["graph", "query"]

#: Section -> (when it is read, what it holds), in the order the class docstring, the docs
#: and :meth:`SynapseConfig.sections` list them (the graph-time sections first).
SECTIONS: dict[str, tuple[When, str]] = {
    "embeddings": ("graph", "the dimension of the stored vectors"),
    # the two fields below sit with retrieval in the paper's terms, but each shapes the
    # index when a turn is stored (BM25's terms; the document the embedder reads), so a
    # per-call value could not take effect: they form a graph-time section of their own
    "index": ("graph", "how a stored turn is indexed: BM25 terms, the embedded document"),
    # graph construction (Algorithm 1), and pagerank_damping: PageRank is a property of the
    # graph, refreshed with the memory's config when the graph changes (state.py), not at
    # query time, so it is graph-time although its weight in the score is not
    "graph": ("graph", "graph construction (Algorithm 1) and the graph's PageRank"),
    # the lifecycle's write side: what happens to a turn as it is stored and consolidated;
    # its read side (low_salience_weight, fact_role) is query-time, in signals.salience
    # and triggers
    "lifecycle": ("graph", "reconsolidation, surprisal gate and sleep, run on the write path"),
    "triggers": ("query", "the anchors that seed a retrieval, and the entity-feedback pass"),
    "dynamics": ("query", "spreading activation (section 3.2)"),
    "score": ("query", "the hybrid score (section 3.3) and the default k"),
    "gate": ("query", "the uncertainty gate and the evidence gate (section 3.4)"),
    "signals.salience": ("query", "the low-salience ranking signal"),
    "signals.versions": ("query", "the versions ranking signal"),
    "signals.replies": ("query", "the replies ranking signal"),
    "signals.asks": ("query", "the asked ranking signal: what a turn asks"),
    "signals.focus": ("query", "the focus ranking signal: speakers, first person, dates"),
    "switches": ("query", "the mechanism switches of the paper's ablations"),
    "models": ("query", "the retrieval model and its hyperparameters"),
    # free-form, for extensions: not graph-time (a per-call config may change it), but
    # graph_signature() includes it, since an extension may read it on the write path
    "extra": ("query", "free-form settings for extensions (JSON-serialisable)"),
}


def setting(section: str, default: Any = dataclasses.MISSING, *,
            factory: Any = dataclasses.MISSING) -> Any:
    """A ``SynapseConfig`` field of ``section``: ``dataclasses.field`` with the section in
    its metadata (``factory``: a default factory, for mutable defaults).

    >>> setting("dynamics", 0.5).metadata["section"]
    'dynamics'
    """
    if section not in SECTIONS:
        raise ConfigError(f"unknown config section {section!r}; known: {', '.join(SECTIONS)}")
    return dataclasses.field(default=default, default_factory=factory,
                             metadata={"section": section})


@functools.cache
def fields_by_section(cls: type) -> dict[str, tuple[str, ...]]:
    """Section -> the names of ``cls``'s fields in it (declaration order), every section of
    :data:`SECTIONS` in table order. A field without a section is an error naming it."""
    out: dict[str, list[str]] = {name: [] for name in SECTIONS}
    for f in dataclasses.fields(cls):
        section = f.metadata.get("section")
        if section not in out:
            raise ConfigError(f"{cls.__name__}.{f.name} has no config section; declare it "
                              f"with setting(section, default)")
        out[section].append(f.name)
    return {name: tuple(names) for name, names in out.items()}


def graph_fields(cls: type) -> tuple[str, ...]:
    """The fields of the graph-time sections, in table order."""
    return tuple(name for section, names in fields_by_section(cls).items()
                 if SECTIONS[section][0] == "graph" for name in names)


class Sectioned:
    """The section methods of ``SynapseConfig`` (a dataclass whose fields are declared with
    :func:`setting`)."""

    __slots__ = ()

    @classmethod
    def sections(cls) -> dict[str, tuple[str, ...]]:
        """Section -> the names of its fields, the sections in table order.

        >>> from synapse_integrations.config import SynapseConfig
        >>> SynapseConfig.sections()["signals.versions"]
        ('superseded_weight', 'version_recency')
        """
        return dict(fields_by_section(cls))

    @classmethod
    def section_of(cls, name: str) -> str:
        """The section of field ``name``.

        >>> from synapse_integrations.config import SynapseConfig
        >>> SynapseConfig.section_of("pagerank_damping"), SynapseConfig.section_of("top_k")
        ('graph', 'score')
        """
        for section, names in fields_by_section(cls).items():
            if name in names:
                return section
        raise ConfigError(f"unknown {cls.__name__} field {name!r}")

    @classmethod
    def is_graph_time(cls, section: str) -> bool:
        """Whether ``section`` is graph-time: read when turns are stored and consolidated,
        so set when the memory is opened (a per-call config may not change it).

        >>> from synapse_integrations.config import SynapseConfig
        >>> SynapseConfig.is_graph_time("index"), SynapseConfig.is_graph_time("gate")
        (True, False)
        """
        if section not in SECTIONS:
            raise ConfigError(f"unknown config section {section!r}; known: {', '.join(SECTIONS)}")
        return SECTIONS[section][0] == "graph"

    def section(self, name: str) -> dict[str, Any]:
        """The values of section ``name``'s fields.

        >>> from synapse_integrations.config import SynapseConfig
        >>> SynapseConfig(reply_weight=0.5).section("signals.replies")
        {'reply_weight': 0.5, 'follow_up_weight': 0.64}
        """
        if name not in SECTIONS:
            raise ConfigError(f"unknown config section {name!r}; known: {', '.join(SECTIONS)}")
        return {f: getattr(self, f) for f in fields_by_section(type(self))[name]}

    def query_time(self) -> dict[str, Any]:
        """The values of every query-time field: what a per-call config may change.

        >>> from synapse_integrations.config import SynapseConfig
        >>> mem_config = SynapseConfig()
        >>> mem_config.replace(**SynapseConfig.paper().query_time()).gate_signal
        'activation'
        """
        return {f: getattr(self, f) for section, names in fields_by_section(type(self)).items()
                if SECTIONS[section][0] == "query" for f in names}

    def query_override(self, config: Any) -> Any:
        """``config`` checked as a per-call override of this config (a memory's own):
        ``config`` itself when it changes only query-time fields (``None``: this config);
        a :class:`~synapse_integrations.errors.ConfigError` naming the graph-time fields it
        changes otherwise, since those are set when the memory is opened.

        >>> from synapse_integrations.config import SynapseConfig
        >>> mine = SynapseConfig()
        >>> mine.query_override(mine.replace(gate_tau=0.3)).gate_tau
        0.3
        >>> mine.query_override(SynapseConfig(dedup_threshold=0.8))
        Traceback (most recent call last):
        ...
        synapse_integrations.errors.ConfigError: a per-call config may not change ... dedup_threshold ...
        """
        if config is None:
            return self
        if not isinstance(config, type(self)):
            raise InvalidTypeError(f"config must be a {type(self).__name__}, "
                                   f"got {type(config).__name__}")
        changed = [f"{f} ({section}) {getattr(self, f)!r} -> {getattr(config, f)!r}"
                   for section, names in fields_by_section(type(self)).items()
                   if SECTIONS[section][0] == "graph" for f in names
                   if getattr(config, f) != getattr(self, f)]
        if changed:
            raise ConfigError(
                f"a per-call config may not change graph-time settings: {', '.join(changed)}. "
                f"They are set when the memory is opened (Synapse(path, config=...)) and shape "
                f"what it stores; change only query-time fields of the memory's config "
                f"(memory.config.replace(gate_tau=...), or "
                f"memory.config.replace(**other.query_time()) to take another config's)")
        return config
