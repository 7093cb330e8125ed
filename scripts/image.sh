#!/usr/bin/env bash
# `make image`: an OCI image of corun built from Debian packages alone (no registry, no base
# image to pull): debootstrap writes a minimal Debian 12 root filesystem with corun's runtime
# libraries, the release corun binary goes to /usr/local/bin, a non-root user `corun` (uid
# 10001) owns /var/lib/corun, and umoci packs it as an OCI image layout and archive:
#
#   out/image/oci/            the OCI image layout, tag `latest`
#   out/image/corun.oci.tar   the same as one archive (skopeo copy oci-archive:..., podman load)
#
# Before packing, the root filesystem is tested in a chroot, as the image's user: `corun
# --version` must print this checkout's version, and `corun serve --help` and `corun extender
# --help` the flags the deploy/ manifests use.
# deploy/Dockerfile builds the same image with docker where a registry's debian:bookworm-slim
# can be pulled. CORUN_DEBIAN_MIRROR overrides the mirror (default http://deb.debian.org/debian).
set -euo pipefail
cd "$(dirname "$0")/.."
out=out/image
rootfs=$out/rootfs
mirror=${CORUN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The shared libraries `ldd corun` lists, by the Debian 12 package that ships each.
runtime_packages=libyaml-cpp0.7,libsqlite3-0,libxgboost0,libcpp-httplib0.11,libgomp1,libssl3,zlib1g,libbrotli1,ca-certificates

if [[ $(id -u) != 0 ]]; then
  echo "image: debootstrap and chroot need root (run make image as root)" >&2
  exit 2
fi
CORUN_EXTRA_PACKAGES="debootstrap umoci" scripts/install-deps.sh

echo "== corun, release build"
cmake --preset release >/dev/null
cmake --build --preset release --target corun
binary=build/release/corun

echo "== Debian 12 root filesystem ($mirror)"
rm -rf "$out"
mkdir -p "$out"
debootstrap --variant=minbase --include="$runtime_packages" bookworm "$rootfs" "$mirror" \
  >"$out/debootstrap.log" 2>&1 || {
  echo "image: debootstrap failed; its log: $out/debootstrap.log" >&2
  tail -5 "$out/debootstrap.log" >&2
  exit 1
}
install -m 0755 "$binary" "$rootfs/usr/local/bin/corun"
chroot "$rootfs" useradd --system --uid 10001 --user-group --home-dir /var/lib/corun \
  --create-home --shell /usr/sbin/nologin corun
# Package caches and lists are not part of a runtime image.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/var/log/*.log "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*

echo "== test: the image's corun, as its user, in a chroot"
want=$("$binary" --version)
got=$(chroot --userspec=10001:10001 "$rootfs" /usr/local/bin/corun --version)
if [[ $got != "$want" ]]; then
  echo "image: corun --version in the image printed '$got', expected '$want'" >&2
  exit 1
fi
help=$(chroot --userspec=10001:10001 "$rootfs" /usr/local/bin/corun serve --help)
if [[ $help != *"--device"* || $help != *"--state"* || $help != *"--kube-node"* ]]; then
  echo "image: corun serve --help in the image lacks its flags:" >&2
  echo "$help" >&2
  exit 1
fi
help=$(chroot --userspec=10001:10001 "$rootfs" /usr/local/bin/corun extender --help)
if [[ $help != *"--kube"* || $help != *"--serve-token-file"* ]]; then
  echo "image: corun extender --help in the image lacks its flags:" >&2
  echo "$help" >&2
  exit 1
fi
echo "corun --version: $got; corun serve --help and corun extender --help: ok"

echo "== OCI image"
umoci init --layout "$out/oci"
umoci new --image "$out/oci:latest"
umoci unpack --image "$out/oci:latest" "$out/bundle" >/dev/null
cp -a "$rootfs/." "$out/bundle/rootfs/"
umoci repack --image "$out/oci:latest" "$out/bundle"
umoci config --image "$out/oci:latest" --config.user 10001:10001 \
  --config.entrypoint /usr/local/bin/corun --config.cmd --help \
  --config.workingdir /var/lib/corun --config.exposedports 8080/tcp \
  --config.label "org.opencontainers.image.version=$got" \
  --config.label "org.opencontainers.image.base.name=debian:bookworm (debootstrap minbase)"
umoci gc --layout "$out/oci"
rm -rf "$out/bundle"
tar -C "$out/oci" -cf "$out/corun.oci.tar" .
echo "image: $out/oci (tag latest), $out/corun.oci.tar ($(du -h "$out/corun.oci.tar" | cut -f1))"
echo "push it with: skopeo copy oci-archive:$out/corun.oci.tar docker://REGISTRY/corun:latest"
