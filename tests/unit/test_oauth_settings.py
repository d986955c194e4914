"""OAuthSettings: off by default; when on, a public URL that can be an issuer is required."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.config import OAuthSettings, Settings
from app.services.oauth import OAuthConfig


def test_off_by_default_and_nothing_is_served() -> None:
    settings = Settings(_env_file=None)
    assert settings.oauth.enabled is False
    assert OAuthConfig.from_settings(settings.oauth) is None
    with pytest.raises(ValueError, match="needs an enabled oauth settings group"):
        OAuthConfig(settings.oauth)


@pytest.mark.parametrize(
    ("public_url", "named"),
    [
        (None, "oauth.public_url is required"),
        ("http://memory.example.com", "must be https"),
        ("https://memory.example.com/team", "must be an origin only"),
        ("https://memory.example.com?x=1", "must be an origin only"),
        ("memory.example.com", "must be https"),
        ("https://user:pw@memory.example.com", "must not contain credentials"),
    ],
)
def test_enabling_needs_a_usable_public_url(public_url: str | None, named: str) -> None:
    with pytest.raises(ValidationError, match=named):
        OAuthSettings(enabled=True, public_url=public_url)


def test_the_issuer_and_resource_come_from_the_public_url() -> None:
    settings = OAuthSettings(enabled=True, public_url="https://Memory.example.com:443/", access_token_minutes=15)
    config = OAuthConfig.from_settings(settings)
    assert config is not None
    # Normalised as clients compare it: lower-case host, no default port, no trailing slash.
    assert config.issuer == "https://memory.example.com" and config.resource == "https://memory.example.com/mcp"
    assert config.access_ttl.total_seconds() == 900 and config.registration_open is True
    loopback = OAuthConfig.from_settings(OAuthSettings(enabled=True, public_url="http://127.0.0.1:8765"))
    assert loopback is not None and loopback.resource == "http://127.0.0.1:8765/mcp"
