"""The red-team pass on the write firewall (default config): every format it reported as
missed is caught now, nothing of the value survives, and no pattern can be made to backtrack
badly on a turn of the largest accepted size."""

from __future__ import annotations

import base64
import time

import pytest

from synapse_integrations.errors import FirewallBlockedError
from synapse_integrations.firewall import Firewall, FirewallConfig
from synapse_integrations.firewall.detectors import DETECTORS

# sample credentials are assembled at run time so that no scanner mistakes this file for a leak
def _b64(s: str) -> str:
    return base64.urlsafe_b64encode(s.encode()).decode().rstrip("=")


JWT = (_b64('{"alg":"HS256","typ":"JWT"}') + "." + _b64('{"sub":"1234567890","iat":1516239022}')
       + "." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"

# (text as the red team wrote it, the value that must be gone, its category) -- default config
SECRET_MISSES = [
    ("DB_PASSWORD=hunter2hunter2", "hunter2hunter2", "credential"),
    ("POSTGRES_PASSWORD=pgS3cretValue", "pgS3cretValue", "credential"),
    ("SECRET_KEY=django-insecure-3x4mpl3k3y", "django-insecure-3x4mpl3k3y", "credential"),
    ("JWT_SECRET=mysupersecretjwtkey", "mysupersecretjwtkey", "credential"),
    ("GOOGLE_CLIENT_SECRET=GOCSPX-8f7e6d5c4b3a", "GOCSPX-8f7e6d5c4b3a", "credential"),
    (f"aws secret access key: {AWS_SECRET}", AWS_SECRET, "credential"),
    ("cache at redis://:pw12345@cache.example.com:6379/0", "pw12345", "url_password"),
    ("use postgres://u:p@ssw0rd@h/db", "ssw0rd", "url_password"),
    (f"session token {JWT} expires tonight", JWT.split(".")[2], "api_key"),
    (f"Authorization: Bearer {JWT}", JWT.split(".")[1], "api_key"),
    ("Authorization: Bearer 9f8e7d6c5b4a39281716f5e4d3c2b1a0", "9f8e7d6c5b4a39281716f5e4d3c2b1a0",
     "credential"),
]
PII_MISSES = [
    ("call +15551234567 now", "5551234567", "phone"),
    ("WhatsApp +447700900123", "7700900123", "phone"),
    ("card 4111.1111.1111.1111 please", "4111.1111", "credit_card"),
    ("card:\n4111\n1111\n1111\n1111\nthanks", "4111\n1111", "credit_card"),
    ("schreib an jürgen.müller@beispiel.de", "müller@", "email"),
    ("邮箱是 用户@例子.广告", "用户@", "email"),
    ("пишите на иван@пример.рф", "иван@", "email"),
]


@pytest.mark.parametrize("text,value,category", SECRET_MISSES)
def test_reported_secret_formats_are_redacted_by_default(text, value, category):
    res = Firewall().scan_text(text)
    assert value not in res.text, res.text
    assert f"[REDACTED:{category}]" in res.text


@pytest.mark.parametrize("text,value,category", PII_MISSES)
def test_reported_personal_data_formats_are_redacted_when_opted_in(text, value, category):
    res = Firewall(FirewallConfig(pii="redact")).scan_text(text)
    assert value not in res.text, res.text
    assert f"[REDACTED:{category}]" in res.text
    assert Firewall().scan_text(text).text == text  # personal data is still allowed by default


def test_quoted_multi_word_password_goes_whole():
    out = Firewall().scan_text('password="correct horse battery staple"').text
    assert out == 'password="[REDACTED:credential]"'
    for word in ("correct", "horse", "battery", "staple"):
        assert word not in out


def test_password_containing_at_signs_goes_whole():
    out = Firewall().scan_text("postgres://svc:p@ss@word1@db.example.com/app").text
    assert out == "postgres://svc:[REDACTED:url_password]@db.example.com/app"


def test_blocked_error_names_new_formats_but_never_the_value():
    fw = Firewall(FirewallConfig.strict())
    for text, value, category in SECRET_MISSES:
        with pytest.raises(FirewallBlockedError) as info:
            fw.check_text(text)
        assert category in info.value.categories
        assert value not in str(info.value) and text not in str(info.value)


def test_placeholders_and_code_references_are_not_secrets():
    fw = Firewall(FirewallConfig(pii="redact"))
    for text in ["password=${DB_PASSWORD}", "postgres://app:${PGPASSWORD}@db/app",
                 "Authorization: Bearer <token>", "api_key=YOUR_API_KEY", "password = None",
                 "password = os.environ['DB_PASSWORD']", "db.connect(user=user, password=password)",
                 "max_tokens=1024", "the password is something I forgot",
                 "my secret is that I love cake"]:
        assert fw.scan_text(text).findings == (), text


# -- ReDoS: the worst inputs we could think of for each pattern, at the engine's size limit ---
MAX_CHARS = 100_000  # synapse_integrations.core.engine.MAX_TEXT_CHARS


def _fill(unit: str) -> str:
    return (unit * (MAX_CHARS // len(unit) + 1))[:MAX_CHARS]


ADVERSARIAL = {
    "private key, no END": "-----BEGIN RSA PRIVATE KEY-----\n" + _fill("A"),
    "many BEGIN lines": _fill("-----BEGIN A B C PRIVATE KEY-----"),
    "url without host": "x://:" + _fill("@"),
    "many schemes": _fill("ab://c:d"),
    "long authority": "postgres://u:" + _fill("p@:"),
    "key prefixes": _fill("sk-proj-"),
    "almost a JWT": _fill("eyJabcdefghij."),
    "keyword soup": _fill("password_secret_token-key "),
    "keyword operators": _fill("password= password: is "),
    "for clauses": _fill("password for a b c d e "),
    "quotes": "password='" + _fill("'a"),
    "email local parts": _fill("a.b+c-d"),
    "email labels": "a@" + _fill("b-c."),
    "at signs": _fill("a@b."),
    "digits": _fill("4"),
    "digit groups": _fill("4111 "),
    "dotted digits": _fill("12.34."),
    "phone groups": "+1" + _fill(" 23"),
    "parens": _fill("(0)1 "),
    "ssn-like": _fill("123-45-"),
    "named numbers": _fill("call ssn tel 1"),
    "unicode": _fill("用户@例子.广告 δοκιμή "),
    "spaces after ssn": "ssn" + _fill(" ")[:-12] + "x 123456789",
    "tabs after password": "password" + _fill(" \t")[:-10] + "x hunter2",
    "spaces after a header": "Authorization:" + _fill(" ")[:-20] + "Bearer",
    "spaces after call": "call" + _fill(" ")[:-12] + "4155550132",
    "password for words": "password for" + _fill(" a") + " is",
    "mysql flags": "mysql" + _fill(" -u"),
    "putty lines": "Private-Lines: 9\n" + _fill("AAAA\n"),
    "age keys": _fill("AGE-SECRET-KEY-1"),
    "query strings": "?api_key=" + _fill("a&b"),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_no_pattern_backtracks_badly(name):
    text = ADVERSARIAL[name]
    for category, find in DETECTORS:
        t0 = time.perf_counter()
        for _ in find(text):
            pass
        elapsed = time.perf_counter() - t0
        # a linear scan of 100 000 characters takes milliseconds; quadratic ones take minutes
        assert elapsed < 2.0, (name, category, elapsed)


def test_metadata_values_under_a_credential_name_are_credentials():
    fw = Firewall()
    meta = {"password": "hunter", "DB_PASSWORD": "letmein", "apiKey": "abc",
            "nested": [{"client_secret": "zz top"}], "Authorization": "Basic ZGFuYTpwdw==",
            "token_count": "512", "secret_name": "prod/db", "passport": "X1234567",
            "password2": "None", "note": "plain words"}
    out = fw.check_value(meta)
    for key in ("password", "DB_PASSWORD", "apiKey", "Authorization"):
        assert out[key] == "[REDACTED:credential]", key
    assert out["nested"] == [{"client_secret": "[REDACTED:credential]"}]
    for key in ("token_count", "secret_name", "passport", "password2", "note"):
        assert out[key] == meta[key], key
    with pytest.raises(FirewallBlockedError) as info:
        Firewall(FirewallConfig(secrets="block")).check_value({"pwd": "hunter"})
    assert info.value.categories == ("credential",) and "hunter" not in str(info.value)
    assert Firewall(FirewallConfig(overrides={"credential": "allow"})).check_value(
        {"password": "hunter"}) == {"password": "hunter"}


def test_engine_stores_redacted_metadata_credentials(tmp_path):
    from synapse_integrations import Synapse

    from _safety_helpers import HashEmbedder

    mem = Synapse(tmp_path / "m", embedder=HashEmbedder())
    i = mem.add_turn("the new staging database is up, JWT_SECRET=mysupersecretjwtkey",
                     metadata={"db": {"user": "app", "password": "hunter"}})
    node = mem.get(i)
    assert node["text"] == "the new staging database is up, JWT_SECRET=[REDACTED:credential]"
    assert node["metadata"] == {"db": {"user": "app", "password": "[REDACTED:credential]"}}
    mem.close()
    for f in (tmp_path / "m").rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert b"mysupersecretjwtkey" not in data and b"hunter" not in data, f
