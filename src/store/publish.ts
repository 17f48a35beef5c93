// publish.ts: build directories in the store's tmp/, their publication by one no-replace rename, and a capture plan run into one.
import { CaptureContext, TreeBuilder, openDeclaredParents, type CaptureProgress } from '../capture/walk.js';
import type { Plan } from '../capture/plan.js';
import { DIR_FLAGS, makeLockedDir, openBeneath, openChildDir, openRealDir, own, removeAt, removeQuietly, type Fd } from '../base/fd.js';
import { computeDigests, encodeDocumentPieces, type StoredSnapshot } from './document.js';
import { eachChunk, type Piece } from '../base/manifest-stream.js';
import { SealError } from '../base/errors.js';
import { reasonOf } from '../base/refusal.js';
import { writeAll } from '../base/io.js';
import { FROZEN_DIRS, applyModesAt } from '../tools/freeze.js';
import { captureMount, type MountData } from '../capture/mounts.js';
import { checkCopyLinks } from '../capture/links.js';
import { addBadName, asUserPath } from '../capture/obstacles.js';
import { Excludes, checkCapturedRoots } from '../capture/exclude.js';
import { EntryReader, indexOfPath } from './manifest-tree.js';
import { withCopyRoots } from '../capture/default-copy.js';
import { withStoreLock } from './lock.js';
import { EntryTable } from '../base/entry-table.js';
import { loadSnapshotAt } from './store-dir.js';
import { summaryOf } from './snapshot-summary.js';
import { recordPublished } from './summary-record.js';
import { checkDocument } from './document-check.js';
import { BUILD_PREFIX, COPY_AREA, DOCUMENT_NAME, LOOSE_AREA, MOUNTS_AREA, SNAPSHOTS_DIR, TMP_DIR, mountDir } from './layout.js';
import { assembleAreas } from './assemble.js';
import { directoryRoots, onBtrfs, sealStoredRoots } from './subvolumes.js';
import { CacheMiss, StatCacheSession } from './recapture.js';
import { foreignOwner, giveTree, type StoreOwner } from './store-part.js';
import { publishedAmong } from './stat-cache-file.js';
import { O_CREAT, O_EXCL, O_NOFOLLOW, O_WRONLY, RENAME_NOREPLACE } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Sys } from '../sys/native.js';


export interface BuildHooks {
  isAborted?: () => boolean;
  onProgress?: (p: CaptureProgress) => void;
}

/** How a capture went: files in its manifest, how many reused the stat cache's hash, whether a build was needed. */
export interface CaptureReport {
  files: number;
  reusedFiles: number;
  /** false: the manifest named a published snapshot and no byte was written. */
  built: boolean;
  /** The digest was published already (by this store, another process or an earlier run): the store holds nothing new. */
  reused: boolean;
  /**
   * Why the stat cache could not be written (no space, a cache directory this user may not
   * write, an I/O error), when it could not, as `CODE: message` (as a materialize's
   * `ledgerNotSaved` and `stageLeft.reason`): the capture is whole, but the next one of
   * this source reads every file again.
   */
  statCacheNotSaved?: string;
}

/** A capture's snapshot and how it went. */
export interface Built {
  data: StoredSnapshot;
  report: CaptureReport;
}

/** Bytes gathered per write. */
const WRITE_BYTES = 1 << 20;

/** Writes the pieces, in order, to a new file `name` (frozen at creation); entry lists are encoded chunk by chunk as they are written. */
function writePiecesAt(sys: Sys, dirfd: number, name: string, pieces: readonly Piece[]): void {
  using file = own(sys, sys.openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o400));
  const buffer = Buffer.allocUnsafe(WRITE_BYTES);
  let used = 0;
  let at = 0;
  const flush = (): void => {
    writeAll(sys, file.fd, buffer.subarray(0, used), at);
    at += used;
    used = 0;
  };
  eachChunk(pieces, (chunk) => {
    // Canonical JSON is ASCII (everything else is escaped): one byte per character.
    for (let i = 0; i < chunk.length; ) {
      if (used === WRITE_BYTES) flush();
      const n = typeof chunk === 'string' ? buffer.write(chunk.slice(i, i + WRITE_BYTES - used), used, 'latin1') : chunk.copy(buffer, used, i);
      used += n;
      i += n;
    }
  });
  flush();
}

function captureCopyRoots(ctx: CaptureContext, sourceFd: number, copyFd: number, plan: Plan, subvolumes: boolean): TreeBuilder {
  const builder = new TreeBuilder(ctx, copyFd, { allowSymlinks: plan.links === 'contained', preserveModes: false, keepExecutable: plan.keepExecutable, keepTimes: plan.keepTimes, freezeDirs: true, subvolumes, defaultRoots: plan.defaultCopy });
  for (const parts of plan.copyParts) {
    using srcParent = openDeclaredParents(ctx, sourceFd, parts);
    using destParent = builder.ensureDirs(parts.slice(0, -1));
    const name = parts[parts.length - 1]!;
    builder.copyChild({ srcDirFd: srcParent.fd, destDirFd: destParent?.fd ?? -1, name, rel: parts.join('/'), depth: parts.length, declared: true });
  }
  return builder;
}

function captureMounts(ctx: CaptureContext, sourceFd: number, mountsFd: number, plan: Plan): MountData[] {
  const { sys } = ctx;
  return plan.mounts.map((mount, index) => {
    const name = mountDir(index);
    sys.mkdirat(mountsFd, name, 0o700);
    using container = own(sys, openChildDir(sys, mountsFd, name));
    try {
      return captureMount(ctx, sourceFd, container.fd, mount);
    } catch (err) {
      // Errors name the mount's source path, never its payload in the store.
      throw asUserPath(err, mount.sourceParts.join('/'));
    }
  });
}

/** Freezes the copy area's implicit parent directories and the area itself; the walk froze the rest. */
function freezeCopyParents(sys: Sys, copyFd: number, plan: Plan): void {
  const parents = new Set<string>();
  for (const parts of plan.copyParts) for (let i = 1; i < parts.length; i++) parents.add(parts.slice(0, i).join('/'));
  for (const rel of parents) {
    using dir = own(sys, openBeneath(sys, copyFd, rel.split('/'), DIR_FLAGS));
    sys.fchmod(dir.fd, 0o500);
  }
  sys.fchmod(copyFd, 0o500);
}

export function freezeArea(sys: Sys, buildFd: number, name: string): void {
  using area = own(sys, openChildDir(sys, buildFd, name));
  applyModesAt(sys, area.fd, FROZEN_DIRS);
}

function countFiles(data: StoredSnapshot): number {
  let n = 0;
  for (const list of [data.entries, ...data.mounts.map((m) => m.entries)]) n += EntryTable.of(list).count('file');
  return n;
}

/**
 * Writes the stat cache; a cache that cannot be written only costs the next capture its
 * reuse, so the capture succeeds: what went wrong goes in its report, never silently.
 */
function saveOrSay(session: StatCacheSession, digest: string, data: StoredSnapshot): { statCacheNotSaved?: string } {
  try {
    session.save(digest, data);
    return {};
  } catch (err) {
    return { statCacheNotSaved: reasonOf(err) };
  }
}

/**
 * Builds the deferred tree (under the shared store lock, so no stored copy it clones is
 * removed meanwhile), its directory copy roots subvolumes on btrfs (sealed once built),
 * and drops the loose files.
 */
function assembleDeferred(sys: Sys, storeRoot: string, buildFd: number, data: StoredSnapshot, session: StatCacheSession, subvolumes: boolean, owner: StoreOwner | undefined): void {
  session.prepare(data);
  const roots = subvolumes ? directoryRoots(data.declarations, data.entries) : new Set<string>();
  withStoreLock(sys, storeRoot, false, () => {
    const made = assembleAreas(sys, buildFd, data, session.place, roots);
    using copy = own(sys, openChildDir(sys, buildFd, COPY_AREA));
    sealStoredRoots(sys, copy.fd, made, data.entries, owner);
  });
  removeAt(sys, buildFd, LOOSE_AREA);
}

/**
 * A private build directory in the store's tmp/, held by an flock (on its own fd) until
 * it is published or removed. Disposing of it closes its fds and, unless it was
 * published, removes it.
 */
export class Build implements Disposable {
  published = false;

  constructor(
    readonly sys: Sys,
    readonly storeRoot: string,
    readonly tmp: Fd,
    readonly snapshots: Fd,
    readonly dir: Fd,
    /** Its name in tmp/ (`build-<32 hex>`). */
    readonly name: string,
    /** The store's owner, when this process is root in another user's store: what the build makes is given to it (see foreignOwner). */
    readonly owner: StoreOwner | undefined,
  ) {}

  get fd(): number {
    return this.dir.fd;
  }

  get tmpFd(): number {
    return this.tmp.fd;
  }

  get snapshotsFd(): number {
    return this.snapshots.fd;
  }

  /** Closes quietly (a failed close must not mask the error leaving the capture). */
  [Symbol.dispose](): void {
    this.snapshots[Symbol.dispose]();
    // Removed while its flock is still held: a sweep in another process never removes it at the same time.
    if (!this.published && !this.tmp.closed) removeQuietly(this.sys, this.tmp.fd, this.name);
    this.dir[Symbol.dispose]();
    this.tmp[Symbol.dispose]();
  }
}

/** foreignOwner of the store at storeRoot (opened as its tmp/ and snapshots/ are, by path). */
function ownerOfStore(sys: Sys, storeRoot: string): StoreOwner | undefined {
  using store = own(sys, openRealDir(sys, storeRoot, 'store directory'));
  return foreignOwner(sys, store.fd);
}

/** Makes and locks `<store>/tmp/build-*`; dispose of it when done. */
export function openBuild(sys: Sys, storeRoot: string): Build {
  using tmp = own(sys, openRealDir(sys, `${storeRoot}/${TMP_DIR}`, 'store tmp directory'));
  using snapshots = own(sys, openRealDir(sys, `${storeRoot}/${SNAPSHOTS_DIR}`, 'store snapshots directory'));
  const owner = process.geteuid?.() === 0 ? ownerOfStore(sys, storeRoot) : undefined;
  // Its flock is held until this build is published or removed: a sweep never takes a live build.
  const { name, fd } = makeLockedDir(sys, tmp.fd, BUILD_PREFIX, 16);
  // tmp/ is the store owner's to write: the directory locked must be the one this process made (another put in its place
  // between the mkdir and the open would be built in, and with root in another user's store, given away). Left as it is.
  let ours: boolean;
  try {
    const st = sys.fstat(fd);
    ours = st.uid === process.geteuid?.() && (st.mode & 0o777) === 0o700 && sys.readdir(fd).length === 0;
  } catch (err) {
    // Unlocked with its fd: the next open sweeps it.
    own(sys, fd)[Symbol.dispose]();
    throw err;
  }
  if (!ours) {
    own(sys, fd)[Symbol.dispose]();
    throw new SealError('SEAL_CHANGED', `the store's tmp/${name} was replaced while it was made (another user's directory, or one not empty, in its place): try again`);
  }
  return new Build(sys, storeRoot, own(sys, tmp.release()), own(sys, snapshots.release()), own(sys, fd), name, owner);
}

/**
 * Writes data's manifest.json (`document`, in pieces) into the build, last, as its commit marker, and
 * publishes it as `<store>/snapshots/<digest>` with one RENAME_NOREPLACE under the
 * shared store lock. A digest that is already published is reused, never overwritten.
 */
export function publishBuild(build: Build, data: StoredSnapshot, document: readonly Piece[]): StoredSnapshot {
  const { sys } = build;
  // Nothing is published that a load would refuse, whoever built it (capture, recapture, pull).
  checkDocument(data);
  writePiecesAt(sys, build.fd, DOCUMENT_NAME, document);
  giveBuildToOwner(build);
  const reused = withStoreLock(sys, build.storeRoot, false, () => {
    try {
      sys.renameat2(build.tmpFd, build.name, build.snapshotsFd, data.digest, RENAME_NOREPLACE);
      build.published = true;
      freezePublished(sys, build, data.digest);
      return undefined;
    } catch (err) {
      if (!hasCode(err, 'EEXIST', 'ENOTEMPTY')) throw err;
      // Published already (another process or an earlier run): reuse it, never overwrite it.
      return loadSnapshotAt(sys, build.snapshotsFd, data.digest);
    }
  });
  if (reused !== undefined) return reused;
  recordPublished(sys, build.storeRoot, build.fd, summaryOf(data));
  return data;
}

/**
 * Root publishing into another user's store (a capture or pull run as root there): what it
 * built is given to the store's owner first, else the owner could neither read the
 * snapshot (root's, 0500) nor remove it, and verify and ls called it damaged.
 */
function giveBuildToOwner(build: Build): void {
  if (build.owner !== undefined) giveTree(build.sys, build.fd, build.owner);
}

/**
 * Freezes the build's own directory (0500) once it is published: it must be writable until
 * its rename (moving a directory rewrites its `..`). Where that fails (EIO), the snapshot is
 * taken back into tmp/ (removed there with the build), so no writable directory stays
 * published; where even that fails it stays, and gc freezes it (verify reports it until then).
 */
function freezePublished(sys: Sys, build: Build, digest: string): void {
  try {
    sys.fchmod(build.fd, 0o500);
  } catch (err) {
    try {
      sys.renameat2(build.snapshotsFd, digest, build.tmpFd, build.name, RENAME_NOREPLACE);
      build.published = false;
    } catch {
      // left published, writable: gc's to freeze
    }
    throw err;
  }
}

/**
 * Captures `plan` into `<store>/tmp/build-*`, freezes it, writes manifest.json last
 * and publishes it as `<store>/snapshots/<digest>` with one RENAME_NOREPLACE. A
 * digest that is already published is reused and the build removed. On any
 * failure the build is removed and nothing is published. With the stat cache
 * (plan.statCache), files it trusts are not read, and a stored copy that cannot be
 * placed makes the capture start over without the cache's entries.
 */
export function buildSnapshot(sys: Sys, storeRoot: string, plan: Plan, hooks: BuildHooks = {}): Built {
  try {
    return buildOnce(sys, storeRoot, plan, hooks, false);
  } catch (err) {
    if (!(err instanceof CacheMiss)) throw err;
    return buildOnce(sys, storeRoot, plan, hooks, true);
  }
}

/** Captures the copy roots into the build's copy/ and each mount into its mounts/ container. */
function captureAreas(ctx: CaptureContext, sourceFd: number, buildFd: number, plan: Plan, deferred: boolean, subvolumes: boolean, owner: StoreOwner | undefined): Pick<StoredSnapshot, 'entries' | 'mounts'> {
  const { sys } = ctx;
  sys.mkdirat(buildFd, COPY_AREA, 0o700);
  let entries;
  {
    using copy = own(sys, openChildDir(sys, buildFd, COPY_AREA));
    const builder = captureCopyRoots(ctx, sourceFd, copy.fd, plan, subvolumes);
    // Every file job is over: nothing is written into a subvolume once it is sealed.
    entries = builder.finished();
    if (!deferred) {
      freezeCopyParents(sys, copy.fd, plan);
      sealStoredRoots(sys, copy.fd, builder.subvolumes, entries, owner);
    }
  }
  sys.mkdirat(buildFd, MOUNTS_AREA, 0o700);
  using mountsDir = own(sys, openChildDir(sys, buildFd, MOUNTS_AREA));
  const mounts = captureMounts(ctx, sourceFd, mountsDir.fd, plan);
  // Copy-root links resolve in the clone's namespace, mounts' payloads included: checked once every area is in.
  checkCopyLinks({ entries, roots: plan.copyParts, mounts: mounts.map((m, i) => ({ targetParts: plan.mounts[i]!.targetParts, entries: m.entries })) }, (err) => ctx.obstacles.add(err, 'link-escape'));
  return { entries, mounts };
}

function buildOnce(sys: Sys, storeRoot: string, given: Plan, hooks: BuildHooks, fresh: boolean): Built {
  using source = own(sys, openRealDir(sys, given.source, 'source'));
  const sourceFd = source.fd;
  const exclude = Excludes.of(given.exclude);
  // Top-level names that are not UTF-8 (no copy roots named) join the walk's obstacles.
  const badNames: [Buffer, readonly string[]][] = [];
  const plan = withCopyRoots(sys, sourceFd, given, storeRoot, exclude, (name, siblings) => badNames.push([name, siblings]));
  using store = own(sys, openRealDir(sys, storeRoot, 'store directory'));
  const storeFd = store.fd;
  let build: Build | undefined;
  let ctx: CaptureContext | undefined;
  let session: StatCacheSession | undefined;
  try {
    build = openBuild(sys, storeRoot);
    const { tmpFd, snapshotsFd, fd: buildFd } = build;
    // The new directory's ctime is the store filesystem's clock before the walk: the stat cache's recording time.
    const buildStat = sys.fstat(buildFd);
    const ownDirs = [sys.fstat(storeFd), buildStat];
    ctx = new CaptureContext({ sys, limits: plan.limits, buildDev: buildStat.dev, isAborted: hooks.isAborted, onProgress: hooks.onProgress, parallelism: plan.parallelism, exclude, ownDirs });
    for (const [name, siblings] of badNames) addBadName(ctx.obstacles, name, '', '', siblings);
    if (plan.statCache) {
      session = new StatCacheSession({ sys, storeFd, tmpFd, snapshotsFd, buildFd, source: plan.source, sourceFd, recordNs: buildStat.ctimeNs + plan.clockAheadNs, fresh });
      ctx.hook = session;
    }
    // A store on btrfs keeps each directory copy root as a subvolume (materialize snapshots it).
    const subvolumes = onBtrfs(sys, buildFd);
    const { owner } = build;
    const { entries, mounts } = ctx.obstacles.collect(() => captureAreas(ctx!, sourceFd, buildFd, plan, session?.deferred === true, subvolumes, owner));
    ctx.reportDone();
    // Each declared root against the patterns by the kind it was captured as (build/ leaves out a directory build, never a file).
    const roots = plan.copyParts.map((parts) => indexOfPath(entries, parts.join('/')));
    const reader = new EntryReader(entries);
    checkCapturedRoots(exclude, plan, (i) => (i < roots.length ? roots[i]! >= 0 && reader.kind(roots[i]!) === 'directory' : mounts[i - roots.length]!.kind === 'directory'), plan.defaultCopy);
    const base = { source: plan.source, revision: plan.revision, declarations: plan.declarations, ...(plan.exclude.length > 0 ? { exclude: plan.exclude } : {}), entries, mounts };
    const data: StoredSnapshot = { ...base, ...computeDigests(base), totalBytes: ctx.totalBytes };
    const expect = plan.expectMounts;
    if (
      expect !== undefined &&
      (expect.contentDigest !== data.mountBinding.contentDigest || expect.manifestDigest !== data.mountBinding.manifestDigest)
    ) {
      throw new SealError('SEAL_BINDING', 'mount content changed after binding');
    }
    ctx.checkAbort();
    const report: CaptureReport = { files: countFiles(data), reusedFiles: session?.reusedFiles ?? 0, built: true, reused: false };
    if (session?.deferred) {
      // A digest names its manifest: a published one holds exactly these entries, so nothing is built.
      if (publishedAmong(sys, snapshotsFd, [data.digest]).size === 1) {
        return { data, report: { ...report, built: false, reused: true, ...saveOrSay(session, data.digest, data) } };
      }
      assembleDeferred(sys, storeRoot, buildFd, data, session, subvolumes, owner);
    }
    freezeArea(sys, buildFd, MOUNTS_AREA);
    const final = publishBuild(build, data, encodeDocumentPieces(data));
    const saved = session === undefined ? {} : saveOrSay(session, final.digest, data);
    return { data: final, report: { ...report, reused: !build.published, ...saved } };
  } finally {
    // Helper threads finish what they hold (closing its fds) before the build can be removed.
    ctx?.close();
    session?.close();
    build?.[Symbol.dispose]();
  }
}

