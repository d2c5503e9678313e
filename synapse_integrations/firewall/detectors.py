"""The firewall's detectors: each finds the spans of one category in a text.

Every detector is a function ``text -> iterator of (start, end)``; :data:`DETECTORS` lists
them in priority order (an earlier detector wins where two overlap). Patterns are written so
that no input makes them backtrack badly (no nested quantifiers over overlapping classes,
bounded repetitions); ``tests/firewall/test_firewall_corpus.py`` times them on adversarial inputs of
the largest accepted turn size.

Phone numbers written with a country code are checked with ``phonenumbers`` (Google's
libphonenumber metadata: is the country code real, is the length possible there?); every
other detector is a pattern plus a check written here (Luhn and issuer ranges for cards, the
SSA's rules for SSNs; placeholders and code references for the keyword credentials of
:mod:`.credentials`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import lru_cache

from .credentials import find_credentials, is_placeholder

# is_credential_name is public API (synapse_integrations.firewall): re-exported from here
from .credentials import is_credential_name as is_credential_name

Spans = Iterator[tuple[int, int]]

# -- private keys ------------------------------------------------------------------------
_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*\Z)",  # cut off: to the end
    re.DOTALL,
)


# the private half of a PuTTY .ppk file, and age's secret keys
_PUTTY_PRIVATE = re.compile(
    r"Private-Lines: \d{1,3}\r?\n(?:[A-Za-z0-9+/=]{1,128}(?:\r?\n|\Z)){1,64}"
    r"(?:Private-(?:MAC|Hash): [0-9a-fA-F]{1,128})?"
)
_AGE_SECRET = re.compile(r"AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}(?![A-Z0-9])")


def find_private_keys(text: str) -> Spans:
    """PEM / OpenSSH / PGP private key blocks (a block without its END line runs to the end),
    the private lines of PuTTY key files, age secret keys."""
    if "PRIVATE KEY" in text:
        yield from (m.span() for m in _PRIVATE_KEY.finditer(text))
    if "Private-Lines:" in text:
        yield from (m.span() for m in _PUTTY_PRIVATE.finditer(text))
    if "AGE-SECRET-KEY-" in text:
        yield from (m.span() for m in _AGE_SECRET.finditer(text))


# -- passwords in URLs -------------------------------------------------------------------
# scheme://user:password@host -- the password runs to the *last* "@" of the authority, so a
# password containing "@" or ":" goes whole; the user name may be empty (redis://:pw@host).
_URL_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}://"
    r"[^\s:/?#@\[\]]*:(?P<v>[^\s/?#]+)@(?=[^\s/?#@:])"
)


def find_url_passwords(text: str) -> Spans:
    """The password part of ``scheme://user:password@host`` URLs (not placeholders)."""
    if "://" not in text:
        return
    for m in _URL_PASSWORD.finditer(text):
        if not is_placeholder(m.group("v")):
            yield m.span("v")


# -- provider API keys and tokens ----------------------------------------------------------
_API_KEY = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"sk-(?:proj-|svcacct-|admin-|ant-(?:api|admin)\d\d-)?[A-Za-z0-9_-]{20,}"   # OpenAI, Anthropic
    r"|(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA)[0-9A-Z]{16}"  # AWS key ids
    r"|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}"                 # GitHub
    r"|gl(?:pat|dt|rt|ptt|ft|cbt|oas)-[0-9A-Za-z_-]{20,}"                      # GitLab
    r"|(?:xoxe\.)?xox[abposre]-[A-Za-z0-9-]{10,}"                             # Slack
    r"|AIza[0-9A-Za-z_-]{35}|ya29\.[0-9A-Za-z_-]{20,}"                         # Google
    r"|(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}|whsec_[A-Za-z0-9+/=]{24,}"     # Stripe
    r"|SK[0-9a-f]{32}"                                                         # Twilio
    r"|SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}"                         # SendGrid
    r"|npm_[A-Za-z0-9]{36}|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"             # npm, PyPI
    r"|hf_[A-Za-z0-9]{30,}"                                                    # Hugging Face
    r"|[0-9a-f]{32}-us\d{1,2}"                                                 # Mailchimp
    r"|sq0(?:atp|csp)-[0-9A-Za-z_-]{22,}"                                      # Square
    r"|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"                                     # Shopify
    r"|do[opr]_v1_[a-f0-9]{64}"                                                # DigitalOcean
    r"|gsk_[A-Za-z0-9]{48,}"                                                   # Groq
    r"|dapi[a-f0-9]{32}(?:-\d)?"                                               # Databricks
    r"|PMAK-[a-f0-9]{24}-[a-f0-9]{34}"                                         # Postman
    r"|lin_api_[A-Za-z0-9]{40}"                                                # Linear
    r"|r8_[A-Za-z0-9]{37}"                                                     # Replicate
    r"|\d{8,10}:AA[A-Za-z0-9_-]{33}"                                           # Telegram bot
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"             # JWT
    r"|https://(?:hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{20,}"
    r"|(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d{5,25}/[A-Za-z0-9_-]{20,})"
    r")(?![A-Za-z0-9_-])"
)


# every alternative above contains one of these; a text with none of them is skipped
_API_KEY_LITERALS = (
    "sk-", "sk_", "rk_", "AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA",
    "APKA", "AROA", "gh", "github_pat_", "gl", "xox", "AIza", "ya29.", "whsec_", "SK", "SG.",
    "npm_", "pypi-", "hf_", "-us", "sq0", "shp", "_v1_", "gsk_", "dapi", "PMAK-", "lin_api_",
    "r8_", ":AA", "eyJ", "https://")


def find_api_keys(text: str) -> Spans:
    """Tokens recognisable by their own format (provider prefixes, JWTs, webhook URLs)."""
    if not any(lit in text for lit in _API_KEY_LITERALS):
        return
    for m in _API_KEY.finditer(text):
        v = m.group()
        # a random key has a digit; "sk-learn-compatible-estimators" has none
        if v.startswith("sk-") and not any(c.isdigit() for c in v):
            continue
        yield m.span()


# -- e-mail addresses -------------------------------------------------------------------------
# Unicode letters and digits (\w without "_") plus the combining marks of the scripts whose
# vowel signs \w misses (Devanagari, Bengali, Tamil, Thai, ...).
_MARKS = ("\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0900-\u0dff"
          "\u0e31-\u0e4e\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f")
_LD = rf"(?:[^\W_]|[{_MARKS}])"          # letter, digit or mark
_EMAIL = re.compile(
    rf"(?<![\w.+%'/{_MARKS}-])(?P<v>(?:[\w.+%'-]|[{_MARKS}]){{1,64}}@"
    rf"(?:{_LD}(?:(?:[\w-]|[{_MARKS}]){{0,61}}{_LD})?\.)+"
    rf"(?:(?:[^\W\d_]|[{_MARKS}]){{2,24}}|xn--[a-z0-9-]{{1,59}}))"
    rf"(?![\w{_MARKS}-])"
)
_RETINA = re.compile(r"\d+(?:\.\d+)?x\.", re.IGNORECASE)  # icon@2x.png


def find_emails(text: str) -> Spans:
    """E-mail addresses, Unicode (internationalised) ones included."""
    if "@" not in text:
        return
    for m in _EMAIL.finditer(text):
        v = m.group("v")
        local, _, domain = v.partition("@")
        if local[0] in ".'" or local[-1] == "." or ".." in local or _RETINA.match(domain):
            continue
        end = m.end()
        if text[end:end + 1] == ":" and text[end + 1:end + 2] not in ("", " ", "\n", "\t"):
            continue  # git@github.com:org/repo.git
        yield m.span("v")


# -- payment cards ------------------------------------------------------------------------------
_CARD = re.compile(
    r"(?<![\w.,+-])(?P<v>[2-6]\d{12,18}"
    r"|[2-6]\d{3}(?:(?:[ .-]|\r?\n)\d{2,6}){2,5})"
    r"(?![\w-]|[.,]\d)"
)
_SEPARATORS = re.compile(r"\r?\n|[ .-]")


def luhn_ok(digits: str) -> bool:
    """The Luhn checksum of a digit string (card numbers).

    >>> luhn_ok("4111111111111111"), luhn_ok("4111111111111112")
    (True, False)
    """
    total = 0
    for k, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if k % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def card_issuer_ok(d: str) -> bool:
    """Is this digit string a length that the issuer of its prefix uses?"""
    n = len(d)
    p2, p4 = int(d[:2]), int(d[:4])
    if d[0] == "4":                                   # Visa
        return n in (13, 16, 19)
    if 51 <= p2 <= 55 or 2221 <= p4 <= 2720:          # Mastercard
        return n == 16
    if p2 in (34, 37):                                # American Express
        return n == 15
    if 2200 <= p4 <= 2204:                            # Mir
        return 16 <= n <= 19
    if 3528 <= p4 <= 3589:                            # JCB
        return 16 <= n <= 19
    if 300 <= int(d[:3]) <= 305 or p2 in (36, 38, 39) or p4 == 3095:  # Diners Club
        return 14 <= n <= 19
    if p4 == 6011 or 644 <= int(d[:3]) <= 649 or p2 in (60, 62, 65, 81, 82):  # Discover, UnionPay, RuPay
        return 16 <= n <= 19
    if p2 in (50, 56, 57, 58, 63, 67):                # Maestro
        return 12 <= n <= 19
    return False


def _digits_in(text: str) -> int:
    return sum(map(text.count, "0123456789"))


def find_cards(text: str) -> Spans:
    """Card numbers: 13-19 digits passing the Luhn check and the issuer's length, written
    together or in groups separated by spaces, dashes, dots or line breaks (one kind)."""
    if _digits_in(text) < 13:
        return
    for m in _CARD.finditer(text):
        v = m.group("v")
        if len({" " if s[-1] == "\n" else s for s in _SEPARATORS.findall(v)}) > 1:
            continue
        d = "".join(c for c in v if c.isdigit())
        if 13 <= len(d) <= 19 and luhn_ok(d) and card_issuer_ok(d):
            yield m.span("v")


# -- US social security numbers -----------------------------------------------------------------
_SSN_VALID = r"(?!000|666|9\d\d)\d{3}(?P<s>[- ]?)(?!00)\d{2}(?P=s)(?!0000)\d{4}"
_SSN = re.compile(r"(?<![\w-])(?P<v>(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4})(?![\w-])")
_SSN_NAMED = re.compile(
    r"(?i)\b(?:ssn|social[ -]security(?:[ -](?:number|no\.?|#))?)"
    r"[ \t]{0,3}(?:#[ \t]{0,3})?(?:(?:[:=]|is\b)[ \t]{0,3})?[\"']?"
    r"(?<![\w-])(?P<v>" + _SSN_VALID + r")(?![\w-])"
)


def find_ssns(text: str) -> Spans:
    """SSNs written 123-45-6789 anywhere, or 123 45 6789 / 123456789 right after "SSN"."""
    if _digits_in(text) < 9:
        return
    if "-" in text:
        for m in _SSN.finditer(text):
            yield m.span("v")
    lowered = text.lower()
    if "ssn" in lowered or "social" in lowered:
        for m in _SSN_NAMED.finditer(text):
            yield m.span("v")


# -- phone numbers ----------------------------------------------------------------------------
_PHONE = re.compile(
    r"(?<![\w+./-])(?P<v>"
    r"(?:\+|\b00)[1-9]\d{0,3}(?:[ .-]?\(\d{1,5}\)\d{0,8}|[ .-]\d{1,8}){1,6}"    # +44 20 7946 0958
    r"|\+[1-9]\d{6,14}"                                                       # +15551234567
    r"|1[ .-][2-9]\d{2}[ .-][2-9]\d{2}[ .-]\d{4}"                             # 1-800-555-0199
    r"|(?:\([2-9]\d{2}\)[ .-]?|[2-9]\d{2}[ .-])[2-9]\d{2}[ .-]\d{4}"          # (415) 555-0132
    r"|(?:\(0[1-9]\d{0,3}\)|0[1-9]\d{0,3})(?:[ .-]\d{2,8}){1,4}"              # 030 12345678
    r")(?![\w/-]|[.,:]\d)"
)
_PHONE_NAMED = re.compile(
    r"(?i)\b(?:call|phone|tel|mobile|cell|whatsapp|sms|text me|fax|ring)\b[^\d\n+]{0,15}?"
    r"(?<![\w+])(?P<v>\+?\d{10,13})(?![\w-]|[.,]\d)"
)
_PHONE_WORDS = ("call", "phone", "tel", "mobile", "cell", "whatsapp", "sms", "text me", "fax", "ring")
_NANP = re.compile(r"1?[2-9]\d{2}[2-9]\d{6}")


@lru_cache(maxsize=1)
def _phonenumbers():
    import phonenumbers

    return phonenumbers


def _international_ok(digits: str) -> bool:
    pn = _phonenumbers()
    try:
        num = pn.parse("+" + digits, None)
    except pn.NumberParseException:
        return False
    return pn.is_possible_number(num)


def _phone_ok(v: str) -> bool:
    d = "".join(c for c in v if c.isdigit())
    if v.startswith("+") or v.startswith("00"):
        if v.startswith("00"):
            d = d[2:]
        return 8 <= len(d) <= 15 and _international_ok(d)
    if v.startswith(("0", "(0")):
        seps = {c for c in v.lstrip("(0123456789)") if not c.isdigit()}
        return 10 <= len(d) <= 12 and len(seps) <= 1
    return len(d) in (10, 11)  # North American


def find_phones(text: str) -> Spans:
    """Phone numbers: with a country code (``+``/``00``, checked against libphonenumber's
    metadata), North American ``(415) 555-0132``, national numbers with a trunk ``0`` in
    groups, and bare 10-13 digit numbers right after "call", "phone", "tel"..."""
    if _digits_in(text) < 8:
        return
    for m in _PHONE.finditer(text):
        if _phone_ok(m.group("v")):
            yield m.span("v")
    lowered = text.lower()
    if not any(w in lowered for w in _PHONE_WORDS):
        return
    for m in _PHONE_NAMED.finditer(text):
        v = m.group("v")
        if v.startswith("+") and _phone_ok(v) or _NANP.fullmatch(v) or re.fullmatch(r"0[1-9]\d{8,10}", v):
            yield m.span("v")


#: (category, detector) in priority order: where two findings overlap, the earlier wins.
DETECTORS: tuple[tuple[str, Callable[[str], Spans]], ...] = (
    ("private_key", find_private_keys),
    ("url_password", find_url_passwords),
    ("api_key", find_api_keys),
    ("credential", find_credentials),
    ("email", find_emails),
    ("credit_card", find_cards),
    ("ssn", find_ssns),
    ("phone", find_phones),
)
