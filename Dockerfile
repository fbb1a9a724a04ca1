# Spur container image: spurctld, spurd, the spur CLI (and its Slurm command names) and every
# scheduler plugin under plugins/. Build it from the repository root:
#
#   docker build --target runtime -t spur:<tag> .
#
# (the repository's root Dockerfile is this file, byte for byte; a test keeps them equal, and
# `docker build -f containers/Dockerfile --target runtime -t spur:<tag> .` is the same build).
#
# Targets:
#   build    wheels of spur, of its dependencies and of each plugin, in /wheels
#   runtime  slim Python with exactly those wheels installed (no compilers, no network at
#            install time), running as the unprivileged user spur (uid 10001) by default
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY spur ./spur
COPY plugins ./plugins
RUN pip wheel --no-cache-dir --wheel-dir /wheels . \
 && for plugin in plugins/*/; do pip wheel --no-cache-dir --no-deps --wheel-dir /wheels "$plugin"; done

FROM ${PYTHON_IMAGE} AS runtime
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels /wheels/*.whl \
 && rm -rf /wheels
RUN groupadd --system --gid 10001 spur \
 && useradd --system --uid 10001 --gid spur --home-dir /var/lib/spur --shell /usr/sbin/nologin spur \
 && mkdir -p /var/lib/spur /etc/spur \
 && chown spur:spur /var/lib/spur
COPY conf/spur.conf /etc/spur/spur.conf
# Every entry point answers before the image is tagged.
RUN spurctld --help >/dev/null \
 && spurd --help >/dev/null \
 && spur-k8s-operator --help >/dev/null \
 && spur nodes --help >/dev/null
ENV SPUR_CONF=/etc/spur/spur.conf
# 6817 controller gRPC, 6818 agent gRPC (also the operator's virtual agent), 6820 REST, 6821 Raft
EXPOSE 6817 6818 6820 6821
VOLUME ["/var/lib/spur"]
# Numeric, so Kubernetes can check runAsNonRoot. spurd runs jobs as their users and needs root:
# its DaemonSet (examples/k8s/spurd.yaml) sets runAsUser: 0.
USER 10001
CMD ["spurctld", "-D", "-f", "/etc/spur/spur.conf"]
