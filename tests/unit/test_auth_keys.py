"""API key material (tickwork.auth): the key's shape, its stored hash, reading it back."""

from __future__ import annotations

import hashlib
import re

from tickwork import auth


def test_a_key_is_tw_prefix_secret_of_55_characters() -> None:
    key, prefix = auth.generate_key()

    assert re.fullmatch(r"tw_[a-z0-9]{8}_[A-Za-z0-9_-]{43}", key)
    assert len(key) == auth.KEY_LENGTH == 55
    assert key.startswith(f"tw_{prefix}_")


def test_keys_and_prefixes_do_not_repeat() -> None:
    made = [auth.generate_key() for _ in range(200)]

    assert len({key for key, _ in made}) == 200
    assert len({prefix for _, prefix in made}) == 200


def test_the_stored_hash_is_the_sha256_hex_of_the_whole_key() -> None:
    key, _ = auth.generate_key()

    assert auth.hash_key(key) == hashlib.sha256(key.encode()).hexdigest()
    assert len(auth.hash_key(key)) == 64


def test_verify_key_accepts_the_key_and_nothing_else() -> None:
    key, _ = auth.generate_key()
    stored = auth.hash_key(key)

    assert auth.verify_key(key, stored)
    assert not auth.verify_key(key[:-1] + ("A" if key[-1] != "A" else "B"), stored)
    assert not auth.verify_key("", stored)


def test_key_prefix_reads_well_formed_keys_only() -> None:
    key, prefix = auth.generate_key()

    assert auth.key_prefix(key) == prefix
    assert auth.key_prefix(key + "x") is None
    assert auth.key_prefix(key[:-1]) is None
    assert auth.key_prefix(key.replace("tw_", "tx_", 1)) is None
    assert auth.key_prefix(f"tw_{prefix.upper()}_{key[12:]}") is None
    assert auth.key_prefix(f"Bearer {key}") is None
    assert auth.key_prefix("") is None
