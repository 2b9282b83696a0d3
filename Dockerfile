# The production image: the service installed (not editable) from hash-locked requirements
# alone (requirements/image.lock: the service's lock without the embedded PostgreSQL, which the
# image never runs; requirements/build.lock: the build backend, so nothing is fetched unhashed),
# run as an unprivileged user against an external PostgreSQL.
# Migrations are their own step: `docker run IMAGE evalbook migrate` (see compose.yaml).

FROM python:3.11.14-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/evalbook
COPY requirements/image.lock requirements/build.lock requirements/
RUN /opt/evalbook/bin/pip install --require-hashes -r requirements/image.lock \
    && /opt/evalbook/bin/pip install --require-hashes -r requirements/build.lock
COPY pyproject.toml README.md ./
COPY app ./app
RUN /opt/evalbook/bin/pip install --no-deps --no-build-isolation . \
    && /opt/evalbook/bin/pip uninstall -y setuptools && rm -rf /src

FROM python:3.11.14-slim-bookworm
RUN useradd --system --uid 10001 --create-home --home-dir /var/lib/evalbook evalbook
COPY --from=build /opt/evalbook /opt/evalbook
ENV PATH=/opt/evalbook/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    EVALBOOK_DATA_DIR=/var/lib/evalbook \
    EVALBOOK_EMBEDDED_DATABASE=false \
    EVALBOOK_MIGRATE_ON_START=false
USER evalbook
WORKDIR /var/lib/evalbook
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2)"]
CMD ["evalbook", "serve", "--host", "0.0.0.0", "--port", "8000"]
