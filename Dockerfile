# Multi-stage: build a virtual environment, then copy it into a slim runtime image.
FROM python:3.11-slim AS build
WORKDIR /src
RUN python -m venv /opt/venv
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY migrations ./migrations
RUN /opt/venv/bin/pip install --no-cache-dir -e .

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 evalbook
COPY --from=build /opt/venv /opt/venv
COPY --from=build --chown=evalbook:evalbook /src /src
WORKDIR /src
USER evalbook
ENV PATH=/opt/venv/bin:$PATH EVALBOOK_DATA_DIR=/home/evalbook/data
EXPOSE 8000
CMD ["evalbook", "serve", "--host", "0.0.0.0", "--port", "8000"]
