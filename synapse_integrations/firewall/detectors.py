"""The firewall's detectors: each finds the spans of one category in a text.

Every detector is a function ``text -> iterator of (start, end)``; :data:`DETECTORS` lists
them in priority order (an earlier detector wins where two overlap). Patterns are written so
that no input makes them backtrack badly (no nested quantifiers over overlapping classes,
bounded repetitions); ``tests/test_firewall_corpus.py`` times them on adversarial inputs of
the largest accepted turn size.

Phone numbers written with a country code are checked with ``phonenumbers`` (Google's
libphonenumber metadata: is the country code real, is the length possible there?); every
other detector is a pattern plus a check written here (Luhn and issuer ranges for cards, the
SSA's rules for SSNs, placeholders and code references for keyword credentials).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import lru_cache

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


# -- credentials named by a keyword ----------------------------------------------------------
# password=..., DB_PASSWORD=..., "client_secret": "...", the password is ..., Bearer ...
_CRED_KEYWORD = re.compile(  # matched against the lower-cased text
    r"(?:secret[ _-]?access[ _-]?key"
    r"|(?:secret|access|private|signing|encryption|master|client|api|auth|refresh|session|bearer"
    r"|account)[ _-]?(?:key|token|secret)"
    r"|(?:wi-?fi|wpa2?|network|license|licence|product|recovery|activation)[ _-]?key"
    r"|passw(?:or)?d|passphrase|passcode|pwd|secret|token|apikey|credentials?|authorization"
    r"|bearer|pass|pw)"
)
# what may follow the keyword inside the same name: SECRET_KEY_BASE, PASSWORD2
_CRED_NAME_SUFFIX = re.compile(r"(?i)(?:[_-]?(?:base|value|\d{1,3}))?")
# from the end of the name to the value: a closing quote, "for the cabin", the operator
_CRED_OPERATOR = (r"""(?P<sp1>[ \t]*)(?P<op>:=|=>|==|[:=])(?P<sp2>[ \t]*)"""
                  r"""|[ \t]+(?P<verb>is|was|are|to)[ \t]*:?[ \t]*""")
_CRED_SEPARATOR = re.compile(r"""["'`]?\]?(?:""" + _CRED_OPERATOR + r"""|(?P<space>[ \t]+))""")
# "the wifi password for the cabin is ...": up to four words between the keyword and "is"
_CRED_FOR_SEPARATOR = re.compile(
    r"""[ \t]+(?:for|of|on|to)[ \t]+[^\s:="']{1,30}(?:[ \t]+[^\s:="']{1,30}){0,3}?"""
    r"""(?:""" + _CRED_OPERATOR + r""")"""
)
_AUTH_SCHEME = re.compile(r"(?i)(?:bearer|basic|token|bot|digest|apikey|key)[ \t]+")
_CRED_VALUE = re.compile(
    r""""(?P<dq>[^"\n]{0,200})"|'(?P<sq>[^'\n]{0,200})'|`(?P<bq>[^`\n]{0,200})`"""
    r"""|(?P<uv>[^\s"'`]{1,300})"""
)
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_QUERY_NEXT = re.compile(r"[&;][A-Za-z_][\w.-]{0,40}=")  # ?a=1&b=2, Server=x;Password=y;Db=z
_CLOSING = {")": "(", "]": "[", "}": "{", ">": "<"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REFERENCE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?P<call>[(\[].*)?")
_PLACEHOLDER_WORDS = frozenset("""none null nil true false undefined empty required optional hidden
    redacted masked unset n/a na tbd todo str string bytes int bool any secretstr password passwd
    secret token key value""".split())


def is_placeholder(value: str) -> bool:
    """``${DB_PASSWORD}``, ``<password>``, ``****``, ``YOUR_API_KEY``, ``None``...: not a secret."""
    v = value.strip()
    if not v:
        return True
    if v[0] in "$<[{%" or "${" in v or "{{" in v or "%(" in v:
        return True
    if all(c in "*xX•.#_-" for c in v):
        return True
    if v[0] == "!" and v[1:].isalpha():  # a YAML tag: password: !vault |
        return True
    core = v.strip("()[]{}<>").lower()
    if core in _PLACEHOLDER_WORDS:
        return True
    if v.isupper() and "_" in v and not any(c.isdigit() for c in v):  # YOUR_API_KEY, DB_PASSWORD
        return True
    return False


def _looks_secret(v: str) -> bool:
    """Does a value given in prose ("the password is X") look like a password or token?"""
    if len(v) < 6 or not any(c.isalpha() for c in v):
        return False
    return any(c.isdigit() or not (c.isalnum() or c in "-'_.") for c in v)


_CRED_ANCHORS = ("pass", "pw", "secret", "token", "key", "credential", "authorization", "bearer")
_CRED_MARGIN = 24  # longer than any keyword: a window around an anchor holds its keyword


# mysql -u root -p'secret' (the password glued to -p)
_MYSQL_P = re.compile(
    r"(?<![\w-])(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n]{0,80}?[ \t]-p"
    r"""(?:'(?P<sq>[^'\n]{1,100})'|"(?P<dq>[^"\n]{1,100})"|(?P<uv>[^\s'"-][^\s'"]{0,99}))"""
)


def find_credentials(text: str) -> Spans:
    """Values named by a keyword: ``password=...``, ``.env`` names ending in PASSWORD, SECRET,
    TOKEN, API_KEY...; JSON/YAML keys; "the password is ..."; Authorization / Bearer headers;
    ``mysql -p'...'``."""
    lowered = text.lower()
    if "mysql" in lowered or "mariadb" in lowered:
        for m in _MYSQL_P.finditer(text):
            group = next(g for g in ("sq", "dq", "uv") if m.group(g) is not None)
            if not is_placeholder(m.group(group)):
                yield m.span(group)
    if len(lowered) != len(text):  # a few characters change length when lower-cased
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    # the keyword regex runs only in windows around the anchors (str.find is much faster)
    windows: list[list[int]] = []
    for anchor in _CRED_ANCHORS:
        i = lowered.find(anchor)
        while i != -1:
            windows.append([max(0, i - _CRED_MARGIN), i + len(anchor) + _CRED_MARGIN])
            i = lowered.find(anchor, i + 1)
    if not windows:
        return
    windows.sort()
    merged = [windows[0]]
    for lo, hi in windows[1:]:
        if lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    for lo, hi in merged:
        for m in _CRED_KEYWORD.finditer(lowered, lo, hi):
            span = _credential_value(text, m.start(), m.end())
            if span is not None:
                yield span


def _credential_value(text: str, kw_start: int, kw_end: int) -> tuple[int, int] | None:
    pos = kw_end
    kw_text = text[kw_start:kw_end]
    kw = kw_text.lower()
    # the whole name the keyword sits in: DB_PASSWORD, settings.password, jwtSecret
    start = kw_start
    while start > 0 and kw_start - start < 60 and text[start - 1] in _NAME_CHARS:
        start -= 1
    prefix = text[start:kw_start]
    if start > 0 and text[start - 1] in "/\\$":  # /etc/passwd, $PASSWORD
        return None
    pos = _CRED_NAME_SUFFIX.match(text, pos).end()
    suffix_len = pos - kw_end
    if pos < len(text) and (text[pos].isalnum() or text[pos] == "_"
                            or (text[pos] in "-." and pos + 1 < len(text)
                                and text[pos + 1].isalnum())):
        return None  # password_hash, tokens, passport, token.encode
    if kw in ("pass", "pw") and prefix and prefix[-1] not in "_.-":
        return None  # bypass, compass
    sep = _CRED_FOR_SEPARATOR.match(text, pos) or _CRED_SEPARATOR.match(text, pos)
    if sep is None:
        return None
    bare = sep.re is _CRED_SEPARATOR and sep.group("space") is not None
    flag = prefix.startswith("-")  # --client-secret X, --password X
    if bare and not (flag or kw.startswith(("passw", "passphrase")) or "bearer" in kw):
        return None  # "password Tr0ub4dor&3x", "Bearer abc...", "--token abc" only
    pos = sep.end()
    header = kw == "authorization" or "bearer" in kw
    if kw == "authorization":
        if sep.group("op") is None:
            return None
        scheme = _AUTH_SCHEME.match(text, pos)
        if scheme:
            pos = scheme.end()
    val = _CRED_VALUE.match(text, pos)
    if val is None:
        return None
    quoted = val.group("uv") is None
    if quoted:
        name = "dq" if val.group("dq") is not None else "sq" if val.group("sq") is not None else "bq"
        vs, ve = val.span(name)
        value = val.group(name)
        if len(value.strip()) < 4 or is_placeholder(value):
            return None
        return vs, ve
    vs, ve = val.span("uv")
    raw = val.group("uv")
    cut = _QUERY_NEXT.search(raw)  # ?api_key=abc&limit=10
    value = raw[:cut.start()] if cut else raw
    value = value.rstrip(".,;:")
    while value and value[-1] in _CLOSING and value.count(value[-1]) > value.count(_CLOSING[value[-1]]):
        value = value[:-1].rstrip(".,;:")  # "(password: abc123)" -- an unbalanced bracket
    if not value or is_placeholder(value):
        return None
    if value[0] == "/" or value.startswith(("~/", "./")):  # PWD=/home/dana
        return None
    ref = _REFERENCE.fullmatch(value)
    if ref and ("." in value or ref.group("call")):
        return None  # settings.OPENAI_API_KEY, os.environ[, getpass()
    spaced_assignment = sep.group("op") == "=" and bool(sep.group("sp1") or sep.group("sp2"))
    argument = raw[len(value):len(value) + 1] in (",", ")")
    code_style = spaced_assignment or argument  # x = value, f(password=value)
    if code_style and _IDENTIFIER.fullmatch(value) and not any(c.isdigit() for c in value):
        return None  # user.password = hashed; login(password=pw)
    compound = bool(prefix) or suffix_len > 0 or any(c in kw for c in "_-") \
        or (kw_text.isupper() and len(kw_text) > 3)
    weak = (not compound and (sep.group("op") != "=" or code_style)) or (bare and not flag)
    if header:
        weak = False
        if len(value) < 8 or not _looks_secret(value) and len(value) < 16:
            return None
    if weak:
        if not _looks_secret(value):
            return None
    elif len(value) < 4 or (value.isdigit() and len(value) < 6):
        return None
    return vs, vs + len(value)


def is_credential_name(name: str) -> bool:
    """Is ``name`` (a metadata key, a form field) the name of a credential: ``password``,
    ``DB_PASSWORD``, ``apiKey``, ``client_secret``, ``Authorization``...? Then the whole value
    stored under it is one, whatever it looks like."""
    if not name or len(name) > 80:
        return False
    low = name.lower()
    if len(low) != len(name):
        return False
    for m in _CRED_KEYWORD.finditer(low):
        if _CRED_NAME_SUFFIX.match(low, m.end()).end() != len(low):
            continue
        prefix = name[:m.start()]
        if any(c not in _NAME_CHARS and c != " " for c in prefix):
            continue
        if m.group() in ("pass", "pw") and prefix and prefix[-1] not in "_.- ":
            continue
        return True
    return False


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
