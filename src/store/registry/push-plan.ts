// push-plan.ts: the pushes under way, kept on the thread that reads their snapshot: its decoded entries until its layout is made, its layout until its packs are sent.
import { SealError } from '../../base/errors.js';
import { asBuffer, movable } from '../../base/transfer.js';
import { releasable, release } from '../../base/growable.js';
import type { Sys } from '../../sys/native.js';
import { documentText, type StoredSnapshot } from '../document.js';
import { readDocumentBytes } from '../document-parse.js';
import { MAX_PACK_BYTES, chooseLayout, oversizedPack, summaryOf, type Layout, type LayoutSummary, type Pack } from './mapping.js';
import { readPushConfig } from './pack.js';
import { cutPieces, type PieceRange } from './pieces.js';
import { readPushPiece, streamPushDocument } from './push-document.js';

interface PushState {
  digest: string;
  snapshotRoot: string;
  /** The snapshot's manifest.json, until its pieces are sent, when it was read whole (else each piece is read again as it is sent). */
  document: Buffer | undefined;
  /** The snapshot its manifest.json proved to be, until its layout is made. */
  data: StoredSnapshot | undefined;
  pieces: PieceRange[];
  layout: Layout | undefined;
}

const pushes = new Map<number, PushState>();
let nextId = 1;

/** What push needs to start: the root document, the pieces (ranges of manifest.json), when it was published and its last keys. */
export interface PushStart {
  id: number;
  root: string;
  pieces: PieceRange[];
  createdMs: number;
  source: string;
  revision: string;
}

function state(id: number): PushState {
  const s = pushes.get(id);
  if (s === undefined) throw new SealError('SEAL_UNAVAILABLE', `push ${id} is gone`);
  return s;
}

/**
 * The revision and source of a published snapshot's manifest.json, read from its last
 * keys without parsing its entry lists: the document is canonical (sorted keys, every
 * quote inside a string escaped), so `,"revision":` occurs once, after the mounts.
 */
function lastKeys(config: Buffer): { source: string; revision: string } {
  const at = config.lastIndexOf(',"revision":', undefined, 'latin1');
  let tail: { source?: unknown; revision?: unknown } = {};
  try {
    if (at >= 0) tail = JSON.parse(`{${config.toString('latin1', at + 1)}`) as typeof tail;
  } catch {
    // not the canonical tail: refused below, as decodeDocument refuses the whole
  }
  if (typeof tail.source !== 'string' || typeof tail.revision !== 'string') throw new SealError('SEAL_CORRUPT', 'snapshot manifest is corrupt: no source or revision at its end');
  return { source: tail.source, revision: tail.revision };
}

/**
 * Starts a push of the published snapshot `digest` at snapshotRoot: reads its
 * manifest.json (under the store's shared lock) in windows into tables, proven, and cuts
 * it into its pieces and root document, never holding it whole; a document that is not
 * canonical is read whole, proven, and sent as the canonical text of the same snapshot.
 * The state stays here until endPush.
 */
export function startPush(sys: Sys, snapshotRoot: string, digest: string): PushStart {
  const streamed = streamPushDocument(sys, snapshotRoot, digest);
  if (streamed !== undefined) {
    const { data, root, pieces, createdMs } = streamed;
    const id = nextId++;
    pushes.set(id, { digest, snapshotRoot, document: undefined, data, pieces, layout: undefined });
    return { id, root, pieces, createdMs, source: data.source, revision: data.revision };
  }
  const { bytes, createdMs } = readPushConfig(sys, snapshotRoot, digest);
  let document = asBuffer(bytes);
  try {
    // Proven here (SEAL_CORRUPT as a load says it). A document that is valid but not canonical (as an older
    // writer or a hand left it) goes as the canonical text of the same snapshot: the only form a pull takes.
    const read = readDocumentBytes(document, digest);
    if (!read.canonical) {
      release(document);
      document = Buffer.from(documentText(read.data), 'latin1');
    }
    const { root, pieces } = cutPieces(document);
    const keys = lastKeys(document);
    const id = nextId++;
    pushes.set(id, { digest, snapshotRoot, document, data: read.data, pieces, layout: undefined });
    return { id, root, pieces, createdMs, ...keys };
  } catch (err) {
    release(document);
    throw err;
  }
}

/** Piece `index` of push `id`'s manifest.json: its bytes, moved to the thread that sends it (which releases them once sent). */
export function pushPiece(sys: Sys, id: number, index: number): Uint8Array {
  const s = state(id);
  const piece = s.pieces[index];
  if (piece === undefined) throw new SealError('SEAL_UNAVAILABLE', `push ${id} has no piece ${index}`);
  if (s.document === undefined) return movable(readPushPiece(sys, s.snapshotRoot, s.digest, piece));
  const bytes = releasable(piece.end - piece.start);
  s.document.copy(bytes, 0, piece.start, piece.end);
  return movable(bytes);
}

/**
 * Lays out push `id`'s snapshot as push sends it (the snapshot its manifest.json proved
 * to be when the push started) and keeps the layout: packs are read by their index in it.
 * Returns what the image manifest needs.
 */
export function planPush(id: number): LayoutSummary {
  const s = state(id);
  const data = s.data;
  if (data === undefined) throw new SealError('SEAL_UNAVAILABLE', `push ${id} has let go of its manifest`);
  const layout = chooseLayout(data);
  const huge = oversizedPack(layout);
  if (huge !== undefined) {
    throw new SealError('SEAL_LIMIT', `snapshot ${data.digest} would pack ${huge} bytes of files together, more than a pull holds in memory (${MAX_PACK_BYTES} bytes): it has too many files under the size that gets a blob of its own to push`);
  }
  s.layout = layout;
  s.data = undefined;
  return summaryOf(s.layout);
}

/** Lets go of push `id`'s manifest.json (its pieces are sent and its layout made). */
export function pushDocumentSent(id: number): void {
  const s = state(id);
  if (s.document !== undefined) release(s.document);
  s.document = undefined;
}

/** Pack `index` of push `id`'s layout. */
export function planPack(id: number, index: number): Pack {
  const pack = pushes.get(id)?.layout?.packs[index];
  if (pack === undefined) throw new SealError('SEAL_UNAVAILABLE', `push ${id} has no pack ${index}`);
  return pack;
}

/** Forgets push `id`. */
export function endPush(id: number): void {
  const document = pushes.get(id)?.document;
  if (document !== undefined) release(document);
  pushes.delete(id);
}
