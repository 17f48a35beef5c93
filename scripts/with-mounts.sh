#!/usr/bin/env bash
# with-mounts.sh: runs a command with reflink-capable XFS and btrfs loop mounts and an ext4 one (no reflink)
# exported as TREESEAL_TEST_XFS / TREESEAL_TEST_BTRFS / TREESEAL_TEST_EXT4, and unmounts them on exit. Needs root.
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
  for fs in xfs btrfs ext4; do
    if mountpoint -q "$base/$fs"; then umount "$base/$fs" || umount -l "$base/$fs" || true; fi
  done
  rm -rf "$base"
}
trap cleanup EXIT INT TERM
mkdir -p "$base/xfs" "$base/btrfs" "$base/ext4"
truncate -s 1G "$base/xfs.img"
mkfs.xfs -q -m reflink=1 "$base/xfs.img"
mount -o loop "$base/xfs.img" "$base/xfs"
truncate -s 1G "$base/btrfs.img"
mkfs.btrfs -q "$base/btrfs.img" >/dev/null
mount -o loop "$base/btrfs.img" "$base/btrfs"
truncate -s 1G "$base/ext4.img"
mkfs.ext4 -q -F "$base/ext4.img"
mount -o loop "$base/ext4.img" "$base/ext4"
export TREESEAL_TEST_XFS="$base/xfs" TREESEAL_TEST_BTRFS="$base/btrfs" TREESEAL_TEST_EXT4="$base/ext4"
echo "test mounts: xfs at $TREESEAL_TEST_XFS, btrfs at $TREESEAL_TEST_BTRFS, ext4 at $TREESEAL_TEST_EXT4" >&2
"$@"
