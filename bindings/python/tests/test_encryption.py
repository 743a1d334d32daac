"""Encryption at rest: a 64-byte key encrypts the file and its WAL; a wrong or missing key and
a changed page raise DecryptError; files convert both ways (docs/encryption.md)."""

from __future__ import annotations

import shutil

import pytest

import ferry

from conftest import SCHEMA

KEY = bytes(range(64))
OTHER_KEY = bytes(64 - i for i in range(64))
MARKER = "py-plaintext-marker-5c1e"


def fill(db, count, start=0):
    with db.write():
        for i in range(start, start + count):
            db.create("Person", {"_id": f"{MARKER}-{i}", "name": MARKER, "age": i})


def test_encrypted_file_and_wal_hold_no_plaintext(tmp_path):
    path = tmp_path / "enc.ferry"
    with ferry.Database.open(path, schema=SCHEMA, encryption_key=KEY) as db:
        fill(db, 200)
        wal = path.with_name(path.name + "-wal").read_bytes()
        assert len(wal) > 4096
        assert MARKER.encode() not in wal
        # What a crash leaves behind (the file and its WAL) recovers with the key.
        shutil.copy(path, tmp_path / "crash.ferry")
        shutil.copy(str(path) + "-wal", tmp_path / "crash.ferry-wal")
    data = path.read_bytes()
    assert MARKER.encode() not in data
    assert not data.startswith(b"SQLite format 3")
    with ferry.Database.open(path, encryption_key=KEY) as db:
        assert db.get("Person", f"{MARKER}-7")["age"] == 7
    with ferry.Database.open(tmp_path / "crash.ferry", encryption_key=KEY) as db:
        assert len(db.query("Person", "TRUEPREDICATE")) == 200


def test_wrong_missing_and_unneeded_keys(tmp_path):
    path = tmp_path / "enc.ferry"
    ferry.Database.open(path, schema=SCHEMA, encryption_key=KEY).close()
    with pytest.raises(ferry.DecryptError, match="key does not decrypt") as info:
        ferry.Database.open(path, encryption_key=OTHER_KEY)
    assert info.value.code == -25
    with pytest.raises(ferry.DecryptError, match="is encrypted"):
        ferry.Database.open(path)
    plain = tmp_path / "plain.ferry"
    ferry.Database.open(plain, schema=SCHEMA).close()
    with pytest.raises(ferry.DecryptError, match="not encrypted"):
        ferry.Database.open(plain, encryption_key=KEY)
    with pytest.raises(ferry.InvalidArgumentError, match="64 bytes"):
        ferry.Database.open(path, encryption_key=KEY[:32])
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.Database.open(in_memory="enc", schema=SCHEMA, encryption_key=KEY)


def test_changed_page_raises_never_crashes(tmp_path):
    path = tmp_path / "tamper.ferry"
    with ferry.Database.open(path, schema=SCHEMA, encryption_key=KEY) as db:
        fill(db, 1000)
    data = bytearray(path.read_bytes())
    for offset in range(4096 + 500, len(data), 4096):
        data[offset] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(ferry.DecryptError, match="authentication"):
        with ferry.Database.open(path, encryption_key=KEY) as db:
            db.query("Person", "TRUEPREDICATE")


def test_change_key_converts_both_ways(tmp_path):
    path = tmp_path / "convert.ferry"
    with ferry.Database.open(path, schema=SCHEMA) as db:
        fill(db, 50)
    assert MARKER.encode() in path.read_bytes()
    ferry.Database.change_key(path, None, KEY)
    assert MARKER.encode() not in path.read_bytes()
    with pytest.raises(ferry.DecryptError):
        ferry.Database.change_key(path, OTHER_KEY, None)
    ferry.Database.change_key(path, KEY, OTHER_KEY)
    with ferry.Database.open(path, encryption_key=OTHER_KEY) as db:
        assert len(db.query("Person", "TRUEPREDICATE")) == 50
    ferry.Database.change_key(str(path), OTHER_KEY, None)
    with ferry.Database.open(path) as db:
        assert len(db.query("Person", "TRUEPREDICATE")) == 50


def test_app_user_cache_is_encrypted_with_the_app_key(tmp_path):
    # No server needed: creating the App opens (and creates) its user cache.
    app = ferry.App(app_id="enc-app", base_url="http://127.0.0.1:9", base_directory=tmp_path, encryption_key=KEY)
    app.close()
    cache = (tmp_path / "ferry-users.sqlite").read_bytes()
    assert cache and not cache.startswith(b"SQLite format 3")
    with pytest.raises(ferry.DecryptError):
        ferry.App(app_id="enc-app", base_url="http://127.0.0.1:9", base_directory=tmp_path)
    with pytest.raises(ferry.DecryptError):
        ferry.App(app_id="enc-app", base_url="http://127.0.0.1:9", base_directory=tmp_path,
                  encryption_key=OTHER_KEY)
    ferry.App(app_id="enc-app", base_url="http://127.0.0.1:9", base_directory=tmp_path,
              encryption_key=KEY).close()
