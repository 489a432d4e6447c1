"""Secrets of many kinds, each in a line of the context it is usually pasted in, for the secrets
probe (tests/test_secrets_probe.py, bench/redaction.py).

Every secret is generated at run time from pieces and a seed, so that no string in this file looks
like a live credential to a secret scanner (and none is one). `KINDS` are the formats the built-in
rules must redact wherever they land; `VENDOR_KINDS` are vendor formats that only a maintained rule
set (gitleaks') knows, used to measure what loading one would add.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from pathlib import Path

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"
UPPER32 = string.ascii_uppercase + "234567"


def rnd(n: int, alphabet: str = ALNUM, seed: int = 0) -> str:
    """A reproducible random string with a digit, an upper- and a lower-case letter where the
    alphabet has them."""
    r = random.Random(f"probe-{seed}-{n}-{alphabet}")
    while True:
        s = "".join(r.choice(alphabet) for _ in range(n))
        need = [set(a) & set(alphabet) for a in (string.digits, string.ascii_uppercase, string.ascii_lowercase)]
        if all(not a or set(s) & a for a in need):
            return s


def _pem(label: str, seed: int) -> tuple[str, str]:
    body = "\n".join(rnd(64, B64, seed + i) for i in range(4)) + "\n" + rnd(20, B64, seed + 9) + "=="
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", body


def _jwt(seed: int) -> str:
    def seg(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return ".".join([seg({"alg": "HS256", "typ": "JWT"}), seg({"sub": f"u{seed}", "iat": 1700000000}),
                     rnd(43, B64URL, seed)])


# (kind, text, the secrets in it that must not be stored)
Kind = tuple[str, str, list[str]]


def kinds(seed: int = 0) -> list[Kind]:
    """The probe's kinds: each a secret the built-in rules know, in its usual context."""
    def r(n: int, alphabet: str = ALNUM, k: int = 0) -> str:
        return rnd(n, alphabet, seed * 1000 + k)

    akia, aws_secret, asia = "AK" + "IA" + r(16, UPPER32, 1), r(40, B64, 2), "AS" + "IA" + r(16, UPPER32, 3)
    rsa, rsa_body = _pem("RSA PRIVATE KEY", seed * 1000 + 10)
    ossh, ossh_body = _pem("OPENSSH PRIVATE KEY", seed * 1000 + 20)
    ec, ec_body = _pem("EC PRIVATE KEY", seed * 1000 + 30)
    pgp, pgp_body = _pem("PGP PRIVATE KEY BLOCK", seed * 1000 + 40)
    pk8, pk8_body = _pem("PRIVATE KEY", seed * 1000 + 50)
    gcp_pk, gcp_body = _pem("PRIVATE KEY", seed * 1000 + 60)
    rsa2, rsa2_body = _pem("RSA PRIVATE KEY", seed * 1000 + 70)  # (printed as JSON holding JSON: escaped twice)
    gcp_id = r(40, HEX, 61)
    gcp = json.dumps({"type": "service_account", "project_id": "demo", "private_key_id": gcp_id,
                      "private_key": gcp_pk + "\n", "client_email": "svc@demo.iam.gserviceaccount.com"})
    basic = base64.b64encode(f"admin:{r(14, ALNUM, 70)}".encode()).decode()
    twilio_sid = "A" + "C" + r(32, HEX, 80)
    xox = "-".join(["".join(random.Random(seed + i).choices(string.digits, k=n)) for i, n in ((1, 12), (2, 13))])
    out: list[Kind] = [
        ("anthropic-api-key", "export ANTHROPIC_API_KEY=%s", ["sk-" + "ant-api03-" + r(93, B64URL, 100)]),
        ("openai-project-key", 'client = OpenAI(api_key="%s")', ["sk-" + "proj-" + r(48, ALNUM, 101)]),
        ("openai-legacy-key", "the old key %s still works", ["sk-" + r(48, ALNUM, 102)]),
        ("aws-access-key-id", "rotated %s this morning", [akia]),
        ("aws-session-key-id", "AWS_ACCESS_KEY_ID=%s", [asia]),
        ("aws-secret-named", "[default]\naws_secret_access_key = %s", [aws_secret]),
        ("aws-secret-csv", "Access key ID,Secret access key\n" + akia + ",%s", [r(40, B64, 4)]),
        ("gcp-service-account", "%s", [gcp, gcp_id, gcp_body.split("\n")[1]]),
        ("google-api-key", "const maps = loadMaps({ key: '%s' })", ["AI" + "za" + r(35, B64URL, 103)]),
        ("azure-storage-key", "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey=%s;EndpointSuffix=core.windows.net",
         [r(86, B64, 104) + "=="]),
        ("github-pat-classic", "git clone https://%s@github.com/o/r.git", ["gh" + "p_" + r(36, ALNUM, 105)]),
        ("github-oauth", "gh auth token printed %s", ["gh" + "o_" + r(36, ALNUM, 106)]),
        ("github-app-token", "GITHUB_TOKEN: %s", ["gh" + "s_" + r(36, ALNUM, 107)]),
        ("github-fine-grained", "GH=%s", ["github" + "_pat_" + r(22, ALNUM, 108) + "_" + r(59, ALNUM, 109)]),
        ("gitlab-pat", 'curl --header "PRIVATE-TOKEN: %s" https://gitlab.example.com/api/v4/projects',
         ["gl" + "pat-" + r(20, ALNUM, 110)]),
        ("slack-bot-token", "SLACK_BOT=%s", ["xo" + "xb-" + xox + "-" + r(24, ALNUM, 111)]),
        ("slack-user-token", "token was %s", ["xo" + "xp-" + xox + "-" + r(32, ALNUM, 112)]),
        ("slack-app-token", "socket mode with %s", ["xa" + "pp-1-A0" + r(9, UPPER32, 113) + "-" + xox[:13] + "-"
                                                    + r(64, HEX, 114)]),
        ("slack-webhook", "curl -X POST https://hooks.slack.com/services/%s -d '{}'",
         ["T0" + r(8, UPPER32, 115) + "/B0" + r(8, UPPER32, 116) + "/" + r(24, ALNUM, 117)]),
        ("stripe-secret-key", "stripe.api_key = '%s'", ["sk" + "_live_" + r(24, ALNUM, 118)]),
        ("stripe-restricted-key", "restricted: %s", ["rk" + "_live_" + r(24, ALNUM, 119)]),
        ("jwt", "the session cookie was %s; it expired", [_jwt(seed)]),
        ("rsa-private-key", "$ cat ~/.ssh/id_rsa\n%s", [rsa, rsa_body.split("\n")[0], rsa_body.split("\n")[3]]),
        ("openssh-private-key", "$ cat ~/.ssh/id_ed25519\n%s", [ossh, ossh_body.split("\n")[0]]),
        ("ec-private-key", "%s", [ec, ec_body.split("\n")[1]]),
        ("pgp-private-key", "%s", [pgp, pgp_body.split("\n")[2]]),
        ("pkcs8-private-key", "key.pem:\n%s", [pk8, pk8_body.split("\n")[0]]),
        ("postgres-url", "DATABASE_URL is postgres://app:%s@db.internal:5432/app", ["Tr0ub4dor-" + r(10, ALNUM, 120)]),
        ("redis-url", "REDIS=redis://default:%s@cache:6379/0", [r(24, ALNUM, 121)]),
        ("env-password", "DB_PASSWORD=%s", ["hunter2-" + r(8, ALNUM, 122)]),
        ("env-token", "export SERVICE_TOKEN=%s", [r(40, ALNUM, 123)]),
        ("yaml-password", "database:\n  password: %s", ["correct horse battery " + r(6, string.ascii_lowercase, 124)]),
        ("json-api-key", '{"api_key": "%s", "model": "small"}', [r(32, ALNUM, 125)]),
        ("oauth-client-secret", '{"client_id": "1234.apps.example.com", "client_secret": "%s"}', [r(35, B64URL, 126)]),
        ("bearer-header", 'curl -H "Authorization: Bearer %s" https://api.example.com', [r(32, ALNUM + "._-", 127)]),
        ("basic-header", "Proxy-Authorization: Basic %s", [basic]),
        ("npm-token", "//registry.npmjs.org/:_authToken=%s", ["np" + "m_" + r(36, ALNUM, 128)]),
        ("huggingface-token", "huggingface-cli login --token %s", ["h" + "f_" + r(34, string.ascii_letters, 129)]),
        ("sendgrid-api-key", "sg = SendGridAPIClient('%s')", ["S" + "G." + r(22, B64URL, 130) + "." + r(43, B64URL, 131)]),
        ("twilio-auth-token-named", "TWILIO_AUTH_TOKEN=%s", [r(32, HEX, 132)]),
        ("twilio-api-key", "created API key %s for the worker", ["S" + "K" + r(32, HEX, 133)]),
        ("twilio-auth-token-positional", "client = Client('" + twilio_sid + "', '%s')", [r(32, HEX, 134)]),
        ("databricks-token", "databricks configure --token <<< %s", ["da" + "pi" + r(32, HEX, 135)]),
        ("kubeconfig-token", "users:\n- name: admin\n  user:\n    token: %s", [r(48, B64URL, 136)]),
        ("prose-api-key", "my API key is %s, keep it safe", [r(40, ALNUM, 137)]),
        ("cli-token-flag", "deploy --token %s --region eu", [r(36, ALNUM, 138)]),
        ("cli-password-flag", "vault login --password %s", [r(24, ALNUM + "!#%", 139)]),
        ("secret-in-prose", "the webhook secret is %s", [r(32, B64URL, 140)]),
        ("private-key-env", "PRIVATE_KEY=%s", [r(64, HEX, 141)]),
        ("url-in-json", '{"url": "https://deploy:%s@git.example.com/r.git"}', [r(20, ALNUM, 142)]),
        ("s3-presigned-url", "curl -o shot.png 'https://bucket.s3.amazonaws.com/shot.png?X-Amz-Algorithm=AWS4-HMAC-SHA256"
         "&X-Amz-Date=20260101T000000Z&X-Amz-Expires=604800&X-Amz-Signature=%s&X-Amz-Security-Token=" + r(120, B64URL, 144)
         + "'", [r(64, HEX, 143), r(120, B64URL, 144)]),
        ("azure-sas-url", "az storage blob download --blob-url 'https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02"
         "&sp=r&se=2027-01-01T00:00:00Z&spr=https&sig=%s%3D'", [r(43, ALNUM, 145)]),
        ("discord-webhook", "curl -X POST https://discord.com/api/webhooks/1234567890123456789/%s -d '{}'",
         [r(68, B64URL, 146)]),
        ("telegram-bot-token", "requests.get('https://api.telegram.org/bot123456789:%s/getUpdates')",
         [r(35, B64URL, 147)]),
        ("pem-in-json-in-json", "%s", [json.dumps(json.dumps({"key": rsa2})), rsa2_body.split("\n")[1]]),
    ]
    blocks = {"gcp-service-account", "pem-in-json-in-json", "rsa-private-key", "openssh-private-key", "ec-private-key", "pgp-private-key",
              "pkcs8-private-key"}
    # a key block fills its text whole; what must not be stored are lines of its body
    return [(kind, text.replace("%s", parts[0]), parts[1:] if kind in blocks else parts) for kind, text, parts in out]


def vendor_kinds(seed: int = 0) -> list[Kind]:
    """Vendor formats no built-in rule names, each bare in a sentence with no credential word: what
    only a maintained rule set (gitleaks') would catch."""
    def r(n: int, alphabet: str = ALNUM, k: int = 0) -> str:
        return rnd(n, alphabet, seed * 1000 + 500 + k)

    lower = string.ascii_lowercase + string.digits
    made: list[tuple[str, Callable[[], str]]] = [
        ("pypi-upload-token", lambda: "pypi-AgEIcHlwaS5vcmc" + r(70, B64URL, 1)),
        ("digitalocean-pat", lambda: "dop_v1_" + r(64, HEX, 2)),
        ("shopify-access-token", lambda: "shpat_" + r(32, HEX, 3)),
        ("grafana-service-account", lambda: "glsa_" + r(32, ALNUM, 4) + "_" + r(8, HEX, 5)),
        ("doppler-token", lambda: "dp.pt." + r(43, ALNUM, 6)),
        ("linear-api-key", lambda: "lin_api_" + r(40, ALNUM, 7)),
        ("postman-api-key", lambda: "PMAK-" + r(24, HEX, 8) + "-" + r(34, HEX, 9)),
        ("age-secret-key", lambda: "AGE-SECRET-KEY-1" + r(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 10)),
        ("hashicorp-vault-token", lambda: "hvs." + r(90, B64URL, 11)),
        ("planetscale-password", lambda: "pscale_pw_" + r(43, ALNUM, 12)),
        ("pulumi-token", lambda: "pul-" + r(40, HEX, 13)),
        ("sentry-org-token", lambda: "sntrys_eyJpYXQiOjE3MDAwMDAwMDB9_" + r(43, ALNUM, 14)),
        ("new-relic-user-key", lambda: "NRAK-" + r(27, UPPER32, 15)),
        ("supabase-token", lambda: "sbp_" + r(40, HEX, 16)),
        ("mailgun-key", lambda: "key-" + r(32, HEX, 17)),
        ("flyio-token", lambda: "fo1_" + r(43, B64URL, 18)),
        ("openrouter-key", lambda: "sk-or-v1-" + r(64, HEX, 19)),
        ("groq-key", lambda: "gsk_" + r(52, ALNUM, 20)),
        ("perplexity-key", lambda: "pplx-" + r(48, lower, 21)),
        ("notion-token", lambda: "ntn_" + r(11, string.digits, 22) + r(35, ALNUM, 23)),
    ]
    out: list[Kind] = []
    for kind, make in made:
        s = make()
        out.append((kind, f"saved {s} to the vault", [s]))
    return out


# ---------------------------------------------------------------- the probe

PLACES = ("message", "tool-output", "file-edit", "large-object", "fts")


def probe_session(folder: Path, kinds_list: list[Kind], session_id: str = "5ec7e700-0000-4000-8000-000000000001",
                  big: int = 8192) -> Path:
    """A Claude Code session with every kind's text in a prompt, a Bash output and a file Write,
    and all of them again in one Bash output longer than `big` characters (a stored object once
    the store's `object_threshold` is below it)."""

    from claude_shapes import Session

    s = Session(Path("/home/dev/proj"), session_id)
    for i, (kind, text, _) in enumerate(kinds_list):
        s.prompt(f"step {i}: here is the {kind.replace('-', ' ')} I use:\n{text}\nplease wire it in")
        s._call("Bash", {"command": f"cat config/{kind}.txt"}, text,
                {"stdout": text, "stderr": "", "interrupted": False, "isImage": False})
        s.write(f"config/{kind}.txt", f"# {kind}\n{text}\n")
    filler = "".join(f"line {n}: nothing secret here, only build output\n" for n in range(big // 40 + 1))
    everything = filler + "\n".join(text for _, text, _ in kinds_list) + "\n" + filler
    s._call("Bash", {"command": "env; cat config/*"}, everything,
            {"stdout": everything, "stderr": "", "interrupted": False, "isImage": False})
    return s.save(Path(folder))


def leaks(store_dir: Path, kinds_list: list[Kind]) -> dict[str, set[str]]:
    """kind -> where one of its secrets was found in the store: in a tape (by the event it is in),
    in a stored object, or as words of the full-text index (`engram search`)."""
    import apsw
    import orjson
    import zstandard

    from engram.tape.reader import TapeReader

    places: dict[str, list[bytes]] = {p: [] for p in PLACES}
    for path in sorted((store_dir / "tapes").glob("*.jsonl.zst")):
        with TapeReader(path) as reader:
            for line in reader.raw_lines():
                ev = orjson.loads(line)
                kind = ev.get("kind")
                place = {"msg.in": "message", "tool.result": "tool-output", "code.edit": "file-edit"}.get(kind)
                if place is None and kind == "tool.call" or kind == "meta":
                    place = "tool-output"
                places[place or "message"].append(line)
    for path in (store_dir / "objects").rglob("*"):
        if path.is_file():
            with path.open("rb") as f:
                places["large-object"].append(zstandard.ZstdDecompressor().decompressobj().decompress(f.read()))
    found: dict[str, set[str]] = {}
    for kind, _, secrets in kinds_list:
        for secret in secrets:
            forms = {secret.encode(), orjson.dumps(secret)[1:-1]}
            for place, blobs in places.items():
                if any(form in blob for blob in blobs for form in forms):
                    found.setdefault(kind, set()).add(place)
    db = apsw.Connection(str(store_dir / "index.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        for kind, _, secrets in kinds_list:
            for secret in secrets:
                words = [w for w in _words(secret) if len(w) >= 10]
                if words and db.execute("SELECT count(*) FROM fts WHERE fts MATCH ?",
                                        (" ".join(f'"{w}"' for w in words),)).fetchall()[0][0]:
                    found.setdefault(kind, set()).add("fts")
    finally:
        db.close()
    return found


def _words(s: str) -> list[str]:
    import re

    return re.findall(r"[A-Za-z0-9]+", s)
