# One image, two entrypoints:
#   docker run IMAGE serve    the GitHub App's webhook endpoint and dashboard (gunicorn)
#   docker run IMAGE worker   an RQ worker: command jobs and runs (clones, builds, benchmarks)
# The base is plain Debian 12 and Python is Debian's python3 (3.11), so the image builds the same from
# the registry's `debian:12.11-slim` or, where no registry is reachable, from a base made locally
# from Debian's own packages (deploy/image-check.sh: debootstrap --variant=minbase bookworm, then
# `docker import`; `--build-arg BASE=autoresearch-base:bookworm`). Rebuild to take updates.
# No `# syntax=` line: that would make BuildKit pull a frontend image, which an offline build cannot.
ARG BASE=debian:12.11-slim

FROM ${BASE} AS build
ARG EXTRAS=bot,llm
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# Versions come from the pinned Debian release of the base image.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
RUN python3 -m venv /opt/venv
# Dependencies first, in a layer that only pyproject.toml (and the wheelhouse) invalidates: the
# requirements of the package and its extras, read from pyproject.toml with tomllib. Then the
# package itself, installed editable at /app without dependencies: jobs/ finds kernels/recipes and
# examples/ beside it, so the runtime stage keeps the same path. A source edit rebuilds only that
# and the copies into the runtime stage (90 s here, against 280 s for the dependencies).
# A wheelhouse the host filled (deploy/image-check.sh, with --build-arg OFFLINE_WHEELS=1) serves
# builds that cannot reach the package index themselves; otherwise it holds only its README and
# pip uses the index.
ARG OFFLINE_WHEELS=""
COPY pyproject.toml ./
COPY deploy/wheels/ /wheels/
RUN python3 -c "import sys, tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + [r for e in sys.argv[1].split(',') if e for r in p['optional-dependencies'][e]]))" \
      "${EXTRAS}" > /tmp/requirements.txt \
 && /opt/venv/bin/pip install --no-cache-dir ${OFFLINE_WHEELS:+--no-index --find-links /wheels} \
      -r /tmp/requirements.txt "setuptools>=68" wheel
COPY README.md ./
COPY jobs/ jobs/
COPY bot/ bot/
COPY kernels/ kernels/
COPY examples/ examples/
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps --no-build-isolation -e . \
 && /opt/venv/bin/autoresearch --help >/dev/null

FROM ${BASE} AS runtime
# python3 runs the venv; git clones targets; make and a C toolchain build them (the local executor
# runs here); bubblewrap is the sandbox every step that runs target code goes through.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 git make gcc g++ libc6-dev ca-certificates bubblewrap \
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
# AUTORESEARCH_HEALTH_PORT: where `serve` listens when it is not 8000 (the host-network deploy).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('AUTORESEARCH_HEALTH_PORT', '8000'); sys.exit(urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=4).status != 200)"]
ENTRYPOINT ["autoresearch"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
