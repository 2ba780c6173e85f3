# thrum in a container: the static binary of `cargo xtask dist` and nothing
# else (no shell, no libc, no package manager to patch). Build it from the
# repository once the tarball's tree is staged:
#
#   cargo xtask dist
#   docker build -t thrum:0.1.0 .
#   # a copy of the key that the image's user (65534) may read, and nobody
#   # else: the root-only key itself is "Permission denied" to it
#   sudo install -m 0400 -o 65534 /etc/thrum/psk /etc/thrum/psk.65534
#   docker run --rm --network host -v /etc/thrum/psk.65534:/etc/thrum/psk:ro thrum:0.1.0 \
#       server --psk-file /etc/thrum/psk --data-ports 20000-20999
#
# podman builds and runs it the same way (tests/e2e/container.rs does, in CI).
#
# Another version or target: --build-arg THRUM_DIST=target/dist/thrum-VERSION-TARGET
FROM scratch
ARG THRUM_DIST=target/dist/thrum-0.1.0-x86_64-unknown-linux-musl
COPY ${THRUM_DIST}/thrum /usr/bin/thrum
# nobody:nogroup by number: an image without /etc/passwd has no names, and
# the server needs no privilege (its ports are above 1023).
USER 65534:65534
EXPOSE 12880/tcp
ENTRYPOINT ["/usr/bin/thrum"]
CMD ["server"]
