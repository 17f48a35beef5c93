#!/usr/bin/env bash
# with-mounts.sh: runs a command with reflink-capable XFS and btrfs loop mounts exported as
# TREESEAL_TEST_XFS / TREESEAL_TEST_BTRFS, and unmounts them on exit. Needs root.
# usage: scripts/with-mounts.sh COMMAND [ARG...]
set -euo pipefail
if [ "$#" -eq 0 ]; then
  echo "usage: $0 COMMAND [ARG...]" >&2
  exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "$0: loop mounts need root; running without them" >&2
  exec "$@"
fi
base=$(mktemp -d /tmp/treeseal-mounts.XXXXXX)
cleanup() {
  for fs in xfs btrfs; do
    if mountpoint -q "$base/$fs"; then umount "$base/$fs" || umount -l "$base/$fs" || true; fi
  done
  rm -rf "$base"
}
trap cleanup EXIT INT TERM
mkdir -p "$base/xfs" "$base/btrfs"
truncate -s 1G "$base/xfs.img"
mkfs.xfs -q -m reflink=1 "$base/xfs.img"
mount -o loop "$base/xfs.img" "$base/xfs"
truncate -s 1G "$base/btrfs.img"
mkfs.btrfs -q "$base/btrfs.img" >/dev/null
mount -o loop "$base/btrfs.img" "$base/btrfs"
export TREESEAL_TEST_XFS="$base/xfs" TREESEAL_TEST_BTRFS="$base/btrfs"
echo "reflink mounts: xfs at $TREESEAL_TEST_XFS, btrfs at $TREESEAL_TEST_BTRFS" >&2
"$@"
