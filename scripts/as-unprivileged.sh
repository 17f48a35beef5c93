#!/usr/bin/env bash
# as-unprivileged.sh: runs the suites whose code paths differ without root and the short torture again as an unprivileged user (treeseal-ci), from a copy of the built checkout it owns.
# Run as root inside scripts/with-mounts.sh (its loop mounts are handed to the user for the pass and given back after).
# The user starts its own registries (scripts/with-registries.sh), so the tests own the registry storage they tamper with.
# Nothing is installed or rebuilt: the copy carries the addon and dist/ the root pass built.
# Then the short torture suite as the same user, on those mounts.
# usage: bash scripts/with-mounts.sh bash scripts/as-unprivileged.sh [VITEST_PATH...]   (default: the suites that differ without root, listed below; .ci/run calls it)
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  echo "$0: needs root (it creates the user and hands it the mounts)" >&2
  exit 2
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
user=treeseal-ci
if ! id -u "$user" >/dev/null 2>&1; then
  # Two passes started at once may both get here: the one that loses finds the user made.
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user" 2>/dev/null || id -u "$user" >/dev/null
fi
uid=$(id -u "$user")
gid=$(id -g "$user")
if [ ! -f "$repo/dist/index.js" ] || [ ! -f "$repo/build/Release/treeseal.node" ]; then
  echo "$0: build the checkout first (npm install; npm run build:ts): no dist/ or addon in $repo" >&2
  exit 2
fi

work=$(mktemp -d /tmp/treeseal-unprivileged.XXXXXX)
mounts=()
for var in TREESEAL_TEST_XFS TREESEAL_TEST_BTRFS TREESEAL_TEST_EXT4; do
  if [ -n "${!var:-}" ]; then mounts+=("${!var}"); fi
done
# The mounts' parents (with-mounts.sh's private temp dir) get o+rx for the pass: a store path is walked by opening each directory.
parents=()
for m in "${mounts[@]}"; do
  p=$(dirname "$m")
  case " ${parents[*]} " in *" $p "*) ;; *) parents+=("$p") ;; esac
done
modes=()
for p in "${parents[@]}"; do modes+=("$(stat -c %a "$p")"); done
cleanup() {
  for m in "${mounts[@]}"; do chown 0:0 "$m" 2>/dev/null || true; done
  for i in "${!parents[@]}"; do chmod "${modes[$i]}" "${parents[$i]}" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

# The copy: the checkout without .git and node_modules, owned by the user; node_modules is root's, linked and only
# read (vitest runs with --no-cache, so nothing writes there).
started=$(date +%s)
mkdir "$work/repo" "$work/home"
tar -C "$repo" --exclude=./.git --exclude=./node_modules -cf - . | tar -C "$work/repo" -xf -
ln -s "$(readlink -f "$repo/node_modules")" "$work/repo/node_modules"
chown -R "$uid:$gid" "$work"
for m in "${mounts[@]}"; do chown "$uid:$gid" "$m"; done
for p in "${parents[@]}"; do chmod o+rx "$p"; done
echo "as-unprivileged: $user (uid $uid) in $work/repo; copied in $(($(date +%s) - started)) s" >&2

# By default, the suites whose code paths differ without root: the store's ownership and trust checks, freezing and
# thawing (rm, gc, reset, materialize over a clone), the permission checks root bypasses (unreadable files, 0500
# directories), subvolume removal without CAP_SYS_ADMIN, bubblewrap in a user namespace, and pulls that build store files.
# The rest (documents, argument checks, the registry's protocol, in-memory layouts, concurrency, the docs' walkthroughs,
# and the command's own suites but `run`: the command calls the same library calls the store suites run here) runs as
# root only: what it tests is the same for any user, and the pass runs beside the torture suite in CI's budget.
if [ "$#" -eq 0 ]; then
  for s in arm-capture btrfs clone-ledger clone-paths clone-stage diff-reset full-disk lease materialize non-root recapture store-lock store-trust summary-record usage verify; do
    set -- "$@" "test/store/$s.test.ts"
  done
  for s in push refusals roundtrip; do set -- "$@" "test/store/registry/$s.test.ts"; done
  set -- "$@" test/cli/run.test.ts
  set -- "$@" test/tools
fi
cd "$work/repo"
# TREESEAL_UNPRIVILEGED_PART: tests or torture runs only that half (.ci/run runs the two side by side, each inside
# scripts/with-mounts.sh of its own); unset, both, one after the other.
part=${TREESEAL_UNPRIVILEGED_PART:-both}
case "$part" in both | tests | torture) ;; *) echo "$0: TREESEAL_UNPRIVILEGED_PART must be tests, torture or unset" >&2; exit 2 ;; esac
if [ "$part" != torture ]; then
  # TREESEAL_TEST_UNPRIVILEGED: tests that need root skip (under CI=true they would otherwise fail for want of root).
  setpriv --reuid="$uid" --regid="$gid" --init-groups \
    env -u TREESEAL_TEST_REGISTRY -u TREESEAL_TEST_REGISTRY_AUTH -u TREESEAL_TEST_REGISTRY_STORAGE \
    HOME="$work/home" USER="$user" LOGNAME="$user" TMPDIR=/tmp TREESEAL_TEST_UNPRIVILEGED=1 \
    bash scripts/with-registries.sh node node_modules/vitest/vitest.mjs run --no-cache --configLoader runner "$@"
  echo "as-unprivileged: tests passed in $(($(date +%s) - started)) s" >&2
fi
# The short torture suite as the user: on the mounts root made (no loop mounts of its own), against this built copy;
# on the filesystems TREESEAL_UNPRIVILEGED_TORTURE_FS names (default ext4,xfs; .ci/run gives ext4, the root run xfs).
if [ "$part" = tests ]; then
  :
elif [ -n "${TREESEAL_TEST_EXT4:-}" ] && [ -n "${TREESEAL_TEST_XFS:-}" ]; then
  setpriv --reuid="$uid" --regid="$gid" --init-groups \
    env HOME="$work/home" USER="$user" LOGNAME="$user" TMPDIR=/tmp TORTURE_PACKAGE=dist \
    TORTURE_FS_ROOTS="ext4=$TREESEAL_TEST_EXT4,xfs=$TREESEAL_TEST_XFS" \
    node bench/torture/run.mjs --short --fs="${TREESEAL_UNPRIVILEGED_TORTURE_FS:-ext4,xfs}"
  echo "as-unprivileged: torture passed in $(($(date +%s) - started)) s" >&2
elif [ "${CI:-}" = true ]; then
  echo "as-unprivileged: CI=true but no ext4 and XFS mounts for the torture suite (run inside scripts/with-mounts.sh)" >&2
  exit 1
fi
