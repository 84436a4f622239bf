# syntax=docker/dockerfile:1
# One image, two entrypoints:
#   docker run IMAGE serve    the GitHub App's webhook endpoint and dashboard (gunicorn)
#   docker run IMAGE worker   an RQ worker: command jobs and runs (clones, builds, benchmarks)
# Base pinned to an exact Python patch release and Debian release (rebuild to take updates).
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG EXTRAS=bot,llm
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /app
RUN python -m venv /opt/venv
# Dependencies first (a layer that survives source edits), then the package, installed editable at
# /app: jobs/ finds kernels/recipes and examples/ beside it, so the runtime stage keeps the same path.
COPY pyproject.toml README.md ./
COPY jobs/ jobs/
COPY bot/ bot/
COPY kernels/ kernels/
COPY examples/ examples/
RUN /opt/venv/bin/pip install --no-cache-dir -e ".[${EXTRAS}]" \
 && /opt/venv/bin/autoresearch --help >/dev/null

FROM ${PYTHON_IMAGE} AS runtime
# git clones targets; make and a C toolchain build them (the local executor runs here).
# Versions come from the pinned Debian release of the base image.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends git make gcc g++ libc6-dev ca-certificates bubblewrap \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 --user-group --shell /usr/sbin/nologin autoresearch \
 && install -d -o autoresearch -g autoresearch /var/lib/autoresearch
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    AUTORESEARCH_WORKDIR=/var/lib/autoresearch \
    HOME=/home/autoresearch
WORKDIR /var/lib/autoresearch
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status != 200)"]
ENTRYPOINT ["autoresearch"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
