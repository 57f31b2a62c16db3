# ctxpack against an external Postgres (see docker-compose.yml). CPU-only torch.
FROM python:3.11-slim
ENV PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
WORKDIR /app
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0
COPY pyproject.toml README.md alembic.ini ./
COPY service ./service
COPY migrations ./migrations
RUN pip install -e .
EXPOSE 8080
CMD ["ctxpack", "serve", "--host", "0.0.0.0", "--port", "8080"]
