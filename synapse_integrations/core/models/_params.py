"""Hyperparameters of the seed models, read from ``SynapseConfig.model_params``.

Each model owns one key of ``model_params`` (``model_params={"evermind": {"gamma": 0.9}}``) and declares
its defaults and checks once, as a :class:`ParamSpec`; :func:`read_params` merges the
user's values over the defaults and validates them, so a typo or a value out of range is
a :class:`~synapse_integrations.errors.ConfigError` naming the key, not a silent default.

>>> spec = ParamSpec("demo", {"gamma": (0.95, unit_interval), "rounds": (3, non_negative_int)})
>>> from synapse_integrations.config import SynapseConfig
>>> read_params(SynapseConfig(model_params={"demo": {"gamma": 0.9}}), spec)
{'gamma': 0.9, 'rounds': 3}
>>> read_params(SynapseConfig(model_params={"demo": {"gama": 0.9}}), spec)
Traceback (most recent call last):
...
synapse_integrations.errors.ConfigError: unknown model_params['demo'] key(s): gama; known: gamma, rounds
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ...config import SynapseConfig

__all__ = ["ParamSpec", "read_params"]

#: A check returns an error text for a bad value, or None.
Check = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class ParamSpec:
    """A model's ``model_params`` key and, per hyperparameter, ``(default, check)``."""

    key: str
    params: Mapping[str, tuple[Any, Check]]

    def defaults(self) -> dict[str, Any]:
        return {name: default for name, (default, _) in self.params.items()}


def read_params(config: SynapseConfig, spec: ParamSpec) -> dict[str, Any]:
    """The hyperparameters of ``spec`` for ``config``: ``config.model_params[spec.key]`` over the
    defaults, each value checked."""
    given = (config.model_params or {}).get(spec.key, {})
    if not isinstance(given, Mapping):
        raise ConfigError(f"model_params[{spec.key!r}] must be a dict of hyperparameters, "
                          f"got {type(given).__name__}")
    unknown = sorted(set(given) - set(spec.params))
    if unknown:
        raise ConfigError(f"unknown model_params[{spec.key!r}] key(s): {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(spec.params))}")
    out = spec.defaults()
    for name, value in given.items():
        problem = spec.params[name][1](value)
        if problem:
            raise ConfigError(f"model_params[{spec.key!r}][{name!r}] {problem}, got {value!r}")
        out[name] = value
    return out


# -- checks ---------------------------------------------------------------------------------
def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def unit_interval(v: Any) -> str | None:
    return None if _is_number(v) and 0.0 <= v <= 1.0 else "must be a number in [0, 1]"


def cosine(v: Any) -> str | None:
    return None if _is_number(v) and -1.0 <= v <= 1.0 else "must be a cosine in [-1, 1]"


def non_negative(v: Any) -> str | None:
    return None if _is_number(v) and v >= 0 else "must be a finite number >= 0"


def positive(v: Any) -> str | None:
    return None if _is_number(v) and v > 0 else "must be a finite number > 0"


def finite(v: Any) -> str | None:
    return None if _is_number(v) else "must be a finite number"


def non_negative_int(v: Any) -> str | None:
    ok = isinstance(v, int) and not isinstance(v, bool) and v >= 0
    return None if ok else "must be an int >= 0"


def positive_int(v: Any) -> str | None:
    ok = isinstance(v, int) and not isinstance(v, bool) and v >= 1
    return None if ok else "must be an int >= 1"


def boolean(v: Any) -> str | None:
    return None if isinstance(v, bool) else "must be True or False"


def optional(check: Check) -> Check:
    def inner(v: Any) -> str | None:
        problem = None if v is None else check(v)
        return f"{problem} or None" if problem else None
    return inner


def choice(*options: str) -> Check:
    def inner(v: Any) -> str | None:
        return None if v in options else f"must be one of {', '.join(map(repr, options))}"
    return inner
