// pull-document.ts: the snapshot manifests pulls are fetching, assembled on the thread that proves and builds them (the fetching thread never holds one whole).
import { SealError } from '../../base/errors.js';
import { releasable, release } from '../../base/growable.js';
import { asBuffer } from '../../base/transfer.js';
import { DocumentAssembly, type RootDocument } from './pieces.js';

const documents = new Map<number, DocumentAssembly | Buffer>();
let nextId = 1;

/** Starts a document a root makes with pieces of these sizes (SEAL_CORRUPT naming `where` past maxBytes); returns its id. */
export function beginDocument(root: RootDocument, sizes: [string, number][], maxBytes: number, where: string): number {
  const bySize = new Map(sizes);
  // Given back as soon as the pull has proven it and holds its tables.
  const doc = new DocumentAssembly(root, (d) => bySize.get(d) ?? -1, maxBytes, (why) => new SealError('SEAL_CORRUPT', `${where} has a root document whose ${why}`), releasable);
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

/** Takes document `id` (it is forgotten here): its bytes. */
export function takeDocument(id: number): Buffer {
  const doc = documents.get(id);
  if (doc === undefined) throw new SealError('SEAL_UNAVAILABLE', `pulled document ${id} is gone`);
  documents.delete(id);
  return doc instanceof DocumentAssembly ? doc.bytes : doc;
}

/** Forgets document `id`. */
export function dropDocument(id: number): void {
  const doc = documents.get(id);
  documents.delete(id);
  if (doc !== undefined) release(doc instanceof DocumentAssembly ? doc.bytes : doc);
}
