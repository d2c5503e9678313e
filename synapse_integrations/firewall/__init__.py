"""The write firewall: secrets and personal data are screened before anything is stored.

Every turn (its text, speaker and the string values of its metadata) passes through
:class:`Firewall` before it is embedded or written to Chroma or a snapshot. Each detector
belongs to a *category*; each category has an action:

- ``"block"``: the write raises :class:`~synapse_integrations.errors.FirewallBlockedError`
  and nothing of the batch is stored;
- ``"redact"``: the match is replaced by ``[REDACTED:<category>]``;
- ``"allow"``: stored as given.

Defaults (see docs/safety.md): the firewall is on and **redacts secrets** (provider API keys,
JWTs and webhook URLs as ``api_key``; private key blocks; passwords in URLs; credentials
named by a keyword -- ``password=...``, ``.env`` lines such as ``DB_PASSWORD=...``,
``"client_secret": "..."``, "the password is ...", ``Authorization: Bearer ...`` -- as
``credential``, and so is a metadata string stored under such a name); personal data
(emails, phone numbers, card numbers, US SSNs) is **allowed** unless you opt in, because a
memory of a conversation usually needs names and contact details.

Before the firewall, and whether it is on or off, control characters in turn text are
normalised, never refused (:func:`synapse_integrations.core.state.validation.normalise_text`:
C1 controls read as cp1252, the rest replaced; recorded in the turn's metadata as
``text_normalised``), so a detector never sees them.

The detectors are in :mod:`.detectors` (the keyword credentials in :mod:`.credentials`);
``python -m synapse_integrations.firewall`` measures them on the labelled corpus in
``tests/fixtures/`` (:mod:`.evaluate`).

>>> fw = Firewall(FirewallConfig(pii="redact"))
>>> fw.scan_text("mail me at dana@example.org, key sk-abc123def456ghi789jkl0").text
'mail me at [REDACTED:email], key [REDACTED:api_key]'
>>> fw.scan_text('DB_PASSWORD=hunter2 and password="correct horse battery staple"').text
'DB_PASSWORD=[REDACTED:credential] and password="[REDACTED:credential]"'
>>> fw.scan_text("version 1.2.3 shipped on 2024-03-02").findings
()
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import ConfigError, FirewallBlockedError
from .credentials import is_credential_name, is_placeholder
from .detectors import DETECTORS, card_issuer_ok, luhn_ok

__all__ = ["ACTIONS", "CATEGORIES", "PII_CATEGORIES", "SECRET_CATEGORIES", "Finding", "Firewall",
           "FirewallConfig", "ScanResult", "card_issuer_ok", "is_credential_name", "is_placeholder",
           "luhn_ok"]

ACTIONS = ("block", "redact", "allow")

SECRET_CATEGORIES = ("api_key", "private_key", "url_password", "credential")
PII_CATEGORIES = ("email", "phone", "credit_card", "ssn")
CATEGORIES = SECRET_CATEGORIES + PII_CATEGORIES

@dataclass(frozen=True)
class Finding:
    """One detected span: its category and position in the scanned text (never its value)."""

    category: str
    start: int
    end: int


@dataclass(frozen=True)
class ScanResult:
    """What the firewall made of one text: the text to store and what it found."""

    text: str
    findings: tuple[Finding, ...]
    blocked: tuple[str, ...]  # categories whose action is "block"


@dataclass(frozen=True)
class FirewallConfig:
    """Which categories the firewall looks for and what it does with each.

    Args:
        enabled: ``False`` switches the firewall off entirely.
        secrets: action for every secret category (``api_key``, ``private_key``,
            ``url_password``, ``credential``); default ``"redact"``.
        pii: action for every personal-data category (``email``, ``phone``,
            ``credit_card``, ``ssn``); default ``"allow"``.
        overrides: per-category actions that win over ``secrets`` / ``pii``,
            e.g. ``{"email": "redact", "private_key": "block"}``.
        placeholder: replacement text; ``{category}`` is filled in.
        scan_metadata: also screen the speaker and string values in turn metadata.
    """

    enabled: bool = True
    secrets: str = "redact"
    pii: str = "allow"
    overrides: Mapping[str, str] = field(default_factory=dict)
    placeholder: str = "[REDACTED:{category}]"
    scan_metadata: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool) or not isinstance(self.scan_metadata, bool):
            raise ConfigError("FirewallConfig.enabled and scan_metadata must be bools")
        for name in ("secrets", "pii"):
            if getattr(self, name) not in ACTIONS:
                raise ConfigError(f"FirewallConfig.{name} must be one of {ACTIONS}, "
                                  f"got {getattr(self, name)!r}")
        if not isinstance(self.overrides, Mapping):
            raise ConfigError("FirewallConfig.overrides must be a mapping category -> action")
        for cat, action in self.overrides.items():
            if cat not in CATEGORIES:
                raise ConfigError(f"unknown firewall category {cat!r}; known: {CATEGORIES}")
            if action not in ACTIONS:
                raise ConfigError(f"firewall action for {cat!r} must be one of {ACTIONS}, got {action!r}")
        if not isinstance(self.placeholder, str):
            raise ConfigError("FirewallConfig.placeholder must be a str")
        try:
            self.placeholder.format(category="x")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(f"FirewallConfig.placeholder is not a valid format string: {exc}") from None
        object.__setattr__(self, "overrides", MappingProxyType(dict(self.overrides)))

    def action(self, category: str) -> str:
        """The action for one category."""
        if category in self.overrides:
            return self.overrides[category]
        return self.secrets if category in SECRET_CATEGORIES else self.pii

    @classmethod
    def off(cls) -> FirewallConfig:
        """A firewall that lets everything through."""
        return cls(enabled=False)

    @classmethod
    def strict(cls) -> FirewallConfig:
        """Block secrets, redact personal data."""
        return cls(secrets="block", pii="redact")


class Firewall:
    """Applies a :class:`FirewallConfig` to text (pure; thread-safe)."""

    def __init__(self, config: FirewallConfig | None = None) -> None:
        if config is None:
            config = FirewallConfig()
        if not isinstance(config, FirewallConfig):
            from ..errors import InvalidTypeError

            raise InvalidTypeError(f"firewall must be a FirewallConfig, got {type(config).__name__}")
        self.config = config

    def detect(self, text: str) -> list[Finding]:
        """Every non-overlapping finding in ``text`` (earlier detectors win overlaps)."""
        cfg = self.config
        taken: list[tuple[int, int]] = []
        out: list[Finding] = []
        for category, find in DETECTORS:
            if cfg.action(category) == "allow":
                continue
            for s, e in find(text):
                if any(s < te and ts < e for ts, te in taken):
                    continue
                taken.append((s, e))
                out.append(Finding(category, s, e))
        out.sort(key=lambda f: f.start)
        return out

    def scan_text(self, text: str) -> ScanResult:
        """Redact what must be redacted; report what must be blocked (does not raise)."""
        if not self.config.enabled or not text:
            return ScanResult(text, (), ())
        findings = self.detect(text)
        blocked = tuple(sorted({f.category for f in findings
                                if self.config.action(f.category) == "block"}))
        parts: list[str] = []
        pos = 0
        for f in findings:
            if self.config.action(f.category) != "redact":
                continue
            parts.append(text[pos:f.start])
            parts.append(self.config.placeholder.format(category=f.category))
            pos = f.end
        parts.append(text[pos:])
        return ScanResult("".join(parts), tuple(findings), blocked)

    def check_text(self, text: str, *, what: str = "text") -> str:
        """The text to store, or :class:`FirewallBlockedError` (naming categories only)."""
        res = self.scan_text(text)
        if res.blocked:
            raise FirewallBlockedError(
                f"the write firewall blocked this {what}: it contains {', '.join(res.blocked)} "
                f"(nothing was stored; remove it, or set FirewallConfig(overrides=...) to "
                f"'redact' or 'allow')", res.blocked)
        return res.text

    def check_value(self, value: Any, *, what: str = "metadata") -> Any:
        """Screen every string inside a JSON-like value (dict keys included)."""
        if not self.config.enabled or not self.config.scan_metadata:
            return value
        if isinstance(value, str):
            return self.check_text(value, what=what)
        if isinstance(value, Mapping):
            return {self.check_value(k, what=what): self._check_named(k, v, what)
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self.check_value(v, what=what) for v in value]
        return value

    def _check_named(self, key: Any, value: Any, what: str) -> Any:
        """A string stored under a credential's name ({"password": "hunter"}) is a credential
        as a whole, whatever it looks like; everything else is screened as usual."""
        action = self.config.action("credential")
        if (action == "allow" or not isinstance(key, str) or not isinstance(value, str)
                or not is_credential_name(key) or is_placeholder(value)):
            return self.check_value(value, what=what)
        if action == "block":
            raise FirewallBlockedError(
                f"the write firewall blocked this {what}: it contains credential (nothing was "
                f"stored; remove it, or set FirewallConfig(overrides=...) to 'redact' or "
                f"'allow')", ("credential",))
        return self.config.placeholder.format(category="credential")
