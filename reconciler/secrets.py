"""Recognise env values that look like secrets, so they never reach git history or a JobSet spec. Pure.

Three tests, any one flags a value:
1. a known credential format (private key block, AWS access key id, GitHub/Slack/Google/Hugging Face/OpenAI
   style tokens, JWTs, a URL with a password);
2. a key named like a credential (`*_TOKEN`, `*_SECRET`, `PASSWORD`, `API_KEY`, ...) with a literal value of
   8+ characters that is not a reference (`$VAR`, a file path);
3. a long random-looking string: 32+ token characters with Shannon entropy above 4.2 bits per character
   (hex digests such as git SHAs stay at or below 4.0 and are not flagged).
"""

from __future__ import annotations

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
_SECRET_WORDS = {"SECRET", "TOKEN", "PASSWORD", "PASSWD", "PWD", "CREDENTIAL", "CREDENTIALS", "APIKEY", "PASSPHRASE"}
_SECRET_PAIRS = {("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY"), ("SECRET", "KEY"), ("AUTH", "KEY")}
_TOKENISH = re.compile(r"^[A-Za-z0-9+/=_\-.]{32,}$")


def secret_reason(key: str, value: str) -> str | None:
    """Why `key: value` looks like a secret, or None."""
    for pattern, what in _FORMATS:
        if pattern.search(value):
            return f"looks like {what}"
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", key.upper()) if p]
    named = any(p in _SECRET_WORDS for p in parts) or any(pair in _SECRET_PAIRS for pair in itertools.pairwise(parts))
    is_reference = value.startswith(("$", "/", "./")) or " " in value.strip()
    if named and len(value) >= 8 and not is_reference:
        return "is named like a credential and holds a literal value"
    if _TOKENISH.match(value) and _entropy(value) > 4.2 and any(c.isdigit() for c in value) \
            and any(c.isalpha() for c in value):
        return "looks like a random token (long, high-entropy string)"
    return None


def _entropy(value: str) -> float:
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())
