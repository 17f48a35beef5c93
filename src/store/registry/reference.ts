// reference.ts: what names a snapshot in a repository (its digest, a tag, a manifest digest), checked as Node checks arguments; the tag push derives from a revision.
import { createHash } from 'node:crypto';

import { checkString, invalidArgType, invalidArgValue } from '../../base/arg-errors.js';
import { checkFullDigest } from '../digests.js';
import { snapshotTag } from './remote.js';

/** The OCI distribution spec's tag grammar. */
const TAG_RE = /^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$/;
/** The tags push gives every snapshot (`ts-<digest>`): never a tag of the user's own. */
const DIGEST_TAG_RE = /^ts-[0-9a-f]{64}$/;
const HEX64_RE = /^[0-9a-f]{64}$/;

/** How a pull (or a cat) names the snapshot: its digest, a tag, or the digest of its image manifest. */
export type SnapshotRef = string | { tag: string } | { manifest: string };

/** A checked SnapshotRef. */
export type Reference = { kind: 'digest'; digest: string } | { kind: 'tag'; tag: string } | { kind: 'manifest'; manifest: string };

/** A tag of the user's own (push's `tag`, pull's `{ tag }`): the OCI grammar, and not of push's `ts-<digest>` form. */
export function checkTag(name: string, value: unknown): string {
  const tag = checkString(name, value);
  if (!TAG_RE.test(tag)) throw invalidArgValue(name, tag, 'must be an OCI tag ([a-zA-Z0-9_][a-zA-Z0-9._-]{0,127})');
  if (DIGEST_TAG_RE.test(tag)) throw invalidArgValue(name, tag, 'is of the form push gives every snapshot (ts-<digest>); pull by the digest instead');
  return tag;
}

/** An image manifest's digest: `sha256:` and 64 lower-case hex digits (the prefix may be left out). */
export function checkManifestDigest(name: string, value: unknown): string {
  const text = checkString(name, value);
  const hex = text.startsWith('sha256:') ? text.slice('sha256:'.length) : text;
  if (!HEX64_RE.test(hex)) throw invalidArgValue(name, text, 'must be an image manifest digest (sha256: and 64 lower-case hex digits)');
  return `sha256:${hex}`;
}

/**
 * Checks what names a snapshot: a full snapshot digest (a string), `{ tag }` or
 * `{ manifest }` (exactly one key). Node's TypeError otherwise.
 */
export function checkReference(value: unknown): Reference {
  if (typeof value === 'string') return { kind: 'digest', digest: checkFullDigest(value) };
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalidArgType('snapshot', ['string', 'object'], value);
  const keys = Object.keys(value);
  if (keys.length !== 1 || (keys[0] !== 'tag' && keys[0] !== 'manifest')) {
    throw invalidArgValue('snapshot', value, 'must be a snapshot digest, { tag } or { manifest }');
  }
  const v = value as { tag?: unknown; manifest?: unknown };
  return keys[0] === 'tag' ? { kind: 'tag', tag: checkTag('snapshot.tag', v.tag) } : { kind: 'manifest', manifest: checkManifestDigest('snapshot.manifest', v.manifest) };
}

/** The manifest reference a Reference is fetched by: `ts-<digest>`, the tag, or the manifest digest. */
export function manifestReference(ref: Reference): string {
  return ref.kind === 'digest' ? snapshotTag(ref.digest) : ref.kind === 'tag' ? ref.tag : ref.manifest;
}

/** `remote:tag` or `remote@sha256:…`, for messages and reports. */
export function shownReference(remote: string, ref: Reference): string {
  return ref.kind === 'manifest' ? `${remote}@${ref.manifest}` : `${remote}:${manifestReference(ref)}`;
}

/**
 * The tag push gives a snapshot captured with a revision, when no tag is asked for: the
 * revision itself when it is a tag (a commit id is), else its characters outside the
 * grammar made `-`, cut to 119, and `-` plus 8 hex digits of its sha256 (so two revisions
 * never share a tag by accident). No revision: none.
 */
export function revisionTag(revision: string): string | undefined {
  if (revision === '') return undefined;
  if (TAG_RE.test(revision) && !DIGEST_TAG_RE.test(revision)) return revision;
  const cleaned = revision.replace(/[^a-zA-Z0-9._-]/g, '-').replace(/^[.-]+/, '').slice(0, 119);
  const hash = createHash('sha256').update(revision, 'utf8').digest('hex').slice(0, 8);
  return cleaned === '' ? `rev-${hash}` : `${cleaned}-${hash}`;
}
