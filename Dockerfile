# syntax=docker/dockerfile:1
# One image for both kubedra processes: `kubedra operator` (Deployment, non-root) and
# `kubedra agent` (DaemonSet; runs as root there because it opens /dev and kubelet sockets).
# Build: docker build -t ghcr.io/kubedra/kubedra:0.1.0 .
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
# The wheel build generates the gRPC stubs from operator/kubedra/node/proto (setup.py).
COPY pyproject.toml setup.py README.md ./
COPY operator/ operator/
RUN pip install --no-cache-dir build==1.6.1 \
    && python -m build --wheel --outdir /dist . \
    && pip wheel --no-cache-dir --wheel-dir /dist /dist/kubedra-0.1.0-py3-none-any.whl

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="kubedra" \
      org.opencontainers.image.description="DRA driver and operator for GPUs, MIG and PCI devices" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /dist /tmp/dist
RUN pip install --no-cache-dir --no-index --find-links /tmp/dist kubedra==0.1.0 \
    && rm -rf /tmp/dist \
    && groupadd --gid 65532 kubedra \
    && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin kubedra
USER 65532:65532
ENTRYPOINT ["kubedra"]
CMD ["--help"]
