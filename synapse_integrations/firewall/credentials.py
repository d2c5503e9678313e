"""The firewall's keyword credentials: values that a name marks as secret.

``password=...``, ``.env`` names ending in PASSWORD, SECRET, TOKEN, API_KEY..., JSON/YAML
keys, "the password is ...", ``Authorization`` / ``Bearer`` headers and ``mysql -p'...'``
(:func:`find_credentials`); a metadata key or form field that names a credential
(:func:`is_credential_name`); and the placeholders that are not secrets (``${DB_PASSWORD}``,
``<password>``, ``YOUR_API_KEY``: :func:`is_placeholder`, shared with the URL password
detector in :mod:`.detectors`). Like every detector, the patterns are bounded so that no
input makes them backtrack badly.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

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


def find_credentials(text: str) -> Iterator[tuple[int, int]]:
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
