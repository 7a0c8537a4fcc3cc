"""Recognise env values and command arguments that look like secrets, so they never reach git history or a
JobSet spec. Pure.

Three tests, any one flags a value:
1. a known credential format (private key block, AWS access key id, GitHub/Slack/Google/Hugging Face/OpenAI
   style tokens, JWTs, a URL with a password);
2. a key named like a credential (`*_TOKEN`, `*_SECRET`, `PASSWORD`, `API_KEY`, ...) with a literal value that
   is not a reference (`$VAR`, a file path): any length (a short password is still a password), except a short
   number or a boolean (`TOKEN_LIMIT: "4096"`, `USE_TOKEN: "true"`);
3. a long random-looking string: 32+ token characters with Shannon entropy above 4.2 bits per character
   (hex digests such as git SHAs stay at or below 4.0 and are not flagged).

In a command the key is what names the value: `--api-key=VALUE`, `--password VALUE`, `NAME=VALUE` (also inside
a shell string such as `sh -c "export HF_TOKEN=... && ..."`).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections import Counter

_FORMATS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key"),
    (re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), "an AWS access key id"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), "a GitHub token"),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}"), "a GitHub token"),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), "a Slack token"),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"), "a Google API key"),
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}"), "a Hugging Face token"),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{20,}"), "a secret API key (sk-...)"),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), "a JSON Web Token"),
    (re.compile(r"://[^/\s:@]+:[^/\s@]+@"), "a URL with a password"),
)
_ANY_FORMAT = re.compile("|".join(f"(?:{pattern.pattern})" for pattern, _ in _FORMATS))
"""Any of `_FORMATS`, in one search: most values match none, and one pass over them is cheaper than ten."""
_SECRET_WORDS = {"SECRET", "TOKEN", "PASSWORD", "PASSWD", "PWD", "CREDENTIAL", "CREDENTIALS", "APIKEY", "PASSPHRASE"}
_SECRET_PAIRS = {("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY"), ("SECRET", "KEY"), ("AUTH", "KEY")}
_NOT_SECRET = {"true", "false", "yes", "no", "on", "off", "none", "null"}
_TOKENISH = re.compile(r"^[A-Za-z0-9+/=_\-.]{32,}$")


def secret_reason(key: str, value: str) -> str | None:
    """Why `key: value` looks like a secret, or None."""
    if _ANY_FORMAT.search(value):
        for pattern, what in _FORMATS:
            if pattern.search(value):
                return f"looks like {what}"
    if _named_literal(key, value):
        return "is named like a credential and holds a literal value"
    if _random_token(value):
        return "looks like a random token (long, high-entropy string)"
    return None


def _named_literal(key: str, value: str) -> bool:
    """`key` names a credential and `value` is a literal (not a reference, a short number or a boolean)."""
    if not _named(key):
        return False
    is_reference = value.startswith(("$", "/", "./")) or " " in value.strip()
    harmless = len(value) < 8 and (value.isdigit() or value.lower() in _NOT_SECRET)
    return bool(value) and not is_reference and not harmless


@functools.lru_cache(maxsize=4096)
def _named(key: str) -> bool:
    """`key` names a credential (memoized: jobs repeat the same env names and flags)."""
    parts = [p for p in _NON_WORD.split(key.upper()) if p]
    return any(p in _SECRET_WORDS for p in parts) or any(pair in _SECRET_PAIRS for pair in itertools.pairwise(parts))


_NON_WORD = re.compile(r"[^A-Za-z0-9]+")


def _random_token(value: str) -> bool:
    return len(value) >= 32 and bool(_TOKENISH.match(value)) and _entropy(value) > 4.2 \
        and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _entropy(value: str) -> float:
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())



_FLAG = re.compile(r"^-{1,2}[A-Za-z][A-Za-z0-9_.-]*$")


def command_secret(command: tuple[str, ...] | list[str]) -> list[tuple[int, str]]:
    """(index, why) of each command argument that holds something that looks like a secret."""
    out: list[tuple[int, str]] = []
    for i, arg in enumerate(command):
        why = _argument_secret(arg, command[i - 1] if i else "")
        if why:
            out.append((i, why))
    return out


@functools.lru_cache(maxsize=4096)
def _argument_secret(arg: str, previous: str) -> str | None:
    """Why `arg` (after `previous`) looks like a secret, or None. Memoized: commands repeat from job to job
    (`python -m train`, `torchrun --nproc-per-node 8`)."""
    if _ANY_FORMAT.search(arg):  # the whole argument first: a private key block spans lines
        for pattern, what in _FORMATS:
            if pattern.search(arg):
                return f"looks like {what}"
    words = arg.split()
    for j, raw in enumerate(words):
        word = raw.strip("\"'`;&|()")
        key, eq, value = word.partition("=")
        if eq:
            key, value = key.lstrip("-"), value.strip("\"'")
            shown = f"`{key}=`"
        else:
            flag = previous if j == 0 else words[j - 1]
            key, value = (flag.lstrip("-"), word) if _FLAG.match(flag) else ("", word)
            shown = f"`{flag}`"
        if _named_literal(key, value):
            return f"sets {shown}, which is named like a credential, to a literal value"
        # a path (configs/video/diffusion-12b.yaml) is not a token; a long random part of one still is
        if any(_random_token(part) for part in value.split("/")):
            return "looks like a random token (long, high-entropy string)"
    return None
