// pull-document.ts: the snapshot manifests pulls are fetching, assembled on the thread that proves and builds them (the fetching thread never holds one whole), in an unnamed file of the store's tmp/ where it can be made.
import { randomBytes } from 'node:crypto';

import { SealError } from '../../base/errors.js';
import { openRealDir, own } from '../../base/fd.js';
import { releasable, release } from '../../base/growable.js';
import { writeAll } from '../../base/io.js';
import { asBuffer } from '../../base/transfer.js';
import { O_CREAT, O_EXCL, O_NOFOLLOW, O_RDWR } from '../../sys/constants.js';
import type { Sys } from '../../sys/native.js';
import { BUILD_PREFIX, TMP_DIR } from '../layout.js';
import { DocumentAssembly, type AssemblyTarget, type RootDocument } from './pieces.js';

/**
 * A document being assembled in a file of the store's tmp/ that has no name (unlinked as
 * soon as it was made, so nothing is left whatever ends the pull): its pages are the
 * page cache's, not the process's, which a 200k-file pull's 40 MB manifest would be.
 */
export class DocumentFile implements AssemblyTarget {
  constructor(
    readonly sys: Sys,
    readonly fd: number,
    readonly size: number,
  ) {}

  set(bytes: Uint8Array, at: number): void {
    writeAll(this.sys, this.fd, bytes, at);
  }

  /** pread of up to length bytes at position (a ReadAt). */
  readAt = (buffer: Buffer, offset: number, length: number, position: number): number => this.sys.pread(this.fd, buffer, offset, length, position);

  /** The whole document in memory (to say what is wrong with one the streamed read refused). */
  whole(): Buffer {
    const out = Buffer.alloc(this.size);
    for (let at = 0; at < this.size; ) {
      const n = this.sys.pread(this.fd, out, at, this.size - at, at);
      if (n === 0) break;
      at += n;
    }
    return out;
  }

  close(): void {
    own(this.sys, this.fd)[Symbol.dispose]();
  }
}

/** A document's bytes as the build takes them: in memory, or in its file. */
export type PulledDocument = Buffer | DocumentFile;

type Assembly = DocumentAssembly<PulledDocument>;

const documents = new Map<number, Assembly | Buffer>();
let nextId = 1;

/** An empty file of `size` bytes in the store's tmp/, already unlinked; undefined where none can be made (the document is then held in memory). */
function unnamedFile(sys: Sys, storeRoot: string, size: number): DocumentFile | undefined {
  let tmp: number;
  try {
    tmp = openRealDir(sys, `${storeRoot}/${TMP_DIR}`, 'store tmp directory');
  } catch {
    return undefined;
  }
  using dir = own(sys, tmp);
  const name = `${BUILD_PREFIX}document-${randomBytes(12).toString('hex')}`;
  let fd: number;
  try {
    fd = sys.openat(dir.fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  } catch {
    return undefined;
  }
  try {
    sys.unlinkat(dir.fd, name, 0);
    sys.ftruncate(fd, size);
  } catch {
    own(sys, fd)[Symbol.dispose]();
    return undefined;
  }
  return new DocumentFile(sys, fd, size);
}

/**
 * Starts a document a root makes with pieces of these sizes (SEAL_CORRUPT naming `where`
 * past maxBytes), in an unnamed file of the store's tmp/ (else in memory given back once
 * the pull has proven it); returns its id.
 */
export function beginDocument(sys: Sys, storeRoot: string, root: RootDocument, sizes: [string, number][], maxBytes: number, where: string): number {
  const bySize = new Map(sizes);
  const sizeOf = (d: string): number => bySize.get(d) ?? -1;
  const bad = (why: string): SealError => new SealError('SEAL_CORRUPT', `${where} has a root document whose ${why}`);
  let file: DocumentFile | undefined;
  let doc: Assembly;
  try {
    doc = new DocumentAssembly(root, sizeOf, maxBytes, bad, (size) => (file = unnamedFile(sys, storeRoot, size)) ?? releasable(size));
  } catch (err) {
    (file as DocumentFile | undefined)?.close();
    throw err;
  }
  const id = nextId++;
  documents.set(id, doc);
  return id;
}

/** A document fetched whole (a config blob of the first format); returns its id. */
export function wholeDocument(bytes: Uint8Array): number {
  const id = nextId++;
  documents.set(id, asBuffer(bytes));
  return id;
}

/** Puts a piece of document `id` in its places. */
export function putPiece(id: number, digest: string, piece: Uint8Array): void {
  const doc = documents.get(id);
  try {
    if (!(doc instanceof DocumentAssembly)) throw new SealError('SEAL_UNAVAILABLE', `pulled document ${id} is gone`);
    doc.put(digest, piece);
  } finally {
    // Copied into its places; moved here from the thread that fetched it, so nothing else uses it.
    release(piece);
  }
}

/** Takes document `id` (it is forgotten here): its bytes, which the taker gives back with releaseDocument. */
export function takeDocument(id: number): PulledDocument {
  const doc = documents.get(id);
  if (doc === undefined) throw new SealError('SEAL_UNAVAILABLE', `pulled document ${id} is gone`);
  documents.delete(id);
  return doc instanceof DocumentAssembly ? doc.bytes : doc;
}

/** Gives a taken document's memory or file back. */
export function releaseDocument(doc: PulledDocument): void {
  if (doc instanceof DocumentFile) doc.close();
  else release(doc);
}

/** Forgets document `id`. */
export function dropDocument(id: number): void {
  const doc = documents.get(id);
  documents.delete(id);
  if (doc !== undefined) releaseDocument(doc instanceof DocumentAssembly ? doc.bytes : doc);
}
