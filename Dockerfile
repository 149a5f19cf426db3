# The vidnexus image used by docker-compose.yml (CPU build of PyTorch from PyPI).
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends ffmpeg libgl1 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.lock requirements-files.lock pyproject.toml README.md ./
RUN pip install --no-cache-dir -r requirements.lock && pip install --no-cache-dir --no-deps -r requirements-files.lock
COPY vidnexus ./vidnexus
RUN pip install --no-cache-dir --no-deps .
ENV VNX_DATA_DIR=/data
ENTRYPOINT []
CMD ["vidnexus", "--help"]
