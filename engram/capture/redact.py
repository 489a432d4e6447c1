"""Secret redaction applied to every string of every event before anything is written.

A tape is immutable and may be shared, so a secret that reaches one can never be taken back:
redaction runs before the first byte is written, on every string of every event. A secret
becomes `[REDACTED:<class>]` and, wherever it has a visible name or context (`API_KEY=…`,
`"password": "…"`, `Authorization: Bearer …`, `postgres://user:…@host`), only the secret part
is replaced so that the transcript stays readable.

Three properties shape the code:

- Speed. Capture must run at >= 100 MB/s and every string passes through here, so the common
  case must cost next to nothing, and in Python the cost is in calls more than in bytes. The
  strings of all the events of a tape are joined and scanned once, lower-cased, for *needles*:
  the places where some rule could match (a keyword such as `token`, a prefix such as `ghp_`),
  on an ASCII view whose offsets are the strings' own. An event with none, most of them, comes
  back as it is; in the others the rules run only at the needles, with `.match`, never
  searching the text again. Strings too short to hold a secret, and ids, hashes and
  timestamps, are not looked at.
- Precision. Source code is full of names like `password`, `token` and `api_key` that hold no
  secret (`password = get_password()`, `API_KEY=${API_KEY}`, `token: str`). Values are checked:
  placeholders, variable references, calls, types and paths stay; names that are only weakly
  secret (`key`, `auth`, `private`) need a value that looks random.
- Idempotence. Redacting redacted text changes nothing and counts nothing, so capture can be
  re-run over its own output. No rule matches inside a `[REDACTED:…]` marker, and a value that
  contains a marker is left alone.

Redaction never raises on a `str`: if a rule ever fails (a bug), the whole string becomes
`[REDACTED:redaction-error]` — failing closed, because a leak cannot be undone and a lost
string can.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from bisect import bisect_right
from collections import Counter
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from engram.errors import BadInput

log = logging.getLogger(__name__)

REPLACEMENT = "[REDACTED:{name}]"
MARK = "[REDACTED:"

# No built-in rule matches fewer characters than this (the shortest is a name, an operator and
# a value, as in `PASSWD=hunter2`), so shorter strings skip them all.
MIN_LEN = 12

# A string made only of these (UUIDs, timestamps, hashes, numbers) holds nothing any built-in
# rule can match: each needs a letter outside a-f, or one of `/ @ _ = "`.
_SAFE_CHARS = "0123456789abcdefABCDEF-:.TZ +"

# Joins the strings of a structure so that they are scanned at once; no rule's match contains it.
_SEP = "\x00"

_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"


class _Lazy:
    """A regular expression compiled when a rule first uses it.

    The ~60 patterns (the needle scanners' and the rules') took ~20 ms to compile, paid by every
    process that imports this module (each `engram ingest`, a 1 MB append among them) though most
    strings hold no needle, most rules never run, and a tape's texts joined are scanned by one
    kind of scanner only (`_LONG`). Each method (`match`, `search`, ...) is the compiled pattern's own, bound and
    kept on this object at its first use, so a later call costs what a call on the pattern does."""

    def __init__(self, pattern: str | bytes, flags: int = 0) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:  # only for what is not set yet: once per name
        if name.startswith("__"):  # (copy and pickle probe for these before __init__ has run)
            raise AttributeError(name)
        compiled = self.__dict__.get("_compiled")
        if compiled is None:
            compiled = self.__dict__["_compiled"] = re.compile(*self._source)
        value = getattr(compiled, name)
        setattr(self, name, value)
        return value


def _lazy(pattern: str | bytes, flags: int = 0) -> Any:
    """`re.compile(pattern, flags)`, compiled at first use (`_Lazy`)."""
    return _Lazy(pattern, flags)


class Span(NamedTuple):
    """A stretch of a string to replace with the marker of `cls`."""

    start: int
    end: int
    cls: str


# ---------------------------------------------------------------- scanning

# The needles: every place where a rule could match, found on the lower-cased ASCII view of the
# text. Grouped by a first literal (the anchor); each group names its needle and `_BACK` says
# how far before the group the needle starts. Words that only look like keywords are not
# needles (`keys`, `keyword`, `tokens`, `tokenizer`, `passed`, `author`, `authenticate`), nor
# is a keyword that no operator follows (`for key in`, `self.token.strip()`): a secret's name is
# followed by `=` or `:`. Matching is case-blind here; the rules check case where it matters
# (`AKIA`, `SG.`, `eyJ`). A needle's group opens after the first character of its branch, never
# before it (`_BACK` counts from the group's start): `re` passes over a branch whose first item is
# a character or a class the text does not have there, but enters each branch that opens with a
# group (measured: the scan of a tape's texts ~15% faster, `_BACK` one more for each such needle).
# What follows a secret's name: the rest of the name, a closing quote, an operator.
_OP = rb"(?=[a-z0-9_.\-]{0,60}+\\?[\"']?[ \t]*+[:=])"  # possessive: a name never gives back
# After a credential word with no operator (`the API key is …`, `--token …`): a run of 20
# characters a token is made of, a word or two further on at most. Only where one follows does
# the fallback rule (`CredentialWordRule`) look, so prose about tokens costs nothing.
_FALL = rb"(?=[ \t\"'`:=,(]{1,4}+(?:(?:is|was|now|here)[ \t\"'`:]{1,3}+)?[a-z0-9+/_\-]{20})"
_ANCHORS: tuple[tuple[bytes, bytes], ...] = (
    (rb"k", rb"e(?P<key>y)(?!s\(|s\b|word|board|frame|up|down|press|of\b|code|event|ring|chain)" + _OP +
            rb"|e(?P<token>n)(?<=token)(?!s|i[sz])" + _OP + rb"|-(?P<sk>)(?<=sk-)|_(?P<stripe>(?:live|test)_)"
            rb"|s(?P<slackhook>\.slack\.com/)(?<=hooks\.slack\.com/)|i(?P<akia>a)(?<=akia)"
            rb"|(?P<twsk>)(?<=sk)(?=[0-9a-f]{32})"
            rb"|en(?<=token)(?P<tokenw>)" + _FALL + rb"|ey(?:(?<=api.key)|(?<=apikey))(?P<keyw>)" + _FALL),
    (rb"p", rb"a(?P<pass>ss)(?=w|phrase|[^a-z])" + _OP + rb"|w(?P<pwd>d)" + _OP +
            rb"|m(?P<npm>_)(?<=npm_)|i(?P<dapi>)(?<=dapi)|r(?P<private>ivate)(?=[_\-=:\"'])" + _OP +
            rb"|ass(?:word|wd|phrase)(?P<passw>)" + _FALL +
            rb"|ass(?:word|wd)(?:(?<=--password)|(?<=--passwd))(?P<passflag>)(?=[ \t]++[^\s$<{\[])"),
    (rb"h", rb"[pousr](?P<gh>_)(?<=gh[pousr]_)|u(?P<ghpat>b_pat_)(?<=github_pat_)|f(?P<hf>_)"
            rb"|(?P<auth>)(?<=auth)(?!or(?!ization)|enti)" + _OP),
    (rb"x", rb"o(?P<xox>x[abposr]-)|a(?P<xapp>pp-)"),
    (rb"g", rb"l(?P<gl>(?:pat|dt|rt|ptt|soat|cbt)-)|\.(?P<sg>[a-z0-9_\-]{22}\.)(?<=sg\.[a-z0-9_\-]{22}\.)"
            rb"|i(?P<pem>n )(?<=-----begin )"),
    (rb"cre", rb"t(?P<secret>)(?<=secret)" + _OP + rb"|d(?P<credential>ential)" + _OP
              + rb"|t(?<=secret)(?P<secretw>)" + _FALL + rb"|dentials?(?P<credw>)" + _FALL),
    (rb":", rb"/(?P<url>/)"),
    (rb"j", rb"(?P<jwt>)(?<=eyj)"),
    (rb"z", rb"a(?P<aiza>)(?<=aiza)"),
    (rb"i", rb"a(?P<asia>)(?<=asia)"),
    # a Twilio account SID, `AC` + 32 hex: found from its `c` (rarer than `a`, and a first
    # character the scanner tries anyway for `cre`); measured: the `ac` anchor cost 10% of speed
    (rb"c", rb"(?P<twac>)(?<=ac)(?=[0-9a-f]{32})"),
)
_BACK = {"key": 2, "token": 4, "sk": 3, "stripe": 3, "slackhook": 5, "akia": 3, "pass": 2, "pwd": 2, "npm": 3,
         "dapi": 4, "private": 2, "gh": 3, "ghpat": 5, "hf": 2, "auth": 4, "xox": 2, "xapp": 2, "gl": 2, "sg": 3,
         "secret": 6, "credential": 4, "url": 2, "jwt": 3, "aiza": 4, "asia": 4, "pem": 9, "twsk": 2, "twac": 2,
         "tokenw": 0, "keyw": 0, "passw": 0, "secretw": 0, "credw": 0, "passflag": 0}
# Two ways to search for them, equivalent in what they find. One alternation of all groups:
# `re` skips positions by their first character and it is one call per text, the better deal
# for short texts (most strings are short and a call costs more than their bytes). One pattern
# per group: each starts with a literal, which `re` finds several times faster per byte, the
# better deal for long texts.
_SCANNER = _lazy(b"|".join(anchor + b"(?:" + rest + b")" for anchor, rest in _ANCHORS))
_SCANNERS = tuple(_lazy(anchor + b"(?:" + rest + b")") for anchor, rest in _ANCHORS)
_LONG = 1024  # measured: per-anchor patterns win from about 1 KiB

Hits = dict[str, list[int]]


def _scan(lb: bytes) -> Hits:
    """Where each needle starts in the text whose lower-cased ASCII view is `lb`."""
    hits: Hits = {}
    for pattern in (_SCANNERS if len(lb) > _LONG else (_SCANNER,)):
        for m in pattern.finditer(lb):
            name = m.lastgroup
            if name is not None:
                hits.setdefault(name, []).append(m.start(name) - _BACK[name])
    for positions in hits.values():
        positions.sort()
    return hits


class _Text:
    """A string, its lower-cased ASCII view and the needles found in it, each computed once and
    only when asked for: capture hands over the needles a whole tape's scan found, and then only
    two rules look at the view (a copy of every text with a needle, made for nothing)."""

    __slots__ = ("s", "_lb", "_hits")

    def __init__(self, s: str) -> None:
        self.s = s
        self._lb: bytes | None = None
        self._hits: Hits | None = None

    @property
    def lb(self) -> bytes:
        """One byte per character (non-ASCII becomes `?`), so view offsets are `str` offsets."""
        if self._lb is None:
            self._lb = self.s.encode("ascii", "replace").lower()
        return self._lb

    @property
    def hits(self) -> Hits:
        if self._hits is None:
            self._hits = _scan(self.lb)
        return self._hits


# ---------------------------------------------------------------- value checks

_PLACEHOLDER_WORDS = frozenset("""
none null nil undefined true false yes no on off n/a na tbd todo fixme changeme change_me changeit
example sample dummy fake placeholder redacted secret secrets password passwd pass pwd token key
apikey api_key api-key your_key your-key yourkey mykey my_key value string str int bool bytes
optional any object number required env default test testing read write enabled disabled
""".split())  # read/write: access levels, as in GitHub Actions' `id-token: write`; enabled: a flag's state
_PLACEHOLDER_PARTS = ("your", "example", "placeholder", "changeme", "change_me", "replace_me", "replaceme",
                      "insert", "xxxx", "****", "....", "redacted", "dummy", "<", ">", "{{", "}}", "…")

_IDENT = _lazy(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TEMPLATE = _lazy(r"\{[A-Za-z0-9_.]*\}|%[sdr]|%\(\w+\)")
_DOTTED = _lazy(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+\Z", re.ASCII)
_UUID = _lazy(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")
_HEX = _lazy(r"[0-9a-fA-F]+\Z")
_TYPE_NAMES = frozenset("str string int integer float number bool boolean bytes any object list dict "
                        "array map none null void unknown never optional secretstr char "
                        "uint8array arraybuffer buffer cryptokey cryptokeypair keyobject bigint".split())
_WORDS_JOINED = _lazy(r"[A-Za-z]+(?:[-_][A-Za-z]+)+\Z")  # Entire-Checkpoint, read_only


def is_placeholder(value: str) -> bool:
    """A value that stands for a secret rather than being one: `${API_KEY}`, `<your-key>`, `xxx`."""
    v = value.strip().strip("\"'`")
    if len(v) < 3 or MARK in v:
        return True
    if v[0] in "$%" or v.startswith(("{{", "<", "[", "os.environ", "process.env", "env(", "ENV[")):
        return True
    if _TEMPLATE.search(v):
        return True  # format templates: {token}, {}, %s, %(name)s
    low = v.lower()
    if low.rstrip(".,;") in _PLACEHOLDER_WORDS or len(set(low) - set("-_. ")) <= 2:
        return True  # xxx, ***, 0000
    return any(p in low for p in _PLACEHOLDER_PARTS)


def shannon_bits(value: str) -> float:
    """Bits of entropy per character, estimated from the value's own character counts."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


def looks_random(value: str, min_len: int = 16) -> bool:
    """Long, spaceless, of mixed characters: a key or a token rather than a word or identifier."""
    if len(value) < min_len or any(c.isspace() for c in value):
        return False
    classes = (any(c.islower() for c in value) + any(c.isupper() for c in value)
               + any(c.isdigit() for c in value))
    if classes < 2 or len(set(value)) < 8:
        return False
    if (_IDENT.match(value) or _DOTTED.match(value) or _WORDS_JOINED.match(value)) \
            and not any(c.isdigit() for c in value):
        return False  # camelCase, snake_case and kebab-case names, attribute paths
    return shannon_bits(value) >= 3.0


def _token_body_ok(body: str) -> bool:
    """A token's random part: letters and digits, varied; not `xxxx…` nor a slug."""
    return (len(set(body)) >= 8 and any(c.isdigit() for c in body) and any(c.isalpha() for c in body)
            and not is_placeholder(body))


def _mixed_case_ok(body: str) -> bool:
    """For tokens of letters only (Hugging Face): both cases, varied."""
    return (len(set(body)) >= 10 and any(c.islower() for c in body) and any(c.isupper() for c in body)
            and not is_placeholder(body))


# ---------------------------------------------------------------- secret names

_STRONG_PARTS = frozenset(("password", "passwd", "passphrase", "secret", "token", "credential", "credentials",
                           "apikey", "accesskey", "secretkey", "privatekey", "pwd", "pass", "pat"))
_STRONG_ENDINGS = ("password", "passwd", "secret", "token", "apikey", "credentials", "credential", "passphrase")
# `<qualifier> key` names a secret by itself (STRONG: any literal of 4+ characters). Not `shared`
# nor `storage`: `shared-key: lint` (rust-cache in every Rust CI) and `STORAGE_KEY = "app:v1:results"`
# (a localStorage key) are names far more often than a pre-shared or storage account key, and such
# keys are generated, so as WEAK names they are still redacted (dougnukem/orpheus's sessions).
_KEY_QUALIFIERS = frozenset("""
api access secret private auth encryption decryption signing master account client app application
license service session sharedaccess subscription webhook admin sas signature hmac jwt
crypto consumer developer integration management deploy bot write read x
""".split())
_NOT_SECRET_KEY_QUALIFIERS = frozenset("""
public primary foreign sort partition cache lookup unique idempotency dedup dedupe group row object
map dict index hot short shortcut s3 bucket file column table composite natural surrogate range hash
routing message translation i18n react list item entry config registry query search sign ssh gpg
cursor next prev page continuation pagination tab
""".split())
_META_SUFFIXES = frozenset("""
type types name names id ids url uri urls path paths file files dir directory endpoint count
length len size limit max min expiry expires expiration exp at in ttl timeout env var variable
header headers field fields prefix suffix format method methods mode provider providers policy
scope scopes hint label description desc help enabled disabled required optional version kind
algorithm alg location source store storage cache request response status error errors regex
pattern rotation config settings schema index idx usage used budget ratio rate number
options opts params props args service services client manager handler controller guard strategy
module factory dto
""".split())  # the last two lines name objects and types: `authService`, `Web3AuthNoModalOptions`
_NOT_SECRET_NAMES = frozenset({"pwd", "oldpwd", "authorization", "proxy-authorization", "keys", "tokens",
                               "1password"})  # the password manager, as in `error: 1Password: agent returned…`
_CAMEL1 = _lazy(r"([a-z0-9])([A-Z])")
_CAMEL2 = _lazy(r"([A-Z]+)([A-Z][a-z])")
_SPLIT = _lazy(r"[^A-Za-z0-9]+")

WEAK, STRONG = 1, 2


@functools.lru_cache(maxsize=8192)
def name_kind(name: str) -> int:
    """0 for an ordinary name, WEAK (`key`, `auth`, `private`) or STRONG (`password`, `api_key`).

    Why parts and not substrings: `monkey`, `author`, `tokenizer` and `max_tokens` contain a
    keyword but name nothing secret, while `apiKey`, `DB_PASSWD` and `client_secret` do; and a
    name whose last part is metadata (`token_type`, `password_file`, `key_id`) holds no secret.
    """
    bare = _bare_name(name)
    if not bare or bare.lower() in _NOT_SECRET_NAMES:
        return 0
    parts = _split_name(bare)
    if not parts or (len(parts) > 1 and parts[-1] in _META_SUFFIXES):
        return 0
    kind = 0
    for i, p in enumerate(parts):
        if _strong_part(p):
            if (p == "pass" and (len(parts) == 1 or i != len(parts) - 1)) or (p == "pat" and i == 0):
                continue  # `pass: true` in test configs, `pass_at_k`, `pass_rate`; `pat_…` names
            return STRONG
        if p in ("key", "keys"):
            prev = parts[i - 1] if i else ""
            if prev in _KEY_QUALIFIERS:
                return STRONG
            if prev not in _NOT_SECRET_KEY_QUALIFIERS:
                kind = WEAK
        elif p in ("auth", "oauth", "private") or (p.endswith("auth") and len(p) > 4):
            kind = WEAK
    return kind


def _bare_name(name: str) -> str:
    """The name without quotes and sigils, and without its owner: `config.api_key` is `api_key`."""
    return name.strip("-_.$@\"'\\").rsplit(".", 1)[-1]


def _split_name(bare: str) -> list[str]:
    return [p for p in _SPLIT.split(_CAMEL2.sub(r"\1_\2", _CAMEL1.sub(r"\1_\2", bare)).lower()) if p]


def _name_parts(name: str) -> list[str]:
    """`a11yShowPassword` -> [a11y, show, password]; `config.API_KEY` -> [api, key]."""
    return _split_name(_bare_name(name))


def _strong_part(p: str) -> bool:
    """A part that makes a name a secret's by itself (`password`, `apikey`, `…token`)."""
    return p in _STRONG_PARTS or p.endswith(_STRONG_ENDINGS)


def _secret_part(p: str) -> bool:
    return _strong_part(p) or p in ("key", "keys")


_LOOKUP_PIECE = _lazy(r"[a-z]{2,24}|v?\d{1,3}|\d{1,2}[a-z]{1,4}")
_LOOKUP_SPLIT = _lazy(r"[_\-:./]")
_PROSE_WORD = _lazy(r"[A-Za-z]+[?!.,:;]?\Z")


def _lookup_key(name_parts: list[str], value: str) -> bool:
    """`accessTokenKey = 'access_token'`: a name ending in `key` that is not itself a kind of key
    (`api_key`, `secret_key`) or that names a secret before it (`masterKeyStorageKey`), holding
    words joined by `_-:./`, names where a value is kept rather than a secret."""
    if len(name_parts) < 2 or name_parts[-1] not in ("key", "keys"):
        return False
    if name_parts[-2] in _KEY_QUALIFIERS and not any(_secret_part(p) for p in name_parts[:-2]):
        return False
    if not (value.islower() or value.isupper()):
        return False
    pieces = [p for p in _LOOKUP_SPLIT.split(value.lower()) if p]
    return (len(pieces) >= 2 and all(_LOOKUP_PIECE.fullmatch(p) for p in pieces)
            and sum(p.isalpha() and len(p) >= 3 for p in pieces) >= 2)


def _named_after_itself(name_parts: list[str], value: str) -> bool:
    """`PASSWORD: 'passwordFactor'`: an identifier of letters built on the name's secret word and
    ending in a word for a kind of thing (factor, field, type), as enum members are. A password
    spelled after what it is (`metrics_local_password`) ends on the secret word and stays one."""
    if not value.isascii() or not value.replace("_", "").isalpha():
        return False
    parts = _name_parts(value)
    return (len(parts) >= 2 and (parts[-1] in _META_SUFFIXES or parts[-1] == "factor")
            and any(_strong_part(p) and p in parts for p in name_parts))


def _describes_itself(name_parts: list[str], value: str) -> bool:
    """`"confirmPassword": "Confirm Password"`, `secret: Plain TOTP secret.`: words, no digits,
    all of them the name's, or ending on its secret word: a UI label or a docstring's
    description of the secret, not the secret."""
    words = value.split()
    if len(words) < 2 or not all(_PROSE_WORD.match(w) for w in words):
        return False
    low = [w.rstrip("?!.,:;").lower() for w in words]
    last = low[-1]  # the noun a description ends on: "Plain TOTP secret."
    return set(low) <= set(name_parts) or (last in name_parts and _strong_part(last))


def _names_a_variable(value: str) -> bool:
    """`api_key: OPENAI_API_KEY`: an upper-case name of a secret, the variable that holds it."""
    return (value.isupper() and "_" in value and _IDENT.match(value) is not None
            and any(_secret_part(p) for p in value.lower().split("_")))


def not_secret_value(name: str, value: str) -> bool:
    """Values that the name shows to be code or prose, not a secret (see the six checks)."""
    parts = _name_parts(name)
    return (_names_a_variable(value) or _lookup_key(parts, value) or _describes_itself(parts, value)
            or _named_after_itself(parts, value) or _spaced_for_a_token(parts, value) or _plain_url(value))


_SPACELESS_SECRETS = ("token", "credential", "credentials")


def _spaced_for_a_token(name_parts: list[str], value: str) -> bool:
    """`token: 15 minutes`, `Credentials: both providers work in the TUI`: words under a name whose
    secret is a token or a credential, which never hold a space (a password or a passphrase may),
    unless one of the words looks generated (`token: Bearer 8f…`)."""
    words = value.split()
    secret = [p for p in name_parts if _secret_part(p)]
    return (len(words) >= 2 and bool(secret) and all(p.endswith(_SPACELESS_SECRETS) for p in secret)
            and not any(looks_random(w.strip("\"'`,.;:()")) for w in words))


_URL = _lazy(r"[A-Za-z][A-Za-z0-9+.\-]*://([^\s/@?#]+)(/[^\s@?#]*)?\Z")


def _plain_url(value: str) -> bool:
    """`Private: `wss://ws-auth.kraken.com/v2``: an address without credentials, a query or a
    generated path segment (a webhook's secret path still counts; `url-password` finds userinfo)."""
    m = _URL.match(value)
    return m is not None and not any(looks_random(seg) for seg in (m.group(2) or "").split("/"))


# ---------------------------------------------------------------- rules


class Rule:
    """One family of secrets: the needles that announce it and how to find it at them."""

    name = ""
    needles: tuple[str, ...] = ()

    def spans(self, t: _Text, hits: Hits) -> list[Span]:
        raise NotImplementedError


def _left_ok(s: str, i: int) -> bool:
    return i == 0 or s[i - 1] not in _WORD


def _right_ok(s: str, j: int) -> bool:
    return j >= len(s) or s[j] not in _WORD


def _positions(hits: Hits, needles: Iterable[str]) -> list[int]:
    out: list[int] = []
    for n in needles:
        out.extend(hits.get(n, ()))
    out.sort()
    return out


class TokenRule(Rule):
    """A token recognisable by itself (`ghp_…`, `AKIA…`, `eyJ….….…`), replaced whole."""

    def __init__(self, name: str, needles: tuple[str, ...], pattern: str, *,
                 check: Callable[[str], bool] | None = None, group: str | int = 0, right: bool = True,
                 classify: Callable[[str], str] | None = None) -> None:
        self.name = name
        self.needles = needles
        self.pattern = _lazy(pattern)
        self.check = check
        self.group = group
        self.right = right
        self.classify = classify

    def spans(self, t: _Text, hits: Hits) -> list[Span]:
        s = t.s
        out: list[Span] = []
        done = 0
        for p in _positions(hits, self.needles):
            if p < done or not _left_ok(s, p):
                continue
            m = self.pattern.match(s, p)
            if m is None or (self.right and not _right_ok(s, m.end())):
                continue
            secret = m.group(self.group)
            if self.check is not None and not self.check(secret):
                continue
            done = m.end()
            out.append(Span(*m.span(self.group), self.classify(secret) if self.classify else self.name))
        return out


# --- private keys ---------------------------------------------------------------------

_PEM_BODY = r"(?:[A-Za-z0-9+/=:,._ \t\r\n]|\\++[nrt]|-(?!----))*"  # (newlines escaped once, or twice: JSON in JSON)
_PEM_EDGE = _lazy(r"(?:[ \t\r\n]|\\++[nrt])*")
_B64_RUN = _lazy(r"[A-Za-z0-9+/]{16}")
_B64_40 = _lazy(r"[A-Za-z0-9+/]{40}")


class PrivateKeyRule(Rule):
    """`-----BEGIN … PRIVATE KEY-----` blocks (RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP … BLOCK).

    The BEGIN and END lines stay, the body goes. A truncated block (`head -5 id_rsa`) is
    redacted to the end of its base64. Bodies may hold real or JSON-escaped newlines.
    """

    name = "private-key"
    needles = ("pem",)
    pattern = _lazy(r"-----BEGIN [A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)?-----(?P<secret>" + _PEM_BODY + r")")

    def spans(self, t: _Text, hits: Hits) -> list[Span]:
        s = t.s
        out: list[Span] = []
        done = 0
        for begin in _positions(hits, self.needles):
            if begin < done:
                continue
            m = self.pattern.match(s, begin)
            if m is None or not _B64_RUN.search(m.group("secret")):
                continue
            body = m.group("secret")
            a, b = m.span("secret")
            # keep the line structure: leading and trailing newlines (real or escaped) stay
            lead = _PEM_EDGE.match(body).end()
            trail = len(body) - _last_edge(body)
            done = m.end()
            if a + lead < b - trail:
                out.append(Span(a + lead, b - trail, self.name))
        return out


def _last_edge(body: str) -> int:
    """Where the run of newlines (real or escaped) and blanks that ends `body` starts."""
    end = len(body)
    while True:
        stripped = body[:end].rstrip(" \t\r\n")
        if stripped[-1:] in ("n", "r", "t") and stripped[-2:-1] == "\\":
            end = len(stripped) - 1
            while end > 0 and body[end - 1] == "\\":
                end -= 1
            continue
        return len(stripped)


class GcpServiceAccountRule(Rule):
    """`"private_key": "-----BEGIN PRIVATE KEY-----\\n…"` and `"private_key_id"` of a key file."""

    name = "gcp-service-account-key"
    needles = ("key",)
    pattern = _lazy(r'(?P<q>\\?")private_key(?P<id>_id)?(?P=q)[ \t]*:[ \t]*(?P=q)'
                         r'(?P<secret>(?:[^"\\\n\x00]|\\[^"\n\x00]){1,16384})(?P=q)')

    def spans(self, t: _Text, hits: Hits) -> list[Span]:
        s, lb = t.s, t.lb
        out: list[Span] = []
        for k in _positions(hits, self.needles):
            p = k - 8  # `private_key`, found by its `key`
            if p <= 0 or not lb.startswith(b"private_key", p) or s[p - 1] != '"':
                continue
            m = self.pattern.match(s, p - 2 if p >= 2 and s[p - 2] == "\\" else p - 1)
            if m is None:
                continue
            v = m.group("secret")
            if MARK in v:
                continue
            if m.group("id"):
                ok = bool(_HEX.match(v)) and len(v) >= 32
            else:
                ok = _B64_40.search(v) is not None  # key material, not `<PRIVATE KEY>`
            if ok:
                out.append(Span(*m.span("secret"), self.name))
        return out


# --- URLs with a password ---------------------------------------------------------------

class UrlPasswordRule(Rule):
    """`scheme://user:password@host`: the user and the host stay, the password goes."""

    name = "url-password"
    needles = ("url",)
    pattern = _lazy(
        r"://(?P<user>[^\s:/?#@\"'<>\[\]{}|\\^`\x00]{0,256}):(?P<secret>[^\s/?#@\"'<>\[\]{}|\\^`\x00]{1,256})@"
        r"(?=[A-Za-z0-9\[])"
    )

    def spans(self, t: _Text, hits: Hits) -> list[Span]:
        out: list[Span] = []
        for p in _positions(hits, self.needles):
            m = self.pattern.match(t.s, p)
            if m is None:
                continue
            pw = m.group("secret")
            if is_placeholder(pw) or pw.isdigit():  # host:port@… is not a password
                continue
            out.append(Span(*m.span("secret"), self.name))
        return out


class SignedUrlRule(Rule):
    """Credentials an address carries in itself: a signed URL's signature or session token (S3's
    `X-Amz-Signature`, `X-Amz-Security-Token`, Google Cloud Storage's `X-Goog-Signature`, an Azure
    SAS `sig`, CloudFront's `Signature`), a Discord webhook's token, a Telegram bot's token. Each
    lets whoever holds the address act on the account until it expires (a SAS for years); the
    rest of the address stays."""

    name = "signed-url"
    needles = ("url",)
    address = _lazy(r"://[^\s\"'<>`\\]{1,4096}")
    secret = _lazy(r"[?&](?:x-amz-signature|x-amz-security-token|x-goog-signature|sig|signature)="
                   r"(?P<q>[^&#\s\"'<>`\\]{16,4096})"
                   r"|/api/webhooks/\d{15,21}/(?P<discord>[A-Za-z0-9_\-]{60,100})"
                   r"|/bot\d{5,12}:(?P<telegram>[A-Za-z0-9_\-]{30,50})", re.IGNORECASE)

    def spans(self, t: _Text, hits: Hits) -> list[Span]:
        out: list[Span] = []
        done = 0
        for p in _positions(hits, self.needles):
            if p < done:
                continue
            m = self.address.match(t.s, p)
            if m is None:
                continue
            done = m.end()
            for f in self.secret.finditer(t.s, p, m.end()):
                group = f.lastgroup or "q"
                value = f.group(group)
                if MARK not in value and (group != "q" or _token_body_ok(value.replace("%", ""))):
                    out.append(Span(*f.span(group), "discord-webhook" if group == "discord" else
                                    "telegram-bot-token" if group == "telegram" else self.name))
        return out


# --- Authorization headers ----------------------------------------------------------------

_SCHEMES = r"(?:bearer|basic|token|bot|digest|apikey|api-key|sso-key|key|negotiate|ntlm)"


class AuthHeaderRule(Rule):
    """`Authorization: Bearer <token>`, `Proxy-Authorization: Basic …` (curl -H, raw HTTP, JSON headers).

    A bearer token without its header is left to the rules of its own kind (JWT, GitHub, …):
    looking for the bare word `bearer` would cost one more scan of every string.
    """

    name = "auth-header"
    needles = ("auth",)
    header = _lazy(
        r"(?:proxy-)?authorization\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?[ \t]*(?:(?P<scheme>" + _SCHEMES + r")[ \t]+)?"
        r"(?P<secret>[A-Za-z0-9._~+/=\-]{6,4096})",
        re.IGNORECASE | re.ASCII,
    )

    def spans(self, t: _Text, hits: Hits) -> list[Span]:
        s, lb = t.s, t.lb
        out: list[Span] = []
        done = 0
        for p in hits.get("auth", ()):
            if not lb.startswith(b"authorization", p):
                continue
            start = p - 6 if lb[max(0, p - 6):p] == b"proxy-" else p
            if start < done or not _left_ok(s, start):
                continue
            m = self.header.match(s, start)
            if m is None:
                continue
            v = m.group("secret")
            if s[m.end():m.end() + 1] == "(" or is_placeholder(v):
                continue
            if not m.group("scheme") and not looks_random(v, 12):
                continue  # `authorization: required`, `authorization=self.header`
            if (_DOTTED.match(v) or _IDENT.match(v)) and not looks_random(v, 12):
                continue
            done = m.end()
            out.append(Span(*m.span("secret"), self.name))
        return out


# --- secrets known by their neighbours ----------------------------------------------------

def _window(s: str, p: int, lines: int, reach: int) -> tuple[int, int]:
    """`lines` lines before and after position `p`, within `reach` characters and the string."""
    lo, hi = max(0, p - reach), min(len(s), p + reach)
    sep = s.rfind(_SEP, lo, p)
    a = sep + 1 if sep >= 0 else lo
    sep = s.find(_SEP, p, hi)
    b = sep if sep >= 0 else hi
    start, end = p, p
    for _ in range(lines + 1):
        nl = s.rfind("\n", a, start)
        if nl < 0:
            start = a
            break
        start = nl
    for _ in range(lines + 1):
        nl = s.find("\n", end + 1, b)
        if nl < 0:
            end = b
            break
        end = nl
    return max(a, start), min(b, end)


_AWS_ID = _lazy(r"A(?:KIA|SIA)[0-9A-Z]{16}")
_AWS_SECRET_RUN = _lazy(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")


def _aws_secret_ok(v: str) -> bool:
    """Random base64 of both cases and digits: not a git hash (hex), a path, a word run or `xxx…`."""
    return (any(c.isupper() for c in v) and any(c.islower() for c in v) and any(c.isdigit() for c in v)
            and len(set(v)) >= 15 and not is_placeholder(v) and v.count("/") <= 4)


class AwsSecretNearIdRule(Rule):
    """A 40-character secret access key within three lines of an access key id, with no name of
    its own: the CSV IAM gives (`AKIA…,wJalr…`), `aws configure list`, a table, a sentence.

    Runs before the id's own rule, which turns the id into a marker: the id is what shows where
    to look. A key named as such (`aws_secret_access_key = …`) is the assignment rule's."""

    name = "aws-secret-access-key"
    needles = ("akia", "asia")

    def spans(self, t: _Text, hits: Hits) -> list[Span]:
        s = t.s
        out: list[Span] = []
        for p in _positions(hits, self.needles):
            m = _AWS_ID.match(s, p)
            if m is None or "EXAMPLE" in m.group(0) or not _left_ok(s, p) or not _right_ok(s, m.end()):
                continue
            a, b = _window(s, p, 3, 600)
            for v in _AWS_SECRET_RUN.finditer(s, a, b):
                if _aws_secret_ok(v.group(0)):
                    out.append(Span(*v.span(), self.name))
        return sorted(set(out))


_TWILIO_SID = _lazy(r"AC[0-9a-f]{32}")
_HEX32_RUN = _lazy(r"(?<![0-9A-Za-z_\-])[0-9a-f]{32}(?![0-9A-Za-z_\-])")


def _hex_token_ok(v: str) -> bool:
    return len(set(v)) >= 8 and any(c.isdigit() for c in v) and any(c.isalpha() for c in v)


class TwilioAuthTokenRule(Rule):
    """A Twilio auth token passed by position after its account SID: `Client('AC…', '<32 hex>')`,
    `curl -u AC…:<token>`, the two on consecutive lines. The SID is an identifier and stays."""

    name = "twilio-credential"
    needles = ("twac",)

    def spans(self, t: _Text, hits: Hits) -> list[Span]:
        s = t.s
        out: list[Span] = []
        for p in _positions(hits, self.needles):
            m = _TWILIO_SID.match(s, p)
            if m is None or not _left_ok(s, p) or not _right_ok(s, m.end()):
                continue
            _, b = _window(s, m.end(), 2, 300)
            v = _HEX32_RUN.search(s, m.end(), b)
            if v is not None and _hex_token_ok(v.group(0)):
                out.append(Span(*v.span(), self.name))
        return sorted(set(out))


_FALLBACK_VALUE = _lazy(
    r"""[ \t"'`:=,(]{1,4}+(?:(?:is|was|now|here)[ \t"'`:]{1,3}+)?(?P<secret>[A-Za-z0-9+/_\-]{20,512}={0,2})""",
    re.IGNORECASE)
FALLBACK_BITS = 3.5  # bits per character: the threshold gitleaks' generic rule uses


def entropy_secret(v: str) -> bool:
    """A long random string: the fallback's test of a value next to a credential word. Both cases
    or letters and digits, high entropy, and none of the things ids and paths look like (a hash
    as git or a lock file prints it, a UUID, a path, a name in any case convention)."""
    if len(v) < 20 or not looks_random(v, 20) or shannon_bits(v) < FALLBACK_BITS:
        return False
    if _HEX.match(v) and len(v) in (40, 64, 128) or _UUID.match(v) or is_placeholder(v):
        return False
    # not a path, a slug, a kebab- or snake-case name with a number in it
    return v.count("/") < 2 and v.count("-") < 4 and v.count("_") < 4


_FLAG_VALUE = _lazy(r"""[ \t]+(?P<q>["']?)(?P<secret>[^\s"'`\x00]{6,256})(?P=q)""")  # (\x00: `_SEP`)


def _flag_password(v: str) -> bool:
    """`--password VALUE`: a password has any characters; not a variable, a path or a word."""
    if MARK in v or v[0] in "$%<{([~/." or is_placeholder(v) or v.startswith("-"):
        return False
    classes = (any(c.islower() for c in v) + any(c.isupper() for c in v) + any(c.isdigit() for c in v)
               + any(not c.isalnum() for c in v))
    return classes >= 2 and not _IDENT.match(v) and not _DOTTED.match(v)


class CredentialWordRule(Rule):
    """The fallback: a long random string a word or two after a credential word with no operator
    (`my API key is …`, `--token …`, `password was …`), by its entropy alone. What the named
    rules do not know (a new vendor's format) is still not kept verbatim."""

    name = "generic-secret"
    needles = ("tokenw", "keyw", "passw", "secretw", "credw", "passflag")

    def spans(self, t: _Text, hits: Hits) -> list[Span]:
        s = t.s
        out: list[Span] = []
        done = 0
        for p in _positions(hits, ("passflag",)):
            m = _FLAG_VALUE.match(s, p)
            if m is not None and _flag_password(m.group("secret")):
                out.append(Span(*m.span("secret"), self.name))
        for p in _positions(hits, self.needles[:-1]):
            if p < done:
                continue
            m = _FALLBACK_VALUE.match(s, p)
            if m is None or not _right_ok(s, m.end()):
                continue
            v = m.group("secret")
            if entropy_secret(v):
                done = m.end()
                out.append(Span(*m.span("secret"), self.name))
        return sorted(set(out))


# --- names with a value: JSON, env files, YAML, code ---------------------------------------

_KEYWORDS = ("key", "token", "secret", "pass", "pwd", "credential", "auth", "private")

_ASSIGN = _lazy(
    r"""
    (?P<name>[A-Za-z0-9_.\-]{1,100})
    (?P<q1>\\?["'])?
    (?P<op>[ \t]*(?::=|=(?![=>~])|:(?![:/\\=]))[ \t]*)
    (?:
        \\"(?P<eq>(?:[^"\\\n\x00]|\\[^"\n\x00]){0,4096})\\"
      | "(?P<dq>(?:[^"\\\n\x00]|\\[^\n\x00]){0,4096})"
      | '(?P<sq>[^'\n\x00]{0,4096})'
      | `(?P<bq>[^`\n\x00]{0,4096})`
      | (?P<bare>[^\s"'`\x00][^\n\x00]{0,4095})
    )?
    """,
    re.VERBOSE,
)
_CODE_VALUE = _lazy(r"[^,;)\s]*")
# A name closing a bracket, or listed before one that closes on the line: `{ privateKey: seedKey, publicKey }`,
# `f({ token: t })`; prose such as `password: hunter2, then` is not code.
_NAME_THEN_CODE = _lazy(r"[A-Za-z_$][\w$.]*[ \t]*(?:[)}\]]|,.*[)}\]])")
_NAME_RUN = _lazy(r"[A-Za-z0-9_.\-]*")
_SUBSCRIPT = _lazy(r"""[A-Za-z_$][\w$.]*\[["']?[\w.:\-]*["']?\]\Z""")
_AFTER_NAME = frozenset("\"'\\:= \t")
_ANNOTATION = _lazy(r"[A-Za-z_][\w.\[\], ]*?[ \t]=[ \t]")  # `float = 0`, not base64's `…=`
_AWS_SECRET_NAME = _lazy(r"(?:aws_?)?secret_?access_?key", re.IGNORECASE)
_AWS_SECRET_VALUE = _lazy(r"[A-Za-z0-9/+]{40}\Z")
_AZURE_NAMES = frozenset({"accountkey", "sharedaccesskey"})
_AZURE_VALUE = _lazy(r"[A-Za-z0-9+/]{20,}={0,2}")


class AssignmentRule(Rule):
    """`NAME=value`, `export NAME=value`, `NAME: value`, `"name": "value"`, `name = "value"`.

    Found from a keyword in the name (KEY, SECRET, TOKEN, PASSWORD, PASSWD, PWD, CREDENTIAL,
    AUTH, PRIVATE); the name, the operator and the quotes stay. A quoted name (`"api_key": …`)
    makes a `json-secret`, anything else a `secret-assignment`; names of a known service give
    its class (`AWS_SECRET_ACCESS_KEY`, Azure's `AccountKey=`, `TWILIO_AUTH_TOKEN`).
    """

    name = "secret-assignment"
    needles = _KEYWORDS

    def spans(self, t: _Text, hits: Hits) -> list[Span]:
        s = t.s
        starts: set[int] = set()
        for p in _positions(hits, self.needles):
            # cheap checks first: most keywords sit in names like `monkey` or `self.token.x`
            end = _NAME_RUN.match(s, p).end()
            if s[end:end + 1] not in _AFTER_NAME:
                continue
            head = s[max(0, p - 100):p]
            start = p - (len(head) - len(head.rstrip(_NAME_CHARS)))
            if start not in starts and name_kind(s[start:end]):
                starts.add(start)
        out: list[Span] = []
        done = 0
        for start in sorted(starts):
            if start < done:
                continue
            span = self._at(s, start)
            if span is not None:
                done = span.end
                out.append(span)
        return out

    def _at(self, s: str, start: int) -> Span | None:
        m = _ASSIGN.match(s, start)
        if m is None:
            return None
        name = m.group("name")
        kind = name_kind(name)
        if not kind:
            return None
        before = s[start - 1] if start else "\n"
        if before == "$" or s[max(0, start - 2):start] == "${" or s[max(0, start - 10):start] == MARK:
            return None  # a variable reference, or the class name inside a marker
        if s[max(0, start - 7):start] == "lambda ":
            return None  # `key=lambda token: token.x`
        q1, op = m.group("q1"), m.group("op")
        lname = name.lower().strip("-_.")
        for g in ("eq", "dq", "sq", "bq"):
            if m.group(g) is not None:
                value, (a, b) = m.group(g), m.span(g)
                if q1 and before not in "\"'":
                    return None  # `"api_key"` needs its opening quote too
                if s[m.end():m.end() + 3].lstrip()[:1] in (".", "%", "+", "["):
                    return None  # `"…{}".format(x)`, `"…" % x`, `"…" + x`: a template, not the secret
                if g == "bq" and any(c in value for c in " ${("):
                    return None  # `TOKEN=\`cat token.txt\``, key: `plainKey.fill(0)`: code, not the secret
                break
        else:
            bare = m.group("bare")
            if bare is None or q1:
                return None  # nothing after the operator, or a JSON value that is not a string
            if lname in _AZURE_NAMES and op.strip() == "=":
                vm = _AZURE_VALUE.match(bare)
                value = vm.group(0) if vm else ""
            elif op.strip() == ":" and not op.endswith((" ", "\t")):
                return None  # `file.ex:12:` and `host:port`; YAML needs a space after the colon
            else:
                if before == "`" and "`" in bare:
                    bare = bare[:bare.index("`")]  # markdown's inline code: `withCredentials: true` for …
                value = self._bare_value(bare, self._context(s, start, op, before, bare, name), name) or ""
            if not value:
                return None
            a = m.start("bare")
            b = a + len(value)
        if not self._value_ok(value, kind) or not_secret_value(name, value):
            return None
        if _AWS_SECRET_NAME.fullmatch(lname) and _AWS_SECRET_VALUE.match(value):
            cls = "aws-secret-access-key"
        elif lname in _AZURE_NAMES:
            cls = "azure-storage-key"
        elif "twilio" in lname:
            cls = "twilio-credential"
        else:
            cls = "json-secret" if q1 else "secret-assignment"
        return Span(a, b, cls)

    @staticmethod
    def _context(s: str, start: int, op: str, before: str, bare: str, name: str) -> str:
        """env (`NAME=v` in a shell or a .env), code (`f(name=v)`, `name = v`) or yaml (`name: v`)."""
        stripped = op.strip()
        if op == "=":
            lead = s[max(s.rfind("\n", 0, start), s.rfind(_SEP, 0, start)) + 1:start].rstrip()
            if before in "(," or (lead and lead[-1] in "(,"):
                return "code"
            # a keyword argument on its own line of a call (`    token=provider_token,`); an
            # upper-case name (`  DB_PASSWORD=…,`) is still an environment variable
            if not lead and bare.split(None, 1)[0].endswith(",") and not name.isupper():
                return "code"
            return "env" if start == 0 or before in " \t\n;&|-`\x00" else "code"  # `: `TOKEN=…` in prose
        return "yaml" if stripped == ":" else "code"

    @staticmethod
    def _bare_value(bare: str, ctx: str, name: str) -> str | None:
        """The literal secret of an unquoted value, or None where the value is code or a reference."""
        if ctx == "code":
            # an unquoted literal in code is a number or a name, never a secret, unless it is
            # token-like (an INI file's `api_key = AbC…`)
            value = _CODE_VALUE.match(bare).group(0)
            if not looks_random(value) or any(c in value for c in ".[](){}") or "::" in value:
                return None  # (`CredentialKey::ALL`: a path)
        elif ctx == "env":
            value = bare.split(None, 1)[0].rstrip(",;)`") if bare.strip() else ""
        else:
            value = bare.split("\\n", 1)[0]  # a line break escaped twice (a file shown inside JSON text)
            for mark in (" #", " //"):  # YAML's comment, and a JS/TS one in code read as YAML
                comment = value.find(mark)
                if comment >= 0:
                    value = value[:comment]
            value = value.rstrip()
            if not value or value.endswith((",", ";", "{", "(", "[", ")", "}")) or _ANNOTATION.match(value) \
                    or _NAME_THEN_CODE.match(value):
                return None  # code (`token: this.token,`, `token: float = 0`, `{ key: k, … }`), not YAML
            if value.split(None, 1)[0].lower().rstrip("?|,") in _TYPE_NAMES:
                return None
        if not value or value[0] in "$%&*@!<>([{|`~\\/." or "(" in value:
            return None
        if _SUBSCRIPT.match(value):
            return None  # `access_token=result["access_token"],`: a lookup, not the secret
        if value.startswith(("~/", "http://", "https://", "file:")):
            return None
        if (_IDENT.match(value) or _DOTTED.match(value)) and not looks_random(value, 16):
            if ctx == "code" or _DOTTED.match(value):
                return None  # a variable or an attribute: `password=password`, `token=self.token`
            if value.lower() == name.lower() or value.lower() in _TYPE_NAMES:
                return None
        if ctx == "yaml" and value.lower().rstrip("?") in _TYPE_NAMES:
            return None
        if value.replace(".", "", 1).isdigit():
            return None  # numbers (`max_retries_for_token: 3`) are not secrets
        return value

    @staticmethod
    def _value_ok(value: str, kind: int) -> bool:
        if is_placeholder(value):
            return False
        if kind == WEAK:
            return looks_random(value) and not _UUID.match(value) and not (
                _HEX.match(value) and len(value) in (32, 40, 64))
        return len(value) >= 4


def dict_value_secret(key: str, value: str) -> bool:
    """Whether `value`, a string under `key` in a structure (a tool's input), is a secret."""
    kind = name_kind(key)
    return (bool(kind) and len(value) >= 4 and "\n" not in value and AssignmentRule._value_ok(value, kind)
            and not not_secret_value(key, value))


# --- the token families ----------------------------------------------------------------------

def _sk_class(token: str) -> str:
    return "anthropic-api-key" if token.startswith("sk-ant-") else "openai-api-key"


def _sk_ok(token: str) -> bool:
    body = token[3:]
    if body.startswith("ant-"):
        return _token_body_ok(body[4:])
    # OpenAI keys mix upper case, lower case and digits; slugs like sk-learn-… do not
    return _token_body_ok(body) and any(c.isupper() for c in body) and any(c.islower() for c in body)


BUILTIN_RULES: tuple[Rule, ...] = (
    AwsSecretNearIdRule(),  # before the id's own rule: the id shows where to look
    TwilioAuthTokenRule(),
    GcpServiceAccountRule(),
    PrivateKeyRule(),
    TokenRule("openai-api-key", ("sk",), r"sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,512}",
              check=_sk_ok, classify=_sk_class),
    TokenRule("aws-access-key-id", ("akia", "asia"), r"A(?:KIA|SIA)[0-9A-Z]{16}", check=lambda v: "EXAMPLE" not in v),
    TokenRule("google-api-key", ("aiza",), r"AIza[0-9A-Za-z_\-]{35}", check=lambda v: len(set(v)) >= 10),
    TokenRule("github-token", ("gh", "ghpat"), r"g(?:h[pousr]_[A-Za-z0-9]{36,255}|ithub_pat_[A-Za-z0-9_]{22,255})",
              check=lambda v: _token_body_ok(v.split("_", 1)[1])),
    TokenRule("gitlab-token", ("gl",), r"gl(?:pat|dt|rt|ptt|soat|cbt)-[A-Za-z0-9_\-]{20,255}",
              check=lambda v: _token_body_ok(v.split("-", 1)[1])),
    TokenRule("slack-token", ("xox", "xapp"), r"x(?:ox[abposr]|app)-[A-Za-z0-9\-]{10,250}",
              check=lambda v: _token_body_ok(v[5:])),
    TokenRule("slack-webhook", ("slackhook",),
              r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9/_\-]{16,512})",
              group="secret", check=_token_body_ok),
    TokenRule("stripe-key", ("stripe",), r"[spr]k_(?:live|test)_[A-Za-z0-9]{16,255}",
              check=lambda v: _token_body_ok(v[8:])),
    TokenRule("jwt", ("jwt",), r"eyJ[A-Za-z0-9_\-]{8,8192}\.[A-Za-z0-9_\-]{8,16384}\.[A-Za-z0-9_\-]{8,8192}"),
    TokenRule("twilio-api-key", ("twsk",), r"SK[0-9a-fA-F]{32}", check=lambda v: _hex_token_ok(v[2:])),
    TokenRule("npm-token", ("npm",), r"npm_[A-Za-z0-9]{36}", check=lambda v: _token_body_ok(v[4:])),
    TokenRule("huggingface-token", ("hf",), r"hf_[A-Za-z0-9]{30,40}", check=lambda v: _mixed_case_ok(v[3:])),
    TokenRule("sendgrid-api-key", ("sg",), r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"),
    TokenRule("databricks-token", ("dapi",), r"dapi[0-9a-f]{32}(?:-[0-9]{1,2})?",
              check=lambda v: len(set(v[4:36])) >= 8),
    UrlPasswordRule(),
    SignedUrlRule(),
    AuthHeaderRule(),
    AssignmentRule(),
    CredentialWordRule(),
)


# ---------------------------------------------------------------- extra patterns

_MARKER = _lazy(r"\[REDACTED:[A-Za-z0-9_.\-]{1,64}\]")


class ExtraRule:
    """A pattern from `[redact] patterns` in the config; it runs on every string.

    A named group `secret` limits the replacement to that group, so the context can stay.
    """

    def __init__(self, name: str, pattern: str) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,64}", name):
            raise BadInput(f"redact pattern name {name!r}: use 1-64 letters, digits, '.', '_' or '-'")
        try:
            self.pattern = re.compile(pattern)
        except re.error as exc:
            raise BadInput(f"redact pattern {name!r}: {pattern!r} is not a valid regular expression ({exc})") from exc
        if self.pattern.search("") is not None:
            raise BadInput(f"redact pattern {name!r}: {pattern!r} matches the empty string")
        self.name = name
        self.group: str | int = "secret" if "secret" in self.pattern.groupindex else 0

    def spans(self, s: str) -> list[Span]:
        marks = [m.span() for m in _MARKER.finditer(s)] if MARK in s else []
        out: list[Span] = []
        for m in self.pattern.finditer(s):
            a, b = m.span(self.group)
            if a < 0 or a >= b or any(a < me and ms < b for ms, me in marks):
                continue  # never inside or across a marker: keeps redaction idempotent
            out.append(Span(a, b, self.name))
        return out


def parse_extra(extra: list[dict[str, str]] | None) -> list[ExtraRule]:
    """The `[redact] patterns` of the config as rules; BadInput names the pattern that is wrong."""
    rules: list[ExtraRule] = []
    for item in extra or []:
        if not isinstance(item, dict) or "pattern" not in item or "name" not in item:
            raise BadInput(f"redact pattern {item!r}: expected a table with `name` and `pattern`")
        rules.append(ExtraRule(str(item["name"]), str(item["pattern"])))
    return rules


# ---------------------------------------------------------------- the redactor

@functools.lru_cache(maxsize=1)
def _own_source() -> bytes | None:
    """This module's source: the built-in rules are its code."""
    try:
        with open(__file__, "rb") as f:
            return f.read()
    except OSError:
        log.warning("cannot read %s: tapes will not record their redaction rules", __file__)
        return None



class Redactor:
    """Replaces secrets in text with `[REDACTED:<class>]` and counts them by class."""

    def __init__(self, extra: list[dict[str, str]] | None = None) -> None:
        self.counts: Counter[str] = Counter()
        self._extra = parse_extra(extra)
        self._given = [dict(item) for item in extra or []]
        self._digest: str | None = None

    @property
    def digest(self) -> str | None:
        """What these rules are, as the record of clean tapes keeps it (`engram.tape.redacted`): a
        sha256 of this module's source, the extra patterns in order, and the Python version and
        Unicode tables their expressions run on. Any change to the code of the rules
        (or to anything else in this file) gives another digest, so a tape redacted by other
        rules is never taken for one redacted by these (`engram push` scans such tapes again).
        None when the source cannot be read (then nothing is recorded, nothing trusted)."""
        if self._digest is None:
            src = _own_source()
            if src is None:
                return None
            import hashlib  # noqa: PLC0415 - OpenSSL's start-up only where a digest is asked for
            import json  # noqa: PLC0415
            import sys  # noqa: PLC0415
            import unicodedata  # noqa: PLC0415

            h = hashlib.sha256(src)
            h.update(b"\0" + json.dumps(self._given, sort_keys=True, default=str).encode())
            # the rules' regular expressions run on Python's `re` and its Unicode tables
            h.update(f"\0{sys.version_info[0]}.{sys.version_info[1]}\0{unicodedata.unidata_version}".encode())
            self._digest = h.hexdigest()[:32]
        return self._digest

    # --- one string

    def text(self, s: str) -> str:
        """`s` with every secret replaced; never raises."""
        try:
            if _worth_scanning(s) and (len(s) > _LONG or _SCANNER.search(s.encode("ascii", "replace").lower())):
                s = self._builtin([s])[0]  # (a long string is scanned once, there, not searched first)
            return self._extras(s)
        except Exception:  # noqa: BLE001 - a bug in a rule must neither leak the string nor stop capture
            return self._failed(s)

    def _extras(self, s: str) -> str:
        for rule in self._extra:
            spans = rule.spans(s)
            if spans:
                s = self._splice(s, spans, [len(s)])[0]
        return s

    def _failed(self, s: str) -> str:
        log.exception("redaction failed on a %d-character string; replacing all of it", len(s))
        self.counts["redaction-error"] += 1
        return REPLACEMENT.format(name="redaction-error")

    def _builtin(self, parts: list[str], hits: Hits | None = None) -> list[str]:
        """The built-in rules over `parts`, scanned and matched as one text.

        One scan per call, whatever the number of parts: the parts are joined with `_SEP`, which
        no rule's match can contain, so no match spans two parts. `hits`: the needles of the
        joined text when a scan of a whole tape found them already (`events`).
        """
        joined = _SEP.join(parts) if len(parts) > 1 else parts[0]
        ends: list[int] = []
        pos = 0
        for p in parts:
            pos += len(p)
            ends.append(pos)
            pos += 1
        t = _Text(joined)
        t._hits = hits  # None: scanned when a rule first asks
        changed = False
        for rule in BUILTIN_RULES:
            hits = t.hits
            if not hits:
                break
            if hits.keys().isdisjoint(rule.needles):
                continue
            spans = rule.spans(t, hits)
            if spans:
                joined, ends = self._splice(t.s, spans, ends)
                t = _Text(joined)
                changed = True
        if not changed:
            return parts
        out: list[str] = []
        start = 0
        for end in ends:
            out.append(joined[start:end])
            start = end + 1
        return out

    def _splice(self, s: str, spans: list[Span], ends: list[int]) -> tuple[str, list[int]]:
        """`s` with `spans` replaced by markers, and the part ends moved accordingly."""
        out: list[str] = []
        last = 0
        shifts: list[tuple[int, int]] = []  # (position in s, total shift after it)
        shift = 0
        for a, b, cls in sorted(spans):
            if a < last:
                continue
            marker = REPLACEMENT.format(name=cls)
            out.append(s[last:a])
            out.append(marker)
            self.counts[cls] += 1
            last = b
            shift += len(marker) - (b - a)
            shifts.append((b, shift))
        out.append(s[last:])
        new_ends: list[int] = []
        k, cur = 0, 0
        for e in ends:
            while k < len(shifts) and shifts[k][0] <= e:
                cur = shifts[k][1]
                k += 1
            new_ends.append(e + cur)
        return "".join(out), new_ends

    # --- structures

    def value(self, v: Any) -> Any:
        """`v` (a str, or dicts, lists and tuples of them) with every string redacted.

        The strings of a structure are redacted together, as one text (see `_builtin`), and
        only where a needle is found. A string under a secret-named key (`{"api_key": "…"}` in
        a tool's input) is a secret by position, even with no context in its own text.
        """
        if isinstance(v, str):
            return self.text(v)
        if not isinstance(v, (dict, list, tuple)):
            return v
        return self.events([v])[0]

    def _apply(self, v: Any, leaves: list[str], whole: list[bool], todo: list[int], hits: Hits | None = None) -> Any:
        """`v` with the built-in rules run over its `todo` leaves (as one text, whose needles
        are `hits` when known), its `whole` leaves replaced and the extra patterns applied."""
        new = list(leaves)
        try:
            if todo:
                done = self._builtin([leaves[i] for i in todo], hits)
                for i, s in zip(todo, done):
                    new[i] = s
        except Exception:  # noqa: BLE001 - see text()
            for i in todo:
                new[i] = self._failed(leaves[i])
        for i, s in enumerate(leaves):
            if whole[i]:
                self.counts["json-secret"] += 1
                new[i] = REPLACEMENT.format(name="json-secret")
            elif self._extra:
                try:
                    new[i] = self._extras(new[i])
                except Exception:  # noqa: BLE001 - see text()
                    new[i] = self._failed(new[i])
        if all(a is b for a, b in zip(new, leaves)):
            return v
        return _rebuild(v, iter(new))

    def event(self, ev: dict[str, Any]) -> dict[str, Any]:
        return self.value(ev)

    def events(self, evs: list[Any]) -> list[Any]:
        """`[self.value(ev) for ev in evs]`: every event of a tape at once, as capture runs it.

        The strings worth scanning of all the events are scanned for needles together (one call
        per needle pattern for the whole tape, not per event; a string repeated, once); the rules
        then run on the strings where a needle was found, with the needles already known. Needles are found on a
        string's own text, as `text()` finds them: not on its JSON form, where an escaped quote
        or tab (`my token \\"…\\"`) hid them until 2026-11-28.
        """
        walked: list[tuple[list[str], list[int], list[int], list[int]]] = []
        number: dict[str, int] = {}  # each distinct string worth scanning -> its place in the scan
        for ev in evs:
            leaves: list[str] = []
            todo: list[int] = []
            wholes: list[int] = []
            _walk(ev, leaves, todo, wholes)
            nums = [number.setdefault(leaves[j], len(number)) for j in todo]
            walked.append((leaves, todo, nums, wholes))
        by_text = _needles_of(list(number))  # a string repeated (read, edited, read again): once
        needy = by_text.keys()
        extra = bool(self._extra)
        out: list[Any] = []
        for ev, (leaves, todo, nums, wholes) in zip(evs, walked):
            if extra:
                found = [by_text.get(n, []) for n in nums]
            else:  # the rules change only the strings their needles are in
                if not wholes and needy.isdisjoint(nums):  # most events: nothing to look at
                    out.append(ev)
                    continue
                kept = [(j, by_text[n]) for j, n in zip(todo, nums) if n in by_text]
                todo = [j for j, _ in kept]
                found = [f for _, f in kept]
            if todo or extra or wholes:
                whole = [False] * len(leaves)
                for j in wholes:
                    whole[j] = True
                hits = _joined_hits([len(leaves[j]) for j in todo], found)
                ev = self._apply(ev, leaves, whole, todo, hits)
            out.append(ev)
        return out


def _needles_of(texts: list[str]) -> dict[int, list[tuple[str, int]]]:
    """The needles of each of `texts` that has any: its place in `texts` -> [(needle, position)].

    One scan of the texts joined by `_SEP` (no needle's match contains it, so each lies within
    one text), as `_scan` scans one text.
    """
    if not texts:
        return {}
    lb = _SEP.join(texts).encode("ascii", "replace").lower()
    starts: list[int] = []
    pos = 0
    for t in texts:
        starts.append(pos)
        pos += len(t) + 1
    found: dict[int, list[tuple[str, int]]] = {}
    for pattern in (_SCANNERS if len(lb) > _LONG else (_SCANNER,)):
        for m in pattern.finditer(lb):
            name = m.lastgroup
            if name is not None:
                k = bisect_right(starts, m.start()) - 1
                found.setdefault(k, []).append((name, m.start(name) - _BACK[name] - starts[k]))
    return found


def _joined_hits(lengths: list[int], needles: list[list[tuple[str, int]]]) -> Hits:
    """The needles of texts of `lengths` joined by `_SEP`, from each one's own (`needles`): what
    `_scan` of the joined text gives."""
    hits: Hits = {}
    offset = 0
    for n, found in zip(lengths, needles):
        for name, at in found:
            hits.setdefault(name, []).append(offset + at)
        offset += n + 1
    for positions in hits.values():
        positions.sort()
    return hits


# Values with no string in them, as JSON gives them: passed at once (an edit's ranges and hunks are
# lists of numbers; each number took two `isinstance` calls to be found to be none of the others).
_PLAIN = frozenset({int, float, bool, type(None)})


def _walk(v: dict[str, Any] | list[Any] | tuple[Any, ...], leaves: list[str], todo: list[int],
          wholes: list[int]) -> None:
    """Every string of `v` in a fixed order (`leaves`), with the places of those worth scanning
    (`todo`) and of those that are a secret by their key alone (`wholes`). Every string of every
    event passes here: few operations per string (the key's kind is cached, the common case is a
    plain `str` under a plain key)."""
    if isinstance(v, dict):
        kinds = _KEY_KINDS
        for k, x in v.items():
            tx = type(x)
            if tx is str:
                kind = kinds.get(k)
                if kind is None:
                    kind = _key_kind(k)
                if kind and _whole_secret(k, x):
                    wholes.append(len(leaves))
                elif (n := len(x)) >= MIN_LEN and (n > 80 or x.strip(_SAFE_CHARS)):
                    todo.append(len(leaves))
                leaves.append(x)
            elif tx in _PLAIN:
                continue
            elif tx is dict or tx is list or tx is tuple or isinstance(x, (dict, list, tuple)):
                _walk(x, leaves, todo, wholes)
            elif isinstance(x, str):
                _leaf(k, x, leaves, todo, wholes)
        return
    for x in v:
        tx = type(x)
        if tx is str:
            if (n := len(x)) >= MIN_LEN and (n > 80 or x.strip(_SAFE_CHARS)):
                todo.append(len(leaves))
            leaves.append(x)
        elif tx in _PLAIN:
            continue
        elif tx is dict or tx is list or tx is tuple or isinstance(x, (dict, list, tuple)):
            _walk(x, leaves, todo, wholes)
        elif isinstance(x, str):
            _leaf(None, x, leaves, todo, wholes)


def _leaf(k: Any, x: str, leaves: list[str], todo: list[int], wholes: list[int]) -> None:
    """`_walk` of a string of a subclass of `str` (rare: none comes from JSON)."""
    if k is not None and _whole_secret(k, x):
        wholes.append(len(leaves))
    elif _worth_scanning(x):
        todo.append(len(leaves))
    leaves.append(x)


def _worth_scanning(s: str) -> bool:
    """False for strings no built-in rule can match: short ones, ids, hashes, timestamps."""
    n = len(s)
    return n >= MIN_LEN and (n > 80 or bool(s.strip(_SAFE_CHARS)))


_KEY_KINDS: dict[str, int] = {}


def _whole_secret(key: Any, value: str) -> bool:
    """Whether `value` is a secret by its key alone: `{"api_key": "…"}`."""
    return bool(_key_kind(key)) and MARK not in value and len(value) < 4096 and dict_value_secret(key, value)


def _key_kind(key: Any) -> int:
    """`name_kind` of a structure's key, cached (a store has few distinct keys)."""
    kind = _KEY_KINDS.get(key)
    if kind is None:
        kind = name_kind(key) if isinstance(key, str) and len(key) <= 100 else 0
        if len(_KEY_KINDS) < 65536:
            _KEY_KINDS[key] = kind
    return kind


def _rebuild(v: Any, new: Iterator[str]) -> Any:
    """`v` with its strings, in `_walk` order, taken from `new`."""
    if isinstance(v, str):
        return next(new)
    if isinstance(v, dict):
        return {k: _rebuild(x, new) for k, x in v.items()}
    if isinstance(v, list):
        return [_rebuild(x, new) for x in v]
    if isinstance(v, tuple):
        return tuple(_rebuild(x, new) for x in v)
    return v
