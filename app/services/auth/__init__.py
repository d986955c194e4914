"""Who is calling: API tokens, passwords, console sessions, OAuth 2.1, upstream OIDC sign-in, per-token rate limits."""
