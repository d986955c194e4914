"""OAuthSettings: off by default; when on, a public URL that can be an issuer is required."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.config import OAuthSettings, Settings
from app.services.auth.oauth import OAuthConfig


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


UPSTREAM = {"issuer": "https://login.example.com/realms/team", "client_id": "synaptomind"}


def test_single_sign_on_is_off_unless_an_issuer_is_set() -> None:
    settings = Settings(_env_file=None)
    assert settings.oauth.oidc.enabled is False
    assert settings.oauth.oidc.scopes == "openid email profile"
    assert settings.oauth.oidc.user_claims == ["preferred_username", "email"]
    assert settings.oauth.oidc.create_users is False


@pytest.mark.parametrize(
    ("oidc", "named"),
    [
        ({"issuer": "https://login.example.com"}, "oauth.oidc.client_id is required"),
        ({**UPSTREAM, "issuer": "http://login.example.com"}, "must be https"),
        ({**UPSTREAM, "issuer": "https://login.example.com?x=1"}, "without query"),
        ({**UPSTREAM, "scopes": "email profile"}, "must include openid"),
        ({**UPSTREAM, "user_claims": []}, "at least 1 item"),
    ],
)
def test_single_sign_on_settings_are_checked_at_start(oidc: dict[str, object], named: str) -> None:
    with pytest.raises(ValidationError, match=named):
        OAuthSettings(enabled=True, public_url="https://memory.example.com", oidc=oidc)  # type: ignore[arg-type]


def test_single_sign_on_needs_oauth_on() -> None:
    with pytest.raises(ValidationError, match=r"oauth\.oidc\.issuer needs oauth\.enabled=true and oauth\.public_url"):
        OAuthSettings(oidc=UPSTREAM)  # type: ignore[arg-type]
    on = OAuthSettings(
        enabled=True, public_url="http://127.0.0.1:8765", oidc={**UPSTREAM, "issuer": "http://127.0.0.1:9"}
    )  # type: ignore[arg-type]
    assert on.oidc.enabled and on.oidc.name == "127.0.0.1"  # http to loopback, as for the public URL


def test_the_client_secret_is_masked_in_the_settings_view() -> None:
    from app.main import settings_view

    secret = "upstream client secret value"
    settings = Settings(
        _env_file=None,
        oauth={
            "enabled": True,
            "public_url": "https://memory.example.com",
            "oidc": {**UPSTREAM, "client_secret": secret},
        },
    )
    view = settings_view(settings, "postgresql+asyncpg://u:p@db/x")
    assert view["oauth.oidc.issuer"] == UPSTREAM["issuer"] and view["oauth.oidc.client_id"] == "synaptomind"
    assert secret not in repr(view) and secret not in " ".join(f"{key} = {value}" for key, value in view.items())
    assert str(view["oauth.oidc.client_secret"]) == "**********"
    assert settings.oauth.oidc.name == "login.example.com"  # the button's name, unless provider_name says
