// manifest-stream.ts: canonical JSON documents and digests that hold entry lists, produced and hashed in chunks, never whole.
import { createHash } from 'node:crypto';

import { encodeEntries, type Chunk } from './entry-json.js';
import { RawJson, encodeValue, type Entries, type Json, type ManifestEntry } from './manifest.js';

export type { Chunk } from './entry-json.js';

/** The canonical JSON list of entries (already sorted), as one string. */
export function entriesText(entries: Iterable<ManifestEntry>): string {
  let out = '';
  encodeEntries(entries, (chunk) => (out += chunkText(chunk)));
  return out;
}

export function chunkText(chunk: Chunk): string {
  return typeof chunk === 'string' ? chunk : chunk.toString('latin1');
}

/** Canonical JSON in pieces: text, or an entry list encoded in its place. */
export type Piece = string | Entries;

/** Hands every piece's text to sink, in order, the entry lists in chunks (each consumed before the next). */
export function eachChunk(pieces: readonly Piece[], sink: (chunk: Chunk) => void): void {
  for (const p of pieces) {
    if (typeof p === 'string') sink(p);
    else encodeEntries(p, sink);
  }
}

/** Stands for an entry list in a skeleton; canonical JSON never holds a raw NUL, so it cannot collide. */
export const SLOT = '\u0000';

/** canonicalJson of value with each RawJson(SLOT) in it replaced, in order, by lists[i]: as pieces. */
export function piecesOf(value: Json | object, lists: readonly Entries[]): Piece[] {
  const skeleton = encodeValue(value as Json).split(SLOT);
  return skeleton.flatMap((part, i): Piece[] => (i < lists.length ? [part, lists[i]!] : [part]));
}

/** sha256 of the canonical JSON list of entries (entries must already be sorted). */
export function manifestDigest(entries: Entries): string {
  const hash = createHash('sha256');
  encodeEntries(entries, (chunk) => hash.update(chunk));
  return hash.digest('hex');
}

export interface MountDigestInput {
  readonly source: string;
  readonly target: string;
  readonly entries: Entries;
}

/** The seed's dependency content and manifest digests over the captured mounts; each entry list is encoded once, for both. */
export function mountDigests(mounts: readonly MountDigestInput[]): { contentDigest: string; manifestDigest: string } {
  return mountDigestsOf(mounts, (i, sink) => encodeEntries(mounts[i]!.entries, sink));
}

/**
 * mountDigests with each mount's entry list given as its canonical JSON by `list(i, sink)`
 * (chunks handed to sink in order): a document's own text of the list hashes as it stands.
 */
export function mountDigestsOf(
  mounts: readonly Pick<MountDigestInput, 'source' | 'target'>[],
  list: (i: number, sink: (chunk: Chunk) => void) => void,
): { contentDigest: string; manifestDigest: string } {
  const content = mounts.map(() => ({ entries: new RawJson(SLOT) }));
  const contentParts = encodeValue(content as unknown as Json).split(SLOT);
  const manifest = {
    dependencies: mounts.map((m, i) => ({ content: content[i]!, source: m.source, target: m.target })),
    schema_version: 1,
  };
  const manifestParts = encodeValue(manifest as unknown as Json).split(SLOT);
  const c = createHash('sha256');
  const m = createHash('sha256');
  mounts.forEach((_mount, i) => {
    c.update(contentParts[i]!);
    m.update(manifestParts[i]!);
    list(i, (chunk) => {
      c.update(chunk);
      m.update(chunk);
    });
  });
  c.update(contentParts[mounts.length]!);
  m.update(manifestParts[mounts.length]!);
  return { contentDigest: c.digest('hex'), manifestDigest: m.digest('hex') };
}
