"""[auth] key loading: inline or file, file permissions, required mode without a key."""

from __future__ import annotations

from pathlib import Path

import pytest

from spur.auth.keys import AuthConfigError, load_key, load_settings
from spur.config.model import AuthConfig, AuthMode


def test_inline_key_and_file_key(tmp_path: Path) -> None:
    assert load_key("s3cret", None) == b"s3cret"
    key = tmp_path / "jwt.key"
    key.write_bytes(b"\x00raw-bytes\n")
    key.chmod(0o600)
    assert load_key(None, key) == b"\x00raw-bytes\n"  # raw, as Slurm reads jwt_hs256.key
    assert load_key(None, None) is None


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644, 0o602])
def test_key_file_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    key = tmp_path / "jwt.key"
    key.write_bytes(b"topsecret")
    key.chmod(mode)
    with pytest.raises(AuthConfigError) as exc:
        load_key(None, key)
    text = str(exc.value)
    assert str(key) in text and "group/other" in text and f"chmod 600 {key}" in text
    assert "topsecret" not in text


def test_missing_or_empty_key_file(tmp_path: Path) -> None:
    with pytest.raises(AuthConfigError, match="cannot read"):
        load_key(None, tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    empty.chmod(0o600)
    with pytest.raises(AuthConfigError, match="empty"):
        load_key(None, empty)


def test_required_mode_needs_a_key() -> None:
    with pytest.raises(AuthConfigError) as exc:
        load_settings(AuthConfig(mode=AuthMode.REQUIRED))
    assert "auth.jwt_key" in str(exc.value) and "auth.jwt_key_file" in str(exc.value)
    settings = load_settings(AuthConfig(mode=AuthMode.REQUIRED, jwt_key="abc", broker_ttl_secs=60))
    assert settings.has_key and settings.mode == "required" and settings.broker_ttl_secs == 60
    assert "abc" not in repr(settings)
    assert not load_settings(AuthConfig()).has_key  # permissive without a key is allowed
