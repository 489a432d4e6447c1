"""Secret redaction: each class found (and its near-misses left alone), idempotence, config
patterns, and a real Claude Code session captured end to end with secrets seeded into it.

Every secret below is generated at run time from pieces, so that no string in this file looks
like a live credential to a secret scanner (and none is one).
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.errors import BadInput
from engram.capture.redact import Redactor, looks_random, name_kind
from engram.tape.reader import TapeReader

FIXTURES = Path(__file__).parent / "fixtures"
ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"


def rnd(n: int, alphabet: str = ALNUM, seed: int = 0) -> str:
    """A reproducible random string that has at least one digit, one upper and one lower case."""
    r = random.Random(f"{seed}-{n}-{alphabet}")
    while True:
        s = "".join(r.choice(alphabet) for _ in range(n))
        kinds = [any(c.isdigit() for c in s), any(c.isupper() for c in s), any(c.islower() for c in s)]
        needed = [k for k, a in zip(kinds, (string.digits, string.ascii_uppercase, string.ascii_lowercase))
                  if any(c in alphabet for c in a)]
        if all(needed):
            return s


def jwt(seed: int = 0) -> str:
    def seg(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return ".".join([seg({"alg": "HS256", "typ": "JWT"}), seg({"sub": f"user-{seed}", "iat": 1700000000 + seed}),
                     rnd(43, B64URL, seed)])


def pem(label: str, seed: int = 0, escaped: bool = False) -> tuple[str, str]:
    """A private key block and its body (what must disappear)."""
    body = "\n".join(rnd(64, B64, seed + i) for i in range(4)) + "\n" + rnd(20, B64, seed + 9) + "=="
    nl = "\\n" if escaped else "\n"
    block = f"-----BEGIN {label}-----{nl}{body.replace(chr(10), nl)}{nl}-----END {label}-----"
    return block, body.replace("\n", nl)


# ---------------------------------------------------------------- the classes
#
# (class, text holding a secret, the secret parts that must go, the context that must stay)

def secret_cases(seed: int = 0) -> list[tuple[str, str, list[str], list[str]]]:
    ant = "sk-" + "ant-api03-" + rnd(93, B64URL, seed)
    oai = "sk-" + "proj-" + rnd(48, ALNUM, seed + 1)
    akia = "AK" + "IA" + rnd(16, string.ascii_uppercase + "234567", seed + 2)
    aws_secret = rnd(40, B64, seed + 3)
    gcp_key, gcp_body = pem("PRIVATE KEY", seed + 4, escaped=True)
    gcp_id = rnd(40, HEX, seed + 5)
    aiza = "AI" + "za" + rnd(35, B64URL, seed + 6)
    azure = rnd(86, B64, seed + 7) + "=="
    ghp = "gh" + "p_" + rnd(36, ALNUM, seed + 8)
    ghpat = "github" + "_pat_" + rnd(22, ALNUM, seed + 9) + "_" + rnd(59, ALNUM, seed + 10)
    glpat = "gl" + "pat-" + rnd(20, ALNUM, seed + 11)
    xoxb = "xo" + "xb-" + "".join(random.Random(seed).choices(string.digits, k=12)) + "-" + \
        "".join(random.Random(seed + 1).choices(string.digits, k=13)) + "-" + rnd(24, ALNUM, seed + 12)
    hook = "T0" + rnd(8, string.ascii_uppercase + string.digits, seed + 13) + "/B0" + \
        rnd(8, string.ascii_uppercase + string.digits, seed + 14) + "/" + rnd(24, ALNUM, seed + 15)
    stripe = "sk" + "_live_" + rnd(24, ALNUM, seed + 16)
    rk = "rk" + "_live_" + rnd(24, ALNUM, seed + 17)
    token = jwt(seed)
    rsa, rsa_body = pem("RSA PRIVATE KEY", seed + 18)
    ossh, ossh_body = pem("OPENSSH PRIVATE KEY", seed + 19)
    ec, ec_body = pem("EC PRIVATE KEY", seed + 20)
    pgp, pgp_body = pem("PGP PRIVATE KEY BLOCK", seed + 21)
    db_pw = "Tr0ub4dor-" + rnd(10, ALNUM, seed + 22)
    env_pw = "hunter2-" + rnd(8, ALNUM, seed + 23)
    env_secret = rnd(32, ALNUM, seed + 24)
    yaml_pw = "correct horse battery " + rnd(6, string.ascii_lowercase, seed + 25)
    prose_pw = "hunter" + rnd(4, string.digits, seed + 40)  # a plain word and digits, then a comma
    export_tok = rnd(40, ALNUM, seed + 26)
    bearer = rnd(32, ALNUM + "._-", seed + 27)
    basic = base64.b64encode(f"admin:{rnd(12, ALNUM, seed + 28)}".encode()).decode()
    npm = "np" + "m_" + rnd(36, ALNUM, seed + 29)
    hf = "h" + "f_" + rnd(34, string.ascii_letters, seed + 30)
    sg = "S" + "G." + rnd(22, B64URL, seed + 31) + "." + rnd(43, B64URL, seed + 32)
    twilio = rnd(32, HEX, seed + 33)
    dapi = "da" + "pi" + rnd(32, HEX, seed + 34)
    api_key = rnd(32, ALNUM, seed + 35)
    twilio_sk = "S" + "K" + rnd(32, HEX, seed + 36)
    twilio_sid = "A" + "C" + rnd(32, HEX, seed + 37)
    twilio_positional = rnd(32, HEX, seed + 38)
    prose_key = rnd(40, ALNUM, seed + 39)
    return [
        ("anthropic-api-key", f"export ANTHROPIC_API_KEY={ant}", [ant], ["export ANTHROPIC_API_KEY="]),
        ("openai-api-key", f'client = OpenAI(api_key="{oai}")', [oai], ["client = OpenAI(api_key="]),
        ("aws-access-key-id", f"aws_access_key_id = {akia}", [akia], ["aws_access_key_id"]),
        ("aws-secret-access-key", f"[default]\naws_secret_access_key = {aws_secret}\n", [aws_secret],
         ["aws_secret_access_key = "]),
        ("gcp-service-account-key",
         json.dumps({"type": "service_account", "project_id": "demo-project", "private_key_id": gcp_id})[:-1]
         + f', "private_key": "{gcp_key}\\n", "client_email": "svc@demo-project.iam.gserviceaccount.com"}}',
         [gcp_id, gcp_body[20:80]], ['"private_key": "', "client_email"]),
        ("google-api-key", f"const maps = loadMaps({{ key: '{aiza}' }})", [aiza], ["loadMaps"]),
        ("azure-storage-key",
         f"DefaultEndpointsProtocol=https;AccountName=demo;AccountKey={azure};EndpointSuffix=core.windows.net",
         [azure], ["AccountName=demo;AccountKey=", ";EndpointSuffix=core.windows.net"]),
        ("github-token", f"git remote set-url origin https://x-access-token:{ghp}@github.com/o/r.git\nGH={ghpat}",
         [ghp, ghpat], ["github.com/o/r.git"]),
        ("gitlab-token", f'curl --header "PRIVATE-TOKEN: {glpat}" https://gitlab.example.com/api/v4/projects',
         [glpat], ["PRIVATE-TOKEN: "]),
        ("slack-token", f"SLACK_BOT={xoxb}", [xoxb], ["SLACK_BOT="]),
        ("slack-webhook", f"curl -X POST https://hooks.slack.com/services/{hook} -d '{{\"text\":\"hi\"}}'",
         [hook], ["https://hooks.slack.com/services/"]),
        ("stripe-key", f"stripe.api_key = '{stripe}'\nrestricted: {rk}", [stripe, rk], ["stripe.api_key"]),
        ("jwt", f"the session cookie was {token}; it expired", [token.split(".")[2], token], ["session cookie"]),
        ("private-key", f"$ cat ~/.ssh/id_rsa\n{rsa}\n$ cat id_ed25519\n{ossh}\n{ec}\n{pgp}",
         [rsa_body, ossh_body, ec_body, pgp_body, rsa_body.split("\n")[1]],
         ["-----BEGIN RSA PRIVATE KEY-----", "-----END OPENSSH PRIVATE KEY-----", "-----BEGIN PGP PRIVATE KEY BLOCK-----"]),
        ("url-password", f"DATABASE_URL_RO is postgres://app_user:{db_pw}@db.internal:5432/app",
         [db_pw], ["postgres://app_user:", "@db.internal:5432/app"]),
        ("secret-assignment",
         f"DB_PASSWORD={env_pw}\nexport SERVICE_TOKEN={export_tok}\nCLIENT_SECRET=\"{env_secret}\"\n"
         f"password: {yaml_pw}\nthe admin password: {prose_pw}, then log in\n",
         [env_pw, export_tok, env_secret, yaml_pw, prose_pw], ["DB_PASSWORD=", "export SERVICE_TOKEN=", "password: "]),
        ("auth-header", f'curl -H "Authorization: Bearer {bearer}" https://api.example.com\n'
                        f"Proxy-Authorization: Basic {basic}\n",
         [bearer, basic], ["Authorization: Bearer ", "Proxy-Authorization: Basic "]),
        ("npm-token", f"//registry.npmjs.org/:_authToken={npm}", [npm], ["//registry.npmjs.org/:_authToken="]),
        ("huggingface-token", f"huggingface-cli login --token {hf}", [hf], ["huggingface-cli login --token"]),
        ("sendgrid-api-key", f"sg = SendGridAPIClient('{sg}')", [sg], ["SendGridAPIClient("]),
        ("twilio-credential", f"TWILIO_AUTH_TOKEN={twilio}", [twilio], ["TWILIO_AUTH_TOKEN="]),
        ("databricks-token", f"databricks configure --token <<< {dapi}", [dapi], ["databricks configure"]),
        ("json-secret", json.dumps({"api_key": api_key, "model": "small"}), [api_key], ['"api_key": "', '"model"']),
        ("twilio-api-key", f"twilio api:core:keys:create gave {twilio_sk} (a standard key)", [twilio_sk],
         ["twilio api:core:keys:create gave ", " (a standard key)"]),
        ("twilio-credential", f"client = Client('{twilio_sid}', '{twilio_positional}')", [twilio_positional],
         [f"client = Client('{twilio_sid}', '"]),
        ("generic-secret", f"my API key is {prose_key}, keep it safe", [prose_key], ["my API key is ", ", keep it"]),
    ]


CASES = secret_cases()

# Near-misses, each paired with the class it resembles: none of them may change.
NEAR_MISSES: list[tuple[str, str]] = [
    ("anthropic-api-key", "keys look like sk-ant-api03-... (see the console); mine is sk-ant-xxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
    ("openai-api-key", "pip install sk-learn-compatible-transformers-for-pipelines and task-runner-1234567890abcdef"),
    ("aws-access-key-id", "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 AKIA1234 AKIAIOSFODNN7EXAMPLE"),
    ("aws-secret-access-key", "aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}\nAWS_SECRET_ACCESS_KEY=\n"),
    ("gcp-service-account-key", '{"type": "service_account", "private_key_id": "", "private_key": "<PRIVATE KEY>"}'),
    ("google-api-key", "the key starts with AIza and then 35 more characters: AIzaXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"),
    ("azure-storage-key", "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey=<your-account-key>;"),
    ("github-token", "export GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx  # placeholder"),
    ("gitlab-token", "a token looks like glpat-xxxxxxxxxxxxxxxxxxxx; set GITLAB_TOKEN=${CI_JOB_TOKEN}"),
    ("slack-token", "SLACK_BOT_TOKEN=xoxb-your-bot-token-here"),
    ("slack-webhook", "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"),
    ("stripe-key", "use sk_live_ keys in production and sk_test_xxxxxxxxxxxxxxxxxxxxxxxx in tests"),
    ("jwt", 'header = base64("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9") + "." + payload'),
    ("private-key", 'if line.startswith("-----BEGIN RSA PRIVATE KEY-----"):\n    kind = "rsa"  # -----END RSA PRIVATE KEY-----'),
    ("url-password", "see https://github.com/o/r and postgres://user:${DB_PASSWORD}@db/app, git@github.com:o/r.git, "
                     "http://localhost:8080/health and redis://:password@cache:6379"),
    ("secret-assignment", "password = get_password()\nAPI_KEY=\nSECRET=${SECRET}\nTOKEN=<your-token>\nAPI_KEY=xxx\n"
                          "def login(user, password=None):\n    return connect(user=user, password=password)\n"
                          "token: str\nmax_tokens: 4096\nPWD=/home/dev/project\nauthor: Jane Doe\n"
                          "sort_key: created_at\ntoken_type: bearer\nSSH_AUTH_SOCK=/run/user/1000/keyring/ssh\n"
                          "lib/phoenix/token.ex:97: Phoenix.Token.verify/4\n"
                          "audit = sorted(gateways, key=lambda token: token.gateway)\n    token: float = 0\n"
                          "\tprivateCart := s.page[pendingShard]\n    private_key = \"cursor:{}\".format(rows)\n"
                          "  let privateFrame = journalRef.fieldFrame || 16;\n  grant = %{record | token: status}\n"
                          "    empty_token: int = 0\n    secret = \"%s:%s\" % (user, host)\n"
                          # seen in real Codex sessions: a workflow's OIDC permission, a pass@k test name
                          "permissions:\n  contents: read\n  id-token: write\n"
                          "(pass) pass_at_k: all fail runs all trials [55.00ms]\n"
                          # and in real Claude Code sessions (TypeScript, Go, a password manager's errors)
                          "const { privateKey: fileIpnsPrivateKey, migratedIpnsPrivateKey } = unwrap(x);\n"
                          "  userPrivateKey: Uint8Array\n): Promise<void>\nconst CheckpointTrailerKey = "
                          "\"Entire-Checkpoint\"\nerror: 1Password: failed to fill whole buffer\n"
                          "withCredentials: true.\n"),
    ("auth-header", 'curl -H "Authorization: Bearer $TOKEN" https://api\n'
                    'authorization = request.headers.get("Authorization")\nAuthorization: required'),
    ("npm-token", "npm_config_cache=/tmp/npm-cache npm_lifecycle_event=test"),
    ("huggingface-token", "from huggingface_hub import hf_hub_download; hf_hub_download(repo_id='gpt2')"),
    ("sendgrid-api-key", "SG.com and SG.1234 are not keys"),
    ("twilio-credential", "TWILIO_AUTH_TOKEN=your_auth_token\nclient = Client(account_sid, auth_token)"),
    ("databricks-token", "the databricks api (dapi) prefix: dapi1234"),
    ("twilio-api-key", "keys start with SK: SKXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX, SK0123 or SKU-1234567890abcdef"),
    ("generic-secret", "the token is stored in ~/.config/gh/hosts.yml; the password was correct-horse-battery-staple\n"
                       "gh auth login --with-token $GITHUB_TOKEN; secret 9fceb02d0ae598e95dc970b74767f19372d61af8\n"
                       "token 123e4567-e89b-12d3-a456-426614174000 and the api key is ImportedFromTheEnvironment\n"
                       "use --token src/engram/capture/redact_v2.py and --password build_2024_release_candidate_3\n"
                       "credentials are in s3://bucket-name/path/to/object-v2/file.json; password for sso_2fa_enabled_user\n"),
    ("json-secret", json.dumps({"api_key": "YOUR_API_KEY", "token_type": "Bearer", "max_tokens": 1024,
                                "cache_key": "9fceb02d0ae598e95dc970b74767f19372d61af8",
                                "session_id": "123e4567-e89b-12d3-a456-426614174000"})),
]

BENIGN = [
    "9fceb02d0ae598e95dc970b74767f19372d61af8",
    "123e4567-e89b-12d3-a456-426614174000",
    "2026-02-10T21:11:56.906Z",
    "data:image/png;base64," + base64.b64encode(bytes(range(256)) * 3).decode(),
    "const API_BASE = 'https://api.example.com/v1';\nfetch(`${API_BASE}/users`)",
    "def get_password(self) -> str:\n    return keyring.get_password('svc', self.user)",
]


def test_at_least_fifteen_classes_each_with_a_near_miss() -> None:
    classes = {c for c, *_ in CASES}
    assert len(classes) >= 15
    assert classes == {c for c, _ in NEAR_MISSES}


@pytest.mark.parametrize("cls,text,secrets,context", CASES, ids=[c[0] for c in CASES])
def test_each_class_is_redacted_and_its_context_kept(cls: str, text: str, secrets: list[str],
                                                     context: list[str]) -> None:
    r = Redactor()
    out = r.text(text)
    for s in secrets:
        assert s not in out, f"{cls}: {s!r} survived in {out!r}"
    for c in context:
        assert c in out, f"{cls}: the context {c!r} was lost from {out!r}"
    assert f"[REDACTED:{cls}]" in out
    assert r.counts[cls] >= 1
    assert set(r.counts) == {cls}, f"only {cls} expected, got {dict(r.counts)}"


@pytest.mark.parametrize("cls,text", NEAR_MISSES, ids=[c for c, _ in NEAR_MISSES])
def test_near_misses_are_left_alone(cls: str, text: str) -> None:
    r = Redactor()
    assert r.text(text) == text
    assert not r.counts


@pytest.mark.parametrize("text", BENIGN)
def test_ordinary_text_is_left_alone(text: str) -> None:
    r = Redactor()
    assert r.text(text) == text
    assert r.value({"text": text, "stdout": [text]}) == {"text": text, "stdout": [text]}
    assert not r.counts


def test_redacting_twice_changes_nothing_and_counts_nothing() -> None:
    everything = "\n".join(text for _, text, _, _ in CASES)
    r = Redactor()
    once = r.text(everything)
    counted = sum(r.counts.values())
    assert counted >= len(CASES)
    assert r.text(once) == once
    assert sum(r.counts.values()) == counted
    ev = {"kind": "tool.result", "stdout": everything, "input": {"api_key": "Zq" + rnd(30)}}
    red = r.value(ev)
    counted = sum(r.counts.values())
    assert r.value(red) == red
    assert sum(r.counts.values()) == counted


def test_env_dump_lines() -> None:
    pw, tok, key = rnd(16, seed=41), rnd(32, seed=42), rnd(24, seed=43)
    dump = (f"HOME=/home/dev\nPWD=/home/dev/app\nOLDPWD=/home/dev\nPGPASSWORD={pw}\nGITHUB_TOKEN_RO={tok}\n"
            f"MY_SERVICE_API_KEY={key}\nLANG=C.UTF-8\nSSH_AUTH_SOCK=/tmp/ssh-agent.sock\nTOKENIZERS_PARALLELISM=false\n")
    r = Redactor()
    out = r.text(dump)
    assert pw not in out and tok not in out and key not in out
    assert "PGPASSWORD=[REDACTED:secret-assignment]" in out
    assert "GITHUB_TOKEN_RO=[REDACTED:secret-assignment]" in out
    for keep in ("HOME=/home/dev", "PWD=/home/dev/app", "LANG=C.UTF-8", "SSH_AUTH_SOCK=/tmp/ssh-agent.sock",
                 "TOKENIZERS_PARALLELISM=false"):
        assert keep in out
    assert r.counts == {"secret-assignment": 3}


def test_code_keeps_references_and_loses_literals() -> None:
    lit = "s3cr3t-" + rnd(10, seed=44)
    code = (f'DB_PASSWORD = "{lit}"\npassword = os.environ["DB_PASSWORD"]\ntoken = self.token\n'
            f"const apiKey = process.env.API_KEY;\nsettings.SECRET_KEY = get_secret()\n")
    r = Redactor()
    out = r.text(code)
    assert lit not in out
    assert out == code.replace(lit, "[REDACTED:secret-assignment]")


def assert_kept(text: str) -> None:
    """Nothing in `text` is taken for a secret."""
    r = Redactor()
    assert r.text(text) == text and not r.counts


def redacted(line: str, *secrets: str) -> str:
    """`line` redacted, checked to have a marker and none of `secrets` left."""
    out = Redactor().text(line)
    assert "[REDACTED:" in out and not any(x in out for x in secrets), (line, out)
    return out


def test_names_tell_lookup_keys_labels_and_lookups_from_secrets() -> None:
    """Seen in a real Flutter + FastAPI project's sessions: storage keys named `…TokenKey`, i18n
    labels under `…Password`, a docstring's `secret: Plain TOTP secret.`, a TS option followed by a
    `//` comment or in markdown's inline code, and Python keyword arguments on their own lines. None is a secret; the same
    names with secret-shaped values still are."""
    code = ("  static const String accessTokenKey = 'access_token';\n"
            "  static const String _masterKeyStorageKey = 'encrypted_field_master_key';\n"
            'VERIFY_RATE_LIMIT_KEY = "2fa_verify_rate:"\n'
            '  "confirmPassword": "Confirm Password",\n  "forgotPassword": "Forgot Password?",\n'
            "    Args:\n        secret: Plain TOTP secret.\n"
            "  withCredentials: true, // Required for httpOnly cookies\n"
            '        access_token=result["access_token"],\n                refresh_token=provider_refresh_token,\n'
            "- Axios configured with `withCredentials: true` for cookie support\n- `api_key: OPENAI_API_KEY`\n"
            # and in their subagents' work (FSM1/cipher-box): an enum, a type, code in inline code
            "  PASSWORD: 'passwordFactor',\nexport type Web3AuthNoModalOptions = IWeb3AuthCoreOptions & {\n"
            "4. Zero the plaintext key: `plainKey.fill(0)`\n"
            # a file shown inside JSON text: its line breaks are escaped twice
            "  16→  privateKey: Uint8Array;\\n    17→};\\n    18→\\n    19→  // keys kept in memory only\\n\n")
    assert_kept(code)
    words = "_".join(rnd(6, string.ascii_lowercase, seed=60 + i) for i in range(3))
    tok = rnd(24, ALNUM, seed=63)
    secrets = [f'app.secret_key = "{words}"', f'API_KEY = "{words}"', f"sessionTokenKey = '{tok}'",
               f"password: my password {words.split('_')[0]}", f'"confirmPassword": "Confirm {words}"',
               f"  DB_PASSWORD={words},", f"run `password: {words}` and", f"set `TOKEN={tok[:12]}` first",
               f"password: {words.upper()}", f"password: '{words.replace('_', '').capitalize()}Factor'",
               f"      password: {words}_password", f"GRAFANA_ADMIN_PASSWORD={words}_password"]
    for line in secrets:
        out = redacted(line, words, tok[:12])
        assert out.count("`") == line.count("`"), "markdown's closing backtick stays"


def test_cache_and_storage_key_names_keep_their_values() -> None:
    """Seen in a real Rust + TypeScript project's sessions (dougnukem/orpheus): rust-cache's
    `shared-key` in CI workflows and a localStorage key. Their values are names; a generated key
    under the same names is still a secret."""
    code = ("      - uses: Swatinem/rust-cache@v2\n        with:\n          shared-key: publish-crates\n"
            "          shared-key: lint\n"
            'export const STORAGE_KEY = "orpheus:v1:results";\n')
    assert_kept(code)
    psk, account = rnd(44, B64, seed=70), rnd(86, B64, seed=71) + "=="
    for line in (f"shared_key: {psk}", f"AZURE_STORAGE_KEY={account}", f'{{"shared-key": "{psk}"}}'):
        redacted(line, psk, account)


def test_token_names_over_prose_addresses_and_paths_keep_them() -> None:
    """Lines from real sessions (CyberVPN, cyspbot, leeson, agentv): a token's lifetime, prose
    after `token:`, an endpoint documented as `Private:`, a Rust path and a flag's state. A token
    or a credential never holds a space, and an address is not a secret unless it carries one."""
    code = ("- Access token: 15 minutes\n- Refresh token: 7 days\n"
            "- Invalid subject token: JWT/JWS/claim validation failures, including a JWT header `kid`\n"
            "- Credentials: both providers work in the interactive TUI with the same `auth.json`\n"
            "//! - Private: `wss://ws-auth.kraken.com/v2`\n"
            "the issuer of the OIDC token: `https://token.actions.githubusercontent.com`\n"
            "    let any_credentials_missing = CredentialKey::ALL\n"
            '{"github-stateless-s2s-token": "enabled"}\n')
    assert_kept(code)
    tok, path = rnd(32, seed=72), rnd(40, seed=73)
    for line, secret in ((f"token: Bearer {tok}", tok), ("password: my password " + tok[:8], tok[:8]),
                         (f'WEBHOOK_SECRET="https://discord.com/api/webhooks/1234567/{path}"', path)):
        redacted(line, secret)


def test_secret_named_keys_of_a_structure() -> None:
    """A tool's input `{"api_key": …}` has no context in the string itself: its key is the context."""
    key = rnd(32, seed=45)
    ev = {"kind": "tool.call", "name": "mcp__svc__query", "input": {"api_key": key, "query": "select 1",
                                                                    "max_tokens": "4096", "token_type": "bearer"}}
    r = Redactor()
    out = r.event(ev)
    assert out["input"]["api_key"] == "[REDACTED:json-secret]"
    assert out["input"]["query"] == "select 1" and out["input"]["max_tokens"] == "4096"
    assert out["input"]["token_type"] == "bearer"
    assert ev["input"]["api_key"] == key, "the caller's event is not modified"
    assert r.counts == {"json-secret": 1}


def test_events_are_redacted_everywhere_and_returned_as_is_when_clean() -> None:
    secrets = {cls: text for cls, text, _, _ in CASES}
    ev = {"kind": "msg.in", "text": secrets["github-token"], "nested": [{"x": (secrets["jwt"],)}],
          "n": 3, "ok": True, "none": None}
    r = Redactor()
    out = r.event(ev)
    assert "[REDACTED:github-token]" in out["text"]
    assert "[REDACTED:jwt]" in out["nested"][0]["x"][0]
    assert out["n"] == 3 and out["ok"] is True and out["none"] is None
    clean = {"kind": "msg.out", "text": "All tests pass; the tokenizer handles keys and passwords fine.", "id": "x"}
    assert r.event(clean) is clean


def test_strings_of_one_event_never_combine() -> None:
    """Strings of an event are scanned together; a match must never join two of them."""
    r = Redactor()
    ev = {"a": "export DB_PASSWORD=", "b": "hunter2-not-a-value-of-a", "c": "postgres://u:", "d": "pw@host/db"}
    assert r.event(ev) == ev
    assert not r.counts
    flag = ["deploy --password ab", "cdefghijklmnopq"]  # a flag's value never runs into the next string
    assert r.events([flag, {"x": flag}]) == [flag, {"x": flag}]
    assert not r.counts
    parts = {"a": "ends with a backslash \\", "b": '"api_key": "' + rnd(30, seed=46) + '"'}
    out = r.event(parts)
    assert out["a"] == parts["a"] and "[REDACTED:json-secret]" in out["b"]


def test_quotes_and_tabs_in_an_event_hide_no_secret() -> None:
    """An event's strings are searched in their own text, as a lone string is: not in the JSON
    form, where `"` and a tab are escaped (these three stayed in events until 2026-11-28)."""
    value = rnd(28, seed=61)
    texts = [f'my token "{value}"', f"TOKEN\t= {value}", f'cfg = {{\\"api_token\\": \\"{value}\\"}}']
    for text in texts:
        alone = Redactor().text(text)
        assert value not in alone, text
        assert Redactor().event({"kind": "tool.result", "output": {"stdout": text}})["output"]["stdout"] == alone


def test_a_tapes_events_redacted_together_as_each_alone() -> None:
    """Capture redacts all the events of a tape at once (`Redactor.events`): the same events, the
    same counts as one by one, an unchanged event returned as it is."""
    evs: list[Any] = [{"kind": "msg.in", "text": text, "id": f"e{i}"} for i, (_, text, _, _) in enumerate(CASES)]
    evs += [{"kind": "tool.result", "output": {"stdout": "x = 1\n" * 400 + text}} for _, text, _, _ in CASES[:5]]
    evs += [{"kind": "msg.out", "text": text} for _, text in NEAR_MISSES] + [{"kind": "msg.out", "text": t} for t in BENIGN]
    evs += [{"kind": "tool.call", "input": {"api_key": rnd(30, seed=62), "n": [1, (CASES[0][1],)]}}]
    together, alone = Redactor(), Redactor()
    out = together.events(evs)
    assert out == [alone.event(ev) for ev in evs]
    assert together.counts == alone.counts and together.counts
    assert all(o is ev for o, ev in zip(out, evs) if o == ev)


def test_both_scanners_find_the_same_needles() -> None:
    """Short texts are scanned with one alternation, long ones pattern by pattern: same needles."""
    from engram.capture.redact import _SCANNER, _SCANNERS

    texts = [text for _, text, _, _ in CASES] + [text for _, text in NEAR_MISSES] + BENIGN
    for text in texts:
        lb = text.encode("ascii", "replace").lower()
        one = sorted((m.lastgroup, m.start()) for m in _SCANNER.finditer(lb))
        each = sorted((m.lastgroup, m.start()) for p in _SCANNERS for m in p.finditer(lb))
        assert one == each, text
    long_text = "x = 1\n" * 1000 + "\n".join(text for _, text, _, _ in CASES)
    r = Redactor()
    out = r.text(long_text)
    assert set(r.counts) == {cls for cls, *_ in CASES}
    assert all(s not in out for _, _, parts, _ in CASES for s in parts)


COUNT_COMPILES = """
import re, sys
compiled = []
compile_ = re.compile
def counted(*a, **k):
    if sys._getframe(1).f_globals.get("__name__") == "engram.capture.redact":
        compiled.append(a[0])
    return compile_(*a, **k)
re.compile = counted
from engram.capture.redact import Redactor
at_import = len(compiled)
r = Redactor()
plain = r.text("the build passed after the retry loop was fixed; nothing secret in this line at all")
after_plain = len(compiled)
token = r.text("export GH=" + sys.argv[1])
print(at_import, after_plain, len(compiled), plain.count("[REDACTED"), token.count("[REDACTED:github-token]"))
"""


def test_a_rule_s_patterns_are_compiled_when_its_needle_first_shows() -> None:
    """Every `engram ingest` imports the redactor; compiling its ~60 patterns took ~20 ms of a 1 MB
    append's start. Importing it compiles none; a text with no needle compiles the scanner it
    needs alone, and a token is still redacted, compiling its own rule's pattern then."""
    token = "gh" + "p_" + rnd(36, ALNUM, 71)
    proc = subprocess.run([sys.executable, "-c", COUNT_COMPILES, token], capture_output=True, text=True, check=True,
                          timeout=120)
    at_import, after_plain, after_token, plain_marks, token_marks = map(int, proc.stdout.split())
    assert at_import == 0
    assert (after_plain, plain_marks) == (1, 0), "the scanner of short texts: one alternation of the needles"
    assert token_marks == 1 and 0 < after_token - after_plain <= 3


def test_aws_secret_key_with_no_name_next_to_its_key_id() -> None:
    """A leak the secrets probe found: the 40-character secret of the CSV IAM hands out, next to
    an access key id that was redacted while the secret stayed; and a git log's hashes next to
    an id are not secrets."""
    akia = "AK" + "IA" + rnd(16, string.ascii_uppercase + "234567", 51)
    secret = rnd(40, B64, 52)
    r = Redactor()
    for text in (f"User name,Password,Access key ID,Secret access key\nci,,{akia},{secret}\n",
                 f"aws configure list\n  access_key     ****************{akia[-4:]}\n{akia}\n  secret_key {secret}\n",
                 f"the key pair: {akia} / {secret}"):
        out = r.text(text)
        assert secret not in out and akia not in out, out
        assert "[REDACTED:aws-secret-access-key]" in out and "[REDACTED:aws-access-key-id]" in out
    log = f"commit 9fceb02d0ae598e95dc970b74767f19372d61af8\n    rotate {akia}\n" \
          f"path/to/a/file/deep/inside/the/repository/tree.py 1234567890"
    out = Redactor().text(log)
    assert "9fceb02d0ae598e95dc970b74767f19372d61af8" in out and "tree.py" in out and akia not in out


def test_twilio_keys_bare_and_by_position() -> None:
    """Two more leaks the probe found: a bare API key `SK…`, and an auth token passed by position
    after its account SID (also on the next line, and as curl's user:password)."""
    sid, token, key = "A" + "C" + rnd(32, HEX, 53), rnd(32, HEX, 54), "S" + "K" + rnd(32, HEX, 55)
    for text in (f"client = Client(\n    '{sid}',\n    '{token}',\n)",
                 f"curl -X POST https://api.twilio.com/2010-04-01/Accounts/{sid}/Messages.json -u {sid}:{token}",
                 f"TWILIO_API_KEY={key}"):
        r = Redactor()
        out = r.text(text)
        assert token not in out and key not in out, out
        assert sid in out or sid not in text, "the account SID is an identifier and stays"
    out = Redactor().text(f"account {sid}: 9fceb02d0ae598e95dc970b74767f19372d61af8 and f00 and {sid[:10]}")
    assert "9fceb02d0ae598e95dc970b74767f19372d61af8" in out


def test_names_and_randomness() -> None:
    assert name_kind("OPENAI_API_KEY") == name_kind("apiKey") == name_kind("DB_PASSWD") == 2
    assert name_kind("client_secret") == name_kind("x-api-key") == name_kind("_authToken") == 2
    for plain in ("monkey", "author", "tokenizer", "max_tokens", "token_type", "password_file", "key_id", "PWD",
                  "keyboard", "public_key", "primary_key"):
        assert name_kind(plain) == 0, plain
    assert name_kind("key") == name_kind("auth") == name_kind("private") == 1
    assert name_kind("DB_PASS") == name_kind("smtp_pass") == 2
    assert name_kind("pass") == name_kind("pass_at_k") == name_kind("pass_through") == 0
    assert looks_random(rnd(24)) and not looks_random("correct_horse_battery") and not looks_random("short1A")


def test_private_key_truncated_and_in_json() -> None:
    block, body = pem("RSA PRIVATE KEY", 50)
    head = "\n".join(block.split("\n")[:3])  # `head -3 id_rsa`: no END line
    r = Redactor()
    out = r.text(head)
    assert body.split("\n")[0] not in out and body.split("\n")[1] not in out
    assert out.startswith("-----BEGIN RSA PRIVATE KEY-----")
    escaped, ebody = pem("PRIVATE KEY", 51, escaped=True)
    out = r.text(json.dumps({"pem": escaped.replace("\\n", "\n")}))
    assert "[REDACTED:private-key]" in out and ebody[:40] not in out


def test_extra_patterns_from_config() -> None:
    r = Redactor([{"name": "employee-id", "pattern": r"EMP-\d{6}"},
                  {"name": "ticket-secret", "pattern": r"ticket=(?P<secret>[a-z]{8})"}])
    out = r.text("paid EMP-123456 with ticket=abcdefgh; EMP-12 is short")
    assert out == "paid [REDACTED:employee-id] with ticket=[REDACTED:ticket-secret]; EMP-12 is short"
    assert r.text(out) == out
    assert r.counts == {"employee-id": 1, "ticket-secret": 1}
    assert r.value({"x": ["EMP-654321"]}) == {"x": ["[REDACTED:employee-id]"]}
    # an extra pattern never reaches into a marker, so it cannot undo idempotence
    greedy = Redactor([{"name": "caps", "pattern": r"[A-Z]+"}])
    once = greedy.text("ABC def GHI")
    assert once == "[REDACTED:caps] def [REDACTED:caps]" and greedy.text(once) == once


def test_the_rules_digest_names_the_rules_code_and_the_config_patterns() -> None:
    """What the record of clean tapes keeps (engram.tape.redacted) and `engram push` compares with today's."""
    plain = Redactor().digest
    assert plain is not None and len(plain) == 32 and plain == Redactor([]).digest
    one = [{"name": "employee-id", "pattern": "EMP-[0-9]{6}"}]
    assert Redactor(one).digest == Redactor([dict(one[0])]).digest != plain
    two = [*one, {"name": "caps", "pattern": "[A-Z]+"}]
    assert len({plain, Redactor(one).digest, Redactor(two).digest, Redactor(two[::-1]).digest}) == 4


def test_a_tapes_id_does_not_depend_on_the_rules_that_redacted_it(tmp_path: Path) -> None:
    """The rules a tape is clean under are recorded beside it, not in it: the same events give the
    same tape (and id) whatever engram, patterns or Python wrote them, so two clones capturing one
    transcript share one tape."""
    from engram.tape.redacted import recorded
    from engram.tape.writer import write_tape

    store = tmp_path / ".engram"
    (store / "tapes").mkdir(parents=True)
    (store / "objects").mkdir()
    events = [{"kind": "meta", "v": 1, "harness": "raw", "session_id": "s"}, {"kind": "msg.in", "text": "hello"}]
    one = write_tape(store / "tapes", store / "objects", events, rules=Redactor().digest)
    two = write_tape(store / "tapes", store / "objects", events,
                     rules=Redactor([{"name": "employee-id", "pattern": "EMP-[0-9]{6}"}]).digest)
    assert one.id == two.id and one.path.read_bytes() == two.path.read_bytes()
    assert recorded(store)[one.id] == {Redactor().digest, Redactor([{"name": "employee-id", "pattern": "EMP-[0-9]{6}"}]).digest}


@pytest.mark.parametrize("item,fragment", [
    ({"name": "broken", "pattern": "foo(["}, "broken"),
    ({"name": "empty", "pattern": "x*"}, "empty"),
    ({"name": "bad name!", "pattern": "x"}, "bad name!"),
    ({"pattern": "x"}, "name"),
])
def test_bad_extra_patterns_are_bad_input_naming_the_pattern(item: dict[str, str], fragment: str) -> None:
    with pytest.raises(BadInput, match=re.escape(fragment)):
        Redactor([item])


def test_never_raises_on_odd_strings() -> None:
    r = Redactor([{"name": "x", "pattern": "q{3}"}])
    odd = ["\ud800 password=\udfff" + "a" * 20, "\x00" * 100 + "API_KEY=\x00abc", "sk-" * 5000,
           "-----BEGIN RSA PRIVATE KEY-----" + "A" * 100_000, "://" * 3000 + "@", "=" * 10_000,
           "key=" * 5000, "Authorization: " * 2000, "é" * 50 + "TOKEN=" + "ü" * 30]
    for s in odd:
        out = r.text(s)
        assert isinstance(out, str) and r.text(out) == out
    assert r.value({"\ud800": ["\udfff" * 20, {"password": "\ud800" * 10}]})


SECRETISH = st.sampled_from(
    ["sk-", "sk-ant-", "AKIA", "ghp_", "github_pat_", "glpat-", "xoxb-", "npm_", "hf_", "SG.", "dapi", "eyJ",
     "AIza", "://", "@", ":", "=", " = ", ": ", '"', "'", "\\", "\n", "\x00", "-----BEGIN RSA PRIVATE KEY-----",
     "-----END RSA PRIVATE KEY-----", "PRIVATE KEY", "password", "PASSWORD=", "api_key", "\"api_key\": \"",
     "Authorization: Bearer ", "export TOKEN=", "secret", "[REDACTED:", "[REDACTED:jwt]", "]", "$", "${", "}",
     "AccountKey=", "private_key", "twilio", "hooks.slack.com/services/", "k_live_", "bearer ", "_"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.text(max_size=40), SECRETISH, st.text(alphabet=ALNUM + "+/=_-.", min_size=8,
                                                                      max_size=60)), max_size=30))
def test_property_never_raises_and_is_idempotent(pieces: list[str]) -> None:
    s = "".join(pieces)
    r = Redactor()
    once = r.text(s)
    counted = sum(r.counts.values())
    assert r.text(once) == once
    assert sum(r.counts.values()) == counted
    assert "redaction-error" not in r.counts
    ev = {"a": s, "b": [once, s[: len(s) // 2], s[len(s) // 2:]]}
    red = r.value(ev)
    counted = sum(r.counts.values())
    assert r.value(red) == red
    assert sum(r.counts.values()) == counted


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.one_of(SECRETISH, st.text(max_size=20)), max_size=6).map("".join), max_size=8))
def test_property_an_events_strings_are_redacted_as_if_alone(strings: list[str]) -> None:
    """Strings of one event are scanned together; the result must not depend on their neighbours."""
    alone, together = Redactor(), Redactor()
    assert together.value(strings) == [alone.text(s) for s in strings]
    assert together.counts == alone.counts


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.one_of(SECRETISH, st.text(max_size=20)), max_size=6).map("".join), max_size=12))
def test_property_a_tapes_strings_are_redacted_as_if_alone(strings: list[str]) -> None:
    """All the events of a tape are scanned together; no event's result depends on the others."""
    alone, together = Redactor(), Redactor()
    assert together.events([{"text": s} for s in strings]) == [{"text": alone.text(s)} for s in strings]
    assert together.counts == alone.counts


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_property_random_text(s: str) -> None:
    r = Redactor()
    once = r.text(s)
    assert r.text(once) == once
    assert "redaction-error" not in r.counts


# ---------------------------------------------------------------- end to end


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _seeded_session(src: Path, dst: Path, payload: str) -> None:
    """The short Claude Code session with `payload` in a user message, a Bash output and an Edit."""
    records = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    for rec in records:
        msg = rec.get("message") or {}
        if rec.get("type") == "user" and isinstance(msg.get("content"), str):
            msg["content"] += "\n\nhere is what I have:\n" + payload
        content = msg.get("content")
        if rec.get("type") == "user" and isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_result" and block.get("tool_use_id") == "toolu_0116Hyi5v8ut7Ffb7d8qV1Sc":
                    block["content"] = payload
                    block["is_error"] = False
                    rec["toolUseResult"] = {"stdout": payload, "stderr": "", "interrupted": False, "isImage": False}
    last = next(r for r in reversed(records) if r.get("type") == "assistant")
    cwd = last["cwd"]
    edit_id = "toolu_01EditSeededSecrets000001"
    call = json.loads(json.dumps(last))
    call["uuid"], call["parentUuid"] = "11111111-2222-4333-8444-555555555555", last["uuid"]
    call["message"]["content"] = [{"type": "tool_use", "id": edit_id, "name": "Edit", "input": {
        "file_path": f"{cwd}/config/settings.env", "old_string": "# settings", "new_string": "# settings\n" + payload}}]
    new_lines = ["# settings", *payload.split("\n")]
    result = {k: v for k, v in last.items() if k not in ("message", "requestId")}
    result.update(type="user", uuid="11111111-2222-4333-8444-666666666666", parentUuid=call["uuid"])
    result["message"] = {"role": "user", "content": [
        {"tool_use_id": edit_id, "type": "tool_result", "content": "The file has been updated."}]}
    result["toolUseResult"] = {
        "filePath": f"{cwd}/config/settings.env", "oldString": "# settings", "newString": "# settings\n" + payload,
        "originalFile": "# settings\n", "userModified": False, "replaceAll": False,
        "structuredPatch": [{"oldStart": 1, "oldLines": 1, "newStart": 1, "newLines": len(new_lines),
                             "lines": ["-# settings", *("+" + line for line in new_lines)]}],
    }
    records += [call, result]
    dst.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_end_to_end_no_seeded_secret_reaches_a_tape_or_an_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from engram.cli.main import main

    cases = secret_cases(seed=7)
    payload = "\n".join(text for _, text, _, _ in cases)
    secrets = [s for _, _, parts, _ in cases for s in parts]
    session = tmp_path / "session.jsonl"
    _seeded_session(FIXTURES / "claude" / "short.jsonl", session, payload)
    raw = session.read_bytes()
    assert all(s.encode() in raw or json.dumps(s)[1:-1].encode() in raw for s in secrets), "seeding failed"

    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    monkeypatch.chdir(repo)
    assert main(["init"]) == 0
    # a low threshold sends long strings to .engram/objects/, which must be clean too
    (repo / ".engram" / "config.toml").write_text("[ingest]\nobject_threshold = 200\n")
    capsys.readouterr()
    assert main(["ingest", str(session)]) == 0
    summary = capsys.readouterr().out
    m = re.search(r"(\d+) secrets redacted", summary)
    assert m, summary
    assert int(m.group(1)) >= 3 * len(cases), summary

    tapes = sorted((repo / ".engram" / "tapes").glob("*.jsonl.zst"))
    objects = [p for p in (repo / ".engram" / "objects").rglob("*") if p.is_file()]
    assert tapes and objects
    blobs = []
    for path in tapes:  # every frame of the tape, not only the first
        with TapeReader(path) as reader:
            blobs.append(b"\n".join(reader.raw_lines()))
    for path in objects:
        with path.open("rb") as f:
            blobs.append(zstandard.ZstdDecompressor().decompressobj().decompress(f.read()))
    everything = b"\n".join(blobs)
    for s in secrets:
        for form in {s.encode(), json.dumps(s)[1:-1].encode()}:
            assert form not in everything, f"{s[:12]}… reached the store"
    decoded = everything.decode("utf-8", "replace")
    for cls, *_ in cases:
        assert f"[REDACTED:{cls}]" in decoded, f"no {cls} marker in the store"
    assert "mix phx.server doesnt seem to start" in decoded, "ordinary text survives"


def test_a_long_lived_store_redacts_with_the_pattern_added_after_it_started(spotter: Path, repo: Path) -> None:
    """The language server, `engram watch` and the MCP endpoint hold one Store for days: a pattern
    the user adds to config.toml meanwhile must apply to their next ingest."""
    from conftest import SPOTTER_MAIN, SPOTTER_OTHER, shown_events

    from engram.capture.pipeline import ingest_paths
    from engram.store.repo import Store

    store = Store.discover(repo)
    assert ingest_paths(store, [spotter / f"{SPOTTER_OTHER}.jsonl"]).tapes == 1
    (store.config_path).write_text('[redact]\npatterns = [{name = "ticket", pattern = "spotter-gqc"}]\n')
    stats = ingest_paths(store, [spotter / f"{SPOTTER_MAIN}.jsonl"])
    assert stats.redactions["ticket"] >= 1
    text = json.dumps(shown_events(repo, SPOTTER_MAIN))
    assert (text.count("spotter-gqc"), "[REDACTED:ticket]" in text) == (0, True)
