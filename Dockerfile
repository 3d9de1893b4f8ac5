# boostbandit decision service. Default command: API + learner in one process with an embedded
# Redis (data in /data). docker-compose.yml runs the scaled-out shape instead.
# The other commands, run in the container, find that Redis by themselves (BOOSTBANDIT_DATA_DIR is
# /data, the socket /data/redis.sock): docker exec <container> boostbandit export --model m - > m.jsonl
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY boosters ./boosters
COPY learners ./learners
COPY service ./service
# warm_up: the compiled trees' kernels go to numba's on-disk cache in the image (no compiling at
# the first decision of a container)
RUN pip install . \
    && python -c "from learners.compiled import warm_up; warm_up()" \
    && useradd --create-home --uid 10001 boostbandit \
    && mkdir -p /data \
    && chown boostbandit:boostbandit /data

USER boostbandit
ENV BOOSTBANDIT_DATA_DIR=/data \
    BOOSTBANDIT_HOST=0.0.0.0 \
    BOOSTBANDIT_PORT=8000
VOLUME ["/data"]
EXPOSE 8000

HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"

CMD ["boostbandit", "serve", "--host", "0.0.0.0", "--port", "8000"]
