"""The write firewall: realistic secrets and personal data are caught (per-category block /
redact / allow), near misses are left alone, and the engine's defaults are what
firewall.py documents (secrets redacted, personal data allowed)."""

from __future__ import annotations

import pytest

from synapse_integrations import Synapse
from synapse_integrations.errors import ConfigError, FirewallBlockedError, InvalidTypeError
from synapse_integrations.firewall import CATEGORIES, Firewall, FirewallConfig, luhn_ok

from _safety_helpers import HashEmbedder

# sample credentials are assembled at run time so that no scanner mistakes this file for a leak
OPENAI = "sk-" + "proj-" + "Xq7" * 12
ANTHROPIC = "sk-ant-api03-" + "aB3_" * 10
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "a1B2c3D4" * 5
GITHUB_PAT = "github_pat_" + "11ABCDEFG0" * 3
SLACK = "xoxb-" + "123456789012-abcdefABCDEF"
STRIPE = "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc"
GOOGLE = "AIza" + "SyA-" + "x" * 31
PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0\n"
       "gunVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxKLxoS2tFczGkPLPgizskuemMghRniWaoLc\n"
       "-----END RSA PRIVATE KEY-----")

SECRETS = {
    "api_key": [f"my key is {OPENAI} ok", f"use {ANTHROPIC}", f"aws id {AWS} in prod",
                f"token {GITHUB}", f"pat {GITHUB_PAT}", f"slack {SLACK}", f"stripe {STRIPE}",
                f"maps key {GOOGLE}"],
    "private_key": [f"here is the key:\n{PEM}\nthanks", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn"],
    "url_password": ["db at postgres://admin:hunter2x@db.example.com:5432/app",
                     "clone https://bob:s3cr3t-Pa55@github.example.org/repo.git"],
    "credential": ["password=CorrectHorse9", "my password: Tr0ub4dor&3x", "api_key = 'zq9-77-abcdef'",
                   "client_secret: 8f7e6d5c4b3a"],
}
PII = {
    "email": ["write to dana.smith+news@example.co.uk please", "ceo@sub.example.com"],
    "phone": ["call me on +1 415 555 0132", "my number is (020) 7946 0958", "ring 415-555-0199"],
    "credit_card": ["card 4111 1111 1111 1111 exp 12/29", "pay with 5500-0000-0000-0004",
                    "amex 378282246310005"],
    "ssn": ["my SSN is 123-45-6789", "ssn: 078-05-1120"],
}
NEAR_MISSES = [
    "the password is something I forgot", "password", "reset your password tomorrow",
    "version 1.2.3 shipped on 2024-03-02", "python 3.11.7 and numpy 1.26.4",
    "the meeting is at 10:30 on 12/05/2024", "order #4111111111111112 arrived",  # not Luhn
    "tracking 1234 5678 9012 3456 is late",  # 16 digits, not Luhn-valid
    "I ran 5000 metres in 21 minutes", "population 8,336,817 in 2023", "pi is 3.14159265358979",
    "ISBN 978-3-16-148410-0", "IP 192.168.10.254 is the router", "sk-learn is a library",
    "the task-id is sk-12", "AKIA is an acronym", "email me later", "user@localhost",
    "https://example.com/path?q=a:b@c", "ssh key fingerprint SHA256:abc", "000-12-3456",
    "coordinates 51.5074, -0.1278", "build 2024.03.02.1 released",
]


def _all(samples: dict[str, list[str]]) -> list[tuple[str, str]]:
    return [(cat, s) for cat, items in samples.items() for s in items]


@pytest.mark.parametrize("category,text", _all(SECRETS) + _all(PII))
def test_each_sample_is_detected_and_redacted_in_its_category(category, text):
    fw = Firewall(FirewallConfig(secrets="redact", pii="redact"))
    res = fw.scan_text(text)
    assert category in {f.category for f in res.findings}, (text, res.findings)
    assert f"[REDACTED:{category}]" in res.text


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_not_touched(text):
    fw = Firewall(FirewallConfig(secrets="redact", pii="redact"))
    res = fw.scan_text(text)
    assert res.findings == () and res.text == text


def test_secret_values_are_gone_after_redaction():
    fw = Firewall(FirewallConfig(secrets="redact", pii="redact"))
    for _, text in _all(SECRETS):
        out = fw.scan_text(text).text
        for value in (OPENAI, ANTHROPIC, AWS, GITHUB, STRIPE, "hunter2x", "s3cr3t-Pa55",
                      "CorrectHorse9", "MIIEowIBAAKCAQEA"):
            assert value not in out


def test_luhn():
    assert luhn_ok("4111111111111111") and luhn_ok("378282246310005")
    assert not luhn_ok("4111111111111112") and not luhn_ok("1234567890123456")


def test_engine_default_redacts_secrets_and_keeps_personal_data(tmp_path):
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder())
    i1 = mem.add_turn(f"deploy with {OPENAI} and email ops@example.com or call +1 415 555 0132",
                      speaker="Sam", metadata={"note": f"aws {AWS}", "n": 3})
    node = mem.get(i1)
    assert OPENAI not in node["text"] and "[REDACTED:api_key]" in node["text"]
    assert "ops@example.com" in node["text"] and "+1 415 555 0132" in node["text"]
    assert node["metadata"] == {"note": "aws [REDACTED:api_key]", "n": 3}
    # the secret is in no stored file either
    mem.close()
    for f in (tmp_path / "m").rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert OPENAI.encode() not in data and AWS.encode() not in data, f


def test_engine_block_and_allow_and_overrides(tmp_path):
    cfg = FirewallConfig(secrets="block", pii="redact", overrides={"phone": "allow"})
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder(), firewall=cfg)
    before = len(mem.graph)
    with pytest.raises(FirewallBlockedError) as info:
        mem.add_turns(["harmless first turn", "the db is postgres://u:pw12345@h/x"])
    assert info.value.categories == ("url_password",)
    assert "pw12345" not in str(info.value) and "nothing was stored" in str(info.value)
    assert len(mem.graph) == before  # the whole batch was refused
    with pytest.raises(FirewallBlockedError):
        mem.add_turn("fine text", speaker=f"{GITHUB}")
    with pytest.raises(FirewallBlockedError):
        mem.add_turn("fine text", metadata={"nested": [{"k": f"{PEM}"}]})
    i = mem.add_turn("mail dana@example.org or call +1 415 555 0132")
    assert mem.get(i)["text"] == "mail [REDACTED:email] or call +1 415 555 0132"
    assert mem.verify().ok
    mem.close()
    off = Synapse(tmp_path / "off", embedder=HashEmbedder(), firewall=FirewallConfig.off())
    assert off.get(off.add_turn(f"key {OPENAI}"))["text"] == f"key {OPENAI}"
    off.close()


def test_firewall_config_is_validated():
    with pytest.raises(ConfigError, match="secrets"):
        FirewallConfig(secrets="drop")
    with pytest.raises(ConfigError, match="unknown firewall category"):
        FirewallConfig(overrides={"dna": "block"})
    with pytest.raises(ConfigError):
        FirewallConfig(overrides={"email": "maybe"})
    with pytest.raises(ConfigError):
        FirewallConfig(placeholder="{nope}")
    with pytest.raises(InvalidTypeError):
        Firewall({"secrets": "block"})
    cfg = FirewallConfig()
    assert cfg.enabled and {cfg.action(c) for c in ("api_key", "private_key", "url_password",
                                                    "credential")} == {"redact"}
    assert {cfg.action(c) for c in ("email", "phone", "credit_card", "ssn")} == {"allow"}
    assert set(CATEGORIES) == {"api_key", "private_key", "url_password", "credential",
                               "email", "phone", "credit_card", "ssn"}
