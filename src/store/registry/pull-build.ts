// pull-build.ts: the disk side of a pull (a worker job each step): a build in the store's tmp/, local contents, packs, publish.
import { createHash } from 'node:crypto';

import { SealError } from '../../base/errors.js';
import { CHUNK_BYTES } from '../../base/io.js';
import { DIR_FLAGS, openChildDir, own, removeAt } from '../../base/fd.js';
import { writeAll } from '../../base/io.js';
import { escapePath } from '../../base/paths.js';
import { fillFile } from '../../files/copy-file.js';
import { O_CREAT, O_EXCL, O_RDWR } from '../../sys/constants.js';
import { hasCode } from '../../sys/errno.js';
import { identityOf } from '../../sys/identity.js';
import type { Sys } from '../../sys/native.js';
import { encodeDocumentPieces, withSource, type StoredSnapshot } from '../document.js';
import { COPY_AREA, MOUNTS_AREA, TMP_DIR, mountDir } from '../layout.js';
import { areasOf, buildAreas, makeDir } from '../manifest-tree.js';
import { freezeArea, openBuild, publishBuild, type Build } from '../publish.js';
import { verifyAt } from '../verify.js';
import { findLocal } from './local.js';
import type { Content, Layout, Pack, Place } from './mapping.js';
import { proveSnapshot, type Fetched, type FetchedRef } from './prove.js';
import { releaseDocument, takeDocument, type PulledDocument } from './pull-document.js';
import type { PackLayer } from './artifact.js';
import { openContent, openDeep, placeParts, tooLong } from './pack.js';
import { packIndex } from './pack-index.js';
import { frozenFileMode } from '../../base/frozen.js';
import { release } from '../../base/growable.js';

interface PullState {
  build: Build;
  /** The snapshot to publish (its manifest.json is written from it: the bytes pulled, proven canonical). */
  data: StoredSnapshot;
  layout: Layout;
  /** Each pack's layer, in the layout's order. */
  packLayers: PackLayer[];
  /** Each content (by its index in layout.contents) already in the build, at all its places: 1. */
  have: Uint8Array;
  buffer: Buffer;
}

/** A pack to download: its index in the layout, blob digest and size. */
export interface PackToPull {
  index: number;
  digest: string;
  size: number;
}

/** A large file to stream: its index in the layout, sha256, size, and the place it goes first. */
export interface FileToPull {
  index: number;
  sha256: string;
  size: number;
  place: Place;
}

export interface PullStart {
  id: number;
  /** The digest it publishes under: the registry's, or the one for options.source. */
  digest: string;
  /** Absolute path of the build, where the caller streams large files (`<area>/<path>`). */
  buildPath: string;
  /** What is still to download. */
  packs: PackToPull[];
  files: FileToPull[];
  /** Blobs the snapshot has (config included). */
  blobs: number;
  /** Contents taken from snapshots already in the store, and their bytes. */
  reused: number;
  reusedBytes: number;
}

const builds = new Map<number, PullState>();
let nextId = 1;

function state(id: number): PullState {
  const s = builds.get(id);
  if (s === undefined) throw new SealError('SEAL_UNAVAILABLE', `pull build ${id} is gone`);
  return s;
}

function parentOf(sys: Sys, buildFd: number, parts: string[]): number {
  return openDeep(sys, buildFd, parts.slice(0, -1), DIR_FLAGS);
}

/** Runs fn for the entry at rel (`<area>/<path>`); ENAMETOOLONG (a name or link this system cannot hold) is SEAL_LIMIT naming it. */
function atPath<T>(rel: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (hasCode(err, 'ENAMETOOLONG')) throw tooLong(rel, err);
    throw err;
  }
}

/** Creates a file at place, frozen from creation (0400, 0500 when executable), and returns its fd. */
function createAt(sys: Sys, buildFd: number, place: Place): number {
  return atPath(`${place.area}/${place.path}`, () => openDeep(sys, buildFd, placeParts(place), O_RDWR | O_CREAT | O_EXCL, frozenFileMode(place.mode)));
}

/**
 * The build's areas and every directory of the manifest (0700 until frozen), plus its
 * empty files. The other files are made as their contents arrive, the symlinks last.
 */
function makeSkeleton(sys: Sys, s: PullState): void {
  const { build, data } = s;
  sys.mkdirat(build.fd, COPY_AREA, 0o700);
  sys.mkdirat(build.fd, MOUNTS_AREA, 0o700);
  {
    using mounts = own(sys, openChildDir(sys, build.fd, MOUNTS_AREA));
    data.mounts.forEach((_m, i) => sys.mkdirat(mounts.fd, mountDir(i), 0o700));
  }
  const later = (): void => {};
  // Only the directories are held as a tree (files and links come later, from the layout and the tables).
  buildAreas(
    sys,
    build.fd,
    data,
    (area) => ({
      file: later,
      symlink: later,
      makeDir: (dirFd, name, e) => atPath(`${area}/${e.path}`, () => makeDir(sys, dirFd, name)),
    }),
    undefined,
    (e) => e.kind === 'directory',
  );
  for (const place of s.layout.empty()) own(sys, createAt(sys, build.fd, place)).close();
}

/** Fills every place of content from srcFd (reflink where the filesystem can), proving its sha256; false when it differs. */
function fillPlaces(sys: Sys, s: PullState, srcFd: number, content: Content, from: number): boolean {
  const before = identityOf(sys.fstat(srcFd));
  for (const place of content.places.slice(from)) {
    using dst = own(sys, createAt(sys, s.build.fd, place));
    const got = fillFile(sys, s.buffer, srcFd, dst.fd, before, { clone: true, range: true });
    if (got === 'changed' || got.sha256 !== content.sha256) return false;
  }
  return true;
}

function removePlaces(sys: Sys, s: PullState, content: Content): void {
  for (const place of content.places) {
    const parts = placeParts(place);
    using parent = own(sys, parentOf(sys, s.build.fd, parts));
    removeAt(sys, parent.fd, parts[parts.length - 1]!);
  }
}

/** Takes every content the store's published snapshots already hold; a local copy that fails its hash is left to download. */
function reuseLocal(sys: Sys, s: PullState): { reused: number; reusedBytes: number } {
  let reused = 0;
  let reusedBytes = 0;
  findLocal(sys, s.build.snapshotsFd, s.layout.contents, (rootFd, local, k) => {
    const content = s.layout.contents.content(k);
    let ok = false;
    try {
      using src = own(sys, openContent(sys, rootFd, local));
      ok = fillPlaces(sys, s, src.fd, content, 0);
    } catch (err) {
      if (!(err instanceof SealError)) throw err;
    }
    if (!ok) {
      removePlaces(sys, s, content);
      return;
    }
    s.have[k] = 1;
    reused++;
    reusedBytes += content.size;
  });
  return { reused, reusedBytes };
}

/** Whether the build has every content of the pack. */
function hasPack(s: PullState, pack: Pack): boolean {
  for (let k = pack.from; k < pack.to; k++) if (s.have[k] === 0 && s.layout.contents.size(k) < pack.threshold) return false;
  return true;
}

/**
 * Starts a pull: proves the fetched config (see proveSnapshot), then makes a locked
 * build in tmp/ with its directories and empty files, and takes the contents the store
 * already has. Returns what is left to download.
 */
export function startPull(sys: Sys, storeRoot: string, ref: FetchedRef): PullStart {
  const { document, ...rest } = ref;
  const fetched: Fetched = { ...rest, config: takeDocument(document) };
  let proof: ReturnType<typeof proveSnapshot>;
  try {
    proof = proveSnapshot(fetched);
  } finally {
    // Proven and held as tables (or refused): the bytes are not needed again (manifest.json is written from the tables).
    releaseDocument(fetched.config as PulledDocument);
  }
  const { data: proven, layout, packLayers } = proof;
  // Proven as the registry holds it; published, when asked, for the local source path.
  const data = fetched.source !== undefined && fetched.source !== proven.source ? withSource(proven, fetched.source) : proven;
  const build = openBuild(sys, storeRoot);
  const s: PullState = { build, data, layout, packLayers, have: new Uint8Array(layout.contents.count), buffer: Buffer.allocUnsafe(CHUNK_BYTES) };
  try {
    makeSkeleton(sys, s);
    const { reused, reusedBytes } = fetched.noReuse === true ? { reused: 0, reusedBytes: 0 } : reuseLocal(sys, s);
    const id = nextId++;
    builds.set(id, s);
    const packs = layout.packs.flatMap((p, index) => (hasPack(s, p) ? [] : [{ index, digest: packLayers[index]!.digest, size: packLayers[index]!.size }]));
    const files = layout.files.flatMap((f, index) => (s.have[layout.fileIndex[index]!] === 1 ? [] : [{ index, sha256: f.sha256, size: f.size, place: f.places[0]! }]));
    const blobs = 1 + fetched.artifact.pieces.length + layout.packs.length + layout.files.length;
    return { id, digest: data.digest, buildPath: `${storeRoot}/${TMP_DIR}/${build.name}`, packs, files, blobs, reused, reusedBytes };
  } catch (err) {
    build[Symbol.dispose]();
    throw err;
  }
}

/**
 * Writes the contents of pack `index` the build lacks, each proven against its sha256
 * first. An indexed pack's index must be exactly the one its contents make (pack-index.ts),
 * so a pack a cat reads by its index is never one a pull would refuse.
 */
export function writePack(sys: Sys, id: number, index: number, bytes: Uint8Array): void {
  try {
    writePackBytes(sys, state(id), index, bytes);
  } finally {
    // Moved here from the thread that fetched it: nothing else uses it.
    release(bytes);
  }
}

function writePackBytes(sys: Sys, s: PullState, index: number, bytes: Uint8Array): void {
  const pack = s.layout.packs[index]!;
  const layer = s.packLayers[index]!;
  if (bytes.length !== layer.size) throw new SealError('SEAL_CORRUPT', `pack ${pack.bucket} has ${bytes.length} bytes, not ${layer.size}`);
  if (layer.indexed && !packIndex(pack.contents).equals(bytes.subarray(pack.size))) {
    throw new SealError('SEAL_CORRUPT', `pack ${pack.bucket} ends with another index than its contents make`);
  }
  let offset = 0;
  for (let k = pack.from; k < pack.to; k++) {
    const size = s.layout.contents.size(k);
    if (size >= pack.threshold) continue;
    const piece = bytes.subarray(offset, offset + size);
    offset += size;
    if (s.have[k] === 1) continue;
    const c = s.layout.contents.content(k);
    if (createHash('sha256').update(piece).digest('hex') !== c.sha256) {
      const rel = `${c.places[0]!.area}/${c.places[0]!.path}`;
      throw new SealError('SEAL_CORRUPT', `pack ${pack.bucket} holds other bytes than the manifest says for ${escapePath(rel)}`, { path: rel });
    }
    for (const place of c.places) {
      using file = own(sys, createAt(sys, s.build.fd, place));
      writeAll(sys, file.fd, piece);
    }
    s.have[k] = 1;
  }
}

/** Creates large file `index` of the layout at its first place (frozen mode) for the caller to stream into; returns the fd. */
export function openPulledFile(sys: Sys, id: number, index: number): number {
  const s = state(id);
  return createAt(sys, s.build.fd, s.layout.files[index]!.places[0]!);
}

function makeSymlinks(sys: Sys, s: PullState): void {
  for (const { area, entries } of areasOf(s.data)) {
    for (const e of entries) {
      if (e.kind !== 'symlink') continue;
      const parts = [...area.split('/'), ...e.path.split('/')];
      atPath(`${area}/${e.path}`, () => {
        using parent = own(sys, parentOf(sys, s.build.fd, parts));
        sys.symlinkat(e.link_target, parent.fd, parts[parts.length - 1]!);
      });
    }
  }
}

/**
 * Completes a pull: copies each streamed large file (`streamed`: indexes into
 * layout.files, written at their first place) to its other places, hashing it again as
 * it is copied; adds symlinks, freezes directories, walks the whole build against the
 * manifest (every kind, mode, size and link target, nothing missing and nothing more),
 * and publishes it by the store's no-replace rename. Files are not read again: each
 * one's bytes were proven as they were written (a pack's contents are the very bytes
 * hashed before the write, a streamed file was hashed write by write, a content taken
 * from the store was hashed as it was copied). The build is gone afterwards.
 */
export function finishPull(sys: Sys, id: number, streamed: number[]): void {
  const s = state(id);
  try {
    for (const i of streamed) {
      const content = s.layout.files[i]!;
      using src = own(sys, openContent(sys, s.build.fd, content));
      if (!fillPlaces(sys, s, src.fd, content, 1)) throw new SealError('SEAL_CORRUPT', `pulled file changed: ${escapePath(content.places[0]!.path)}`);
      s.have[s.layout.fileIndex[i]!] = 1;
    }
    makeSymlinks(sys, s);
    freezeArea(sys, s.build.fd, COPY_AREA);
    freezeArea(sys, s.build.fd, MOUNTS_AREA);
    verifyAt(sys, s.build.fd, s.data, {}, undefined, false);
    publishBuild(s.build, s.data, encodeDocumentPieces(s.data));
  } finally {
    abortPull(sys, id);
  }
}

/** Removes a pull's build (nothing was published). */
export function abortPull(_sys: Sys, id: number): void {
  const s = builds.get(id);
  if (s === undefined) return;
  builds.delete(id);
  s.build[Symbol.dispose]();
}
