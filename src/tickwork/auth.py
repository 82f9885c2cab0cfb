"""API key and session token material: generate, hash for storage, read. Pure, no I/O.

A key reads ``tw_<prefix>_<secret>``::

    tw_k3v9x2qa_Q1mJ0w8m4J9c2hA2d4nS0q6n1oQ0sQb6G6xK8kq2c0E

- ``prefix``: 8 characters of ``[a-z0-9]`` (about 41 bits), stored in clear and unique, so
  an operator can name a key (``tickwork keys revoke k3v9x2qa``) and a log line can say
  which key was used without revealing it.
- ``secret``: 32 bytes from :mod:`secrets` (256 bits), URL-safe base64 without padding:
  43 characters.

Only ``sha256(key)`` (hex, of the whole key) is stored. A fast hash is the right choice
here, unlike for passwords: a password is low-entropy and a slow, salted hash (argon2,
bcrypt) is what stops a stolen table from being brute-forced, but a 256-bit random secret
cannot be guessed at any hash rate, and a fast, unsalted hash is what lets the store find
a key by an indexed equality lookup on every request. (GitHub, Stripe and PyPI tokens are
handled the same way.)

Where a secret is compared with a stored value, :func:`hmac.compare_digest` does it in
constant time; the lookup itself is by hash, whose preimage an attacker does not control.

Sessions
--------
The dashboard signs a browser in with a key once, then gives it a **session token**
(``tws_<secret>``, 256 random bits, stored only as its sha256 like a key) in its cookie,
never the key: signing out, or revoking the key, ends the session in the store, and a
stolen cookie dies with its session. A session ends after :data:`SESSION_IDLE_TIMEOUT`
unused and after :data:`SESSION_LIFETIME` however busy.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
from datetime import timedelta

KEY_SCHEME = "tw"
PREFIX_LENGTH = 8
PREFIX_ALPHABET = string.ascii_lowercase + string.digits
SECRET_BYTES = 32
"""Random bytes in a key's secret: 256 bits, 43 characters of URL-safe base64."""
SECRET_LENGTH = 43
KEY_LENGTH = len(KEY_SCHEME) + 1 + PREFIX_LENGTH + 1 + SECRET_LENGTH
"""55 characters."""

SESSION_SCHEME = "tws"
SESSION_TOKEN_LENGTH = len(SESSION_SCHEME) + 1 + SECRET_LENGTH
"""47 characters."""
SESSION_IDLE_TIMEOUT = timedelta(hours=12)
"""A session unused this long ends: a browser left overnight must sign in again."""
SESSION_LIFETIME = timedelta(days=7)
"""A session ends this long after sign-in, however busy (the cookie's ``Max-Age`` too)."""

_SESSION_TOKEN = re.compile(rf"{SESSION_SCHEME}_[A-Za-z0-9_-]{{{SECRET_LENGTH}}}")
_KEY = re.compile(
    rf"{KEY_SCHEME}_(?P<prefix>[a-z0-9]{{{PREFIX_LENGTH}}})_[A-Za-z0-9_-]{{{SECRET_LENGTH}}}"
)


def generate_key() -> tuple[str, str]:
    """A new key and its prefix: ``("tw_<prefix>_<secret>", "<prefix>")``."""
    prefix = "".join(secrets.choice(PREFIX_ALPHABET) for _ in range(PREFIX_LENGTH))
    secret = secrets.token_urlsafe(SECRET_BYTES)
    assert len(secret) == SECRET_LENGTH
    return f"{KEY_SCHEME}_{prefix}_{secret}", prefix


def hash_key(key: str) -> str:
    """The stored form of ``key`` (or of a session token): sha256 of the whole of it, 64
    hex digits."""
    return hashlib.sha256(key.encode()).hexdigest()


def generate_session_token() -> str:
    """A new session token: ``tws_<secret>``, the secret as a key's (256 bits)."""
    secret = secrets.token_urlsafe(SECRET_BYTES)
    assert len(secret) == SECRET_LENGTH
    return f"{SESSION_SCHEME}_{secret}"


def is_session_token(text: str) -> bool:
    """Whether ``text`` has a session token's form (never raises)."""
    return _SESSION_TOKEN.fullmatch(text) is not None


def key_prefix(key: str) -> str | None:
    """The prefix of a well-formed key, or None for anything else (never raises)."""
    match = _KEY.fullmatch(key)
    return match.group("prefix") if match else None


def verify_key(key: str, key_hash: str) -> bool:
    """Whether ``key`` hashes to ``key_hash``, compared in constant time."""
    return hmac.compare_digest(hash_key(key), key_hash)
