# inferd's container image: build on Debian 12, run on debian:12-slim as a non-root user.
#
#   docker build -t inferd .
#   docker run -p 8000:8000 -p 8001:8001 -p 8002:8002 -v /path/to/models:/models inferd
#
# The runtime stage holds what scripts/install.sh puts in its prefix (the stripped binary, the
# example repository, the list of Debian runtime packages it needs) and those packages: no
# compiler, no -dev package. The same tree is built and served without Docker by
# scripts/install.sh and scripts/check-runtime-image.sh, which is how it is tested (docs/DEPLOYMENT.md).

FROM debian:12 AS build
WORKDIR /src
COPY scripts/setup.sh scripts/setup.sh
RUN bash scripts/setup.sh --build
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERD_TESTS=OFF \
 && cmake --build build -j "$(nproc)" \
 && bash scripts/install.sh /opt/inferd

FROM debian:12-slim
COPY --from=build /opt/inferd /opt/inferd
RUN apt-get update \
 && xargs -a /opt/inferd/share/inferd/runtime-packages.txt apt-get install -y --no-install-recommends \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin inferd \
 && mkdir /models && cp -r /opt/inferd/share/inferd/model_repository/. /models/ && chown -R inferd /models
USER 10001
ENV PATH=/opt/inferd/bin:$PATH
# KServe v2 / TF Serving REST, gRPC, Prometheus metrics.
EXPOSE 8000 8001 8002
# Kubernetes uses its own probes (deploy/kubernetes); this one serves `docker run` and Compose.
HEALTHCHECK --interval=10s --timeout=6s --start-period=60s --retries=3 CMD ["inferd", "health", "-u", "localhost:8000"]
# SIGTERM drains: in-flight requests finish within --exit-timeout-secs (default 30).
STOPSIGNAL SIGTERM
ENTRYPOINT ["inferd", "serve", "--model-repository", "/models"]
