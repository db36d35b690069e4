# strait in a FROM-scratch image: the static musl binary and nothing else (no libc, no shell,
# no CA store: TLS trusts the public CA roots compiled into strait, or the truststore the
# config names, mounted like the config).
#
#   cargo build --release --target x86_64-unknown-linux-musl
#   docker build -t strait .            (or podman / buildah bud)
#   docker run --rm -p 9404:9404 -v "$PWD/mm2.properties:/etc/strait/mm2.properties:ro" strait
#
# Port 9404 serves /metrics, /healthz and /readyz (docs/operations.md); a Kubernetes
# Deployment with probes on them: examples/kubernetes.yaml.
#
# scripts/empty-root.sh shows the binary runs in a root holding only itself and its config.
FROM scratch
COPY target/x86_64-unknown-linux-musl/release/strait /strait
USER 65534:65534
EXPOSE 9404
ENTRYPOINT ["/strait"]
CMD ["run", "--metrics-listen", "0.0.0.0:9404", "/etc/strait/mm2.properties"]
