# A container image of a standardagents server.
#
#   docker build -t my-agents --build-arg PROJECT=examples/quickstart .
#   docker run -p 8000:8000 -e STANDARDAGENTS_DATABASE_URL=postgresql://user:pass@db/agents \
#              -e STANDARDAGENTS_SECRET=... -e OPENAI_API_KEY=... my-agents
#
# PROJECT is the agents project folder (relative to the build context) baked into the image.
# docs/deploying.md explains the environment, PostgreSQL, several workers and rolling upgrades.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/standardagents
COPY pyproject.toml README.md LICENSE* ./
COPY src ./src
COPY examples/quickstart ./examples/quickstart
# the PostgreSQL driver is an extra; add anthropic, sandbox or otel when the project uses them
ARG EXTRAS=postgres
RUN pip install ".[${EXTRAS}]"

ARG PROJECT=examples/quickstart
COPY ${PROJECT} /srv/project

# an unprivileged user; the project's default SQLite folder is writable for single-container trials
RUN useradd --system --uid 10001 --home-dir /srv agents \
    && mkdir -p /srv/project/.standardagents && chown -R agents /srv/project/.standardagents
USER agents
WORKDIR /srv/project

ENV WORKERS=2 PORT=8000
EXPOSE 8000
# liveness: the process answers (readiness, /readyz, is for the load balancer)
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen(f'http://127.0.0.1:{os.environ[\"PORT\"]}/healthz', timeout=2)"
# exec form through sh so $WORKERS and $PORT expand and SIGTERM still reaches the server
CMD ["sh", "-c", "exec standardagents serve /srv/project --host 0.0.0.0 --port \"$PORT\" --workers \"$WORKERS\""]
