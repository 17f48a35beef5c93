// usage.ts: the help text of the treeseal command and of each subcommand.
export const COMMON = `Common options:
  --store DIR   the snapshot store (default: $TREESEAL_STORE, else $XDG_CACHE_HOME/treeseal, else ~/.cache/treeseal)
  --json        print one JSON document on stdout instead of a summary
  -h, --help    show help`;

export const HELP: Record<string, string> = {
  capture: `usage: treeseal capture <source> [--copy PATH]... [--mount SRC[:TARGET]]... [--revision R] [--no-stat-cache]

Captures paths below the directory <source> into a frozen, content-addressed snapshot.
Without --copy or --mount, every top-level entry of <source> is a copy root.
  --copy PATH          a file or directory below <source> to copy (repeatable; no symlinks inside)
  --mount SRC[:TARGET] a path below <source> to capture as a read-only mount at TARGET (default SRC)
  --revision R         folded into the digest (e.g. a commit id)
  --no-stat-cache      read and hash every file (by default a file unchanged since the last capture reuses its hash)`,
  materialize: `usage: treeseal materialize <digest> <clone> [--reflink auto|always|never] [--fallback-bytes N]

Replaces each copy root of a snapshot inside the directory <clone>, copy-on-write where the filesystem can.
  --reflink MODE        auto (default): clone, else copy within the fallback budget; always: clone or fail; never: copy
  --fallback-bytes N    most bytes to copy without cloning (default 536870912)`,
  verify: `usage: treeseal verify [<digest>...]

Re-hashes snapshots against their manifests; with no digest, every snapshot in the store.
Exits 1 when any snapshot is corrupt, after reporting them all.`,
  ls: `usage: treeseal ls

Lists the snapshots in the store.`,
  show: `usage: treeseal show <digest>

Prints a snapshot's manifest.`,
  diff: `usage: treeseal diff <a> <b>

Lists the paths added, removed and changed from snapshot <a> to snapshot <b>.`,
  rm: `usage: treeseal rm <digest>...

Removes snapshots from the store (under the store lock).`,
  gc: `usage: treeseal gc

Sweeps builds left behind by processes that died, and half-removed snapshots.`,
  push: `usage: treeseal push <digest> <remote> [--concurrency N] [--insecure] [--mount-from REPO]...

Pushes a snapshot to an OCI registry repository (<remote> is host[:port]/repository) as tag ts-<digest>.
Blobs the registry already has are skipped; an existing tag for the same snapshot sends nothing.
  --concurrency N     blobs moved at once (default 8)
  --insecure          allow plain HTTP to a registry that is not on a loopback address
  --mount-from REPO   a repository of the same registry to mount blobs from (repeatable)
Credentials: TREESEAL_REGISTRY_USER / TREESEAL_REGISTRY_PASSWORD, else ~/.docker/config.json.`,
  pull: `usage: treeseal pull <digest> <remote> [--concurrency N] [--insecure]

Pulls snapshot <digest> (all 64 digits) from an OCI registry repository into the store. The snapshot
digest, every blob and every file are checked before it is published; contents the store already
holds are taken from local snapshots instead of downloaded.
  --concurrency N     blobs moved at once (default 8)
  --insecure          allow plain HTTP to a registry that is not on a loopback address`,
  freeze: `usage: treeseal freeze <dir>

Makes a tree read-only: files 0400 (0500 when executable), directories 0500. Never follows a symlink.`,
  thaw: `usage: treeseal thaw <dir>

Makes a frozen tree writable again: files 0600, directories 0700. Never follows a symlink.`,
};

export const MAIN = `usage: treeseal <command> [options]

Race-checked, content-addressed, read-only snapshots of directory trees, materialized copy-on-write.

Commands:
  capture <source>            capture a snapshot
  materialize <digest> <dir>  replace the snapshot's roots inside a clone
  verify [<digest>...]        re-hash snapshots against their manifests
  ls                          list snapshots
  show <digest>               print a manifest
  diff <a> <b>                compare two snapshots
  rm <digest>...              remove snapshots
  gc                          sweep stale builds
  push <digest> <remote>      push a snapshot to an OCI registry
  pull <digest> <remote>      pull a snapshot from an OCI registry, verified
  freeze <dir> / thaw <dir>   make a tree read-only / writable

Digests may be abbreviated to any unique prefix.
Exit status: 0 ok, 1 a treeseal error (its code and message on stderr), 2 a usage error.

${COMMON}`;
