# syntax=docker/dockerfile:1
# The three splitsched images from one Dockerfile, one target each:
#
#   docker build --target watcher   -t splitsched-watcher:0.1.0 .
#   docker build --target scheduler -t splitsched-scheduler:0.1.0 .
#   docker build --target binder    -t splitsched-binder:0.1.0 .
#
# Each image: python slim, a virtualenv holding the splitsched wheel and only the
# third-party packages that service imports (the *_WITHOUT lists below drop the rest; a
# unit test checks the services really never import them), a non-root user, the
# service's console script as entrypoint and a HEALTHCHECK on its /readyz.
# docker-compose.yml and the Helm chart (helm/splitsched) use these targets.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- the wheel, and one requirements file per service ------------------------------------
FROM ${PYTHON_IMAGE} AS wheel
# PIP_CERT: a CA bundle for pip, for builds behind a TLS-intercepting proxy. Mount it for the
# build only, never COPY it (scripts/build-images.sh: podman build -v BUNDLE:...:ro).
ARG PIP_CERT
# Distributions (pyproject [project].dependencies) a service never imports.
# numpy: only the scheduler's algorithm uses it. kubernetes: every service reads its
# kubeconfig / in-cluster config with it (the scheduler only for its leader Lease).
ARG WATCHER_WITHOUT="numpy"
ARG SCHEDULER_WITHOUT=""
ARG BINDER_WITHOUT="numpy"
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY splitsched/ splitsched/
COPY services/ services/
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
 && python -c 'import os, re, tomllib; \
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]; \
name = lambda d: re.match(r"[A-Za-z0-9._-]+", d)[0].lower(); \
[open(f"/wheels/{svc}.txt", "w").write("".join(d + "\n" for d in deps if name(d) not in os.environ[svc.upper() + "_WITHOUT"].split())) for svc in ("watcher", "scheduler", "binder")]'

# ---- one virtualenv per service ----------------------------------------------------------
FROM ${PYTHON_IMAGE} AS venv-watcher
ARG PIP_CERT
COPY --from=wheel /wheels /wheels
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-deps /wheels/splitsched-*.whl \
 && /opt/venv/bin/pip install --no-cache-dir -r /wheels/watcher.txt \
 && /opt/venv/bin/pip uninstall --yes pip

FROM ${PYTHON_IMAGE} AS venv-scheduler
ARG PIP_CERT
COPY --from=wheel /wheels /wheels
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-deps /wheels/splitsched-*.whl \
 && /opt/venv/bin/pip install --no-cache-dir -r /wheels/scheduler.txt \
 && /opt/venv/bin/pip uninstall --yes pip

FROM ${PYTHON_IMAGE} AS venv-binder
ARG PIP_CERT
COPY --from=wheel /wheels /wheels
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-deps /wheels/splitsched-*.whl \
 && /opt/venv/bin/pip install --no-cache-dir -r /wheels/binder.txt \
 && /opt/venv/bin/pip uninstall --yes pip

# ---- what the three images share ----------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# A fixed numeric uid/gid, so Kubernetes' runAsNonRoot can check it.
RUN groupadd --system --gid 10001 splitsched \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin splitsched
WORKDIR /

# ---- watcher: list/watch -> gRPC 50051, HTTP 9091 ----------------------------------------
FROM runtime AS watcher
COPY --from=venv-watcher /opt/venv /opt/venv
USER 10001:10001
EXPOSE 50051 9091
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; a = os.environ.get('SPLITSCHED_WATCHER_HTTP_LISTEN', ':9091'); urllib.request.urlopen('http://127.0.0.1:' + a.rsplit(':', 1)[1] + '/readyz', timeout=2)"]
ENTRYPOINT ["splitsched-watcher"]

# ---- scheduler: Scheduler API gRPC 50050, HTTP 9090 ---------------------------------------
FROM runtime AS scheduler
COPY --from=venv-scheduler /opt/venv /opt/venv
USER 10001:10001
EXPOSE 50050 9090
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; a = os.environ.get('SPLITSCHED_SCHEDULER_HTTP_LISTEN', ':9090'); urllib.request.urlopen('http://127.0.0.1:' + a.rsplit(':', 1)[1] + '/readyz', timeout=2)"]
ENTRYPOINT ["splitsched-scheduler"]

# ---- binder: gRPC 50052, HTTP 9092 --------------------------------------------------------
FROM runtime AS binder
COPY --from=venv-binder /opt/venv /opt/venv
USER 10001:10001
EXPOSE 50052 9092
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; a = os.environ.get('SPLITSCHED_BINDER_HTTP_LISTEN', ':9092'); urllib.request.urlopen('http://127.0.0.1:' + a.rsplit(':', 1)[1] + '/readyz', timeout=2)"]
ENTRYPOINT ["splitsched-binder"]
