// pieces.ts: a snapshot's metadata as content-addressed pieces (each entry list cut into runs of entries where their paths say) and the small root document that names them in the lists' places.
import { wildcardBudgetProblem } from '../../capture/exclude.js';
import { SealError } from '../../base/errors.js';
import { sha256Digest } from '../../base/manifest.js';
import { cutDocument } from '../document-cut.js';
import type { ListVisitor } from '../document-stream.js';

/**
 * At most this many pieces (within the layer budget: ECR refuses a manifest of more than 500
 * layers). Fewer, larger pieces cost a one-file change more bytes (its piece, about 300 KB
 * for 50k files) and a cat by digest or a pull fewer requests: a registry spends most of a
 * small blob on the request (a cat by digest of the 50k tree: 213–232 ms with 32, 311–356 ms
 * with 64).
 */
export const MAX_PIECES = 32;
/** A piece ends after an entry whose path hashes to 0 in its low bits: at least this many, more for a larger tree. */
const MIN_CUT_BITS = 6;
/** ... once it holds this many bytes: a small tree's list is one piece. */
const MIN_PIECE_BYTES = 128 * 1024;
/** The largest root document a pull accepts. */
export const MAX_ROOT_BYTES = 64 * 1024 * 1024;

const SEP = Buffer.from('},{"kind":"', 'latin1');
const PATH_KEY = Buffer.from(',"path":', 'latin1');
const SHA_KEY = Buffer.from(',"sha256":"', 'latin1');
const PIECE_RE = /^sha256:[0-9a-f]{64}$/;

/** One piece of a document: its blob digest and where its bytes are in the document. */
export interface PieceRange {
  digest: string;
  start: number;
  end: number;
  /** The path of its first entry (its layer's ANNOTATION_FIRST_PATH). */
  first: string;
}

/** The longest first path a piece's layer carries, in UTF-16 code units: MAX_PIECES of them keep the image manifest small whatever the paths. */
const FIRST_PATH_UNITS = 256;

/**
 * The path of the first entry of the piece at doc[start…] (the JSON string after its first
 * `,"path":`), cut to FIRST_PATH_UNITS (never inside a surrogate pair). A cut path is a
 * prefix, so it sorts no later than the path: a reader guided by it may pick a later piece
 * than the one that holds what it looks for, find nothing there, and read every piece.
 */
export function firstPath(doc: Buffer, start: number, end: number): string {
  const at = doc.indexOf(PATH_KEY, start);
  const sha = doc.indexOf(SHA_KEY, at);
  if (at < 0 || sha < 0 || sha > end) throw new SealError('SEAL_CORRUPT', 'snapshot manifest is corrupt: an entry has no path and sha256');
  const path = JSON.parse(doc.toString('latin1', at + PATH_KEY.length, sha)) as string;
  if (path.length <= FIRST_PATH_UNITS) return path;
  const last = path.charCodeAt(FIRST_PATH_UNITS - 1);
  return path.slice(0, last >= 0xd800 && last <= 0xdbff ? FIRST_PATH_UNITS - 1 : FIRST_PATH_UNITS);
}

export interface DocumentPieces {
  /** The root document: the manifest with each entry list replaced by the list of its pieces' digests. */
  root: string;
  /** The distinct pieces, in the order the root first names them. */
  pieces: PieceRange[];
}

/** FNV-1a over bytes [from, to) of text: the path's own bits, so a cut depends on the path alone. */
function pathHash(text: Buffer, from: number, to: number): number {
  let h = 0x811c9dc5;
  for (let i = from; i < to; i++) h = Math.imul(h ^ text[i]!, 0x01000193);
  return h >>> 0;
}

/** The low bits every cut mask has: only an entry whose path hashes to 0 in them can end a piece before its list's last. */
const CANDIDATE_MASK = 2 ** MIN_CUT_BITS - 1;

/**
 * One entry list's places a piece may end: after its last entry, and after each entry whose
 * path hashes to 0 in the low MIN_CUT_BITS bits (about one in 64, so a list of a million
 * entries holds some 16k of them, not a million).
 */
export interface ListEntries {
  /** Where the list's first entry starts and its `]` is, in the document (equal for an empty list). */
  start: number;
  last: number;
  /** Where each candidate entry ends in the document, and its path's hash. */
  ends: number[];
  hashes: number[];
}

/** The entries of a list (`[e1,e2,…]` at doc[offset…]), each found by the `},{"kind":"` after it. */
function entriesOf(list: Buffer, offset: number, bad: (why: string) => SealError): ListEntries {
  const cuts = new CutCandidates();
  cuts.list(0, offset);
  const last = list.length - 1;
  for (let entryStart = 1; entryStart < last; ) {
    const sep = list.indexOf(SEP, entryStart);
    const entryEnd = sep < 0 || sep >= last ? last : sep + 1;
    const path = list.indexOf(PATH_KEY, entryStart);
    const sha = path < 0 ? -1 : list.indexOf(SHA_KEY, path);
    if (path < 0 || sha < 0 || sha > entryEnd) throw bad('an entry has no path and sha256');
    cuts.entry(list, path + PATH_KEY.length, sha, offset + entryEnd);
    entryStart = entryEnd + 1;
  }
  cuts.end(offset + last);
  return cuts.lists[0]!;
}

/**
 * Each list's pieces for a cut mask: runs of whole entries, each the entries' text joined
 * by commas as the list holds it, cut after an entry whose path hashes to 0 under the
 * mask once the piece holds MIN_PIECE_BYTES. A change of one entry changes one piece, and the same entries give the same
 * pieces wherever the tree was captured.
 */
function rangesOf(lists: readonly ListEntries[], mask: number): [number, number][][] {
  return lists.map((l) => {
    const ranges: [number, number][] = [];
    let pieceStart = l.start;
    l.hashes.forEach((h, i) => {
      const end = l.ends[i]!;
      if ((h & mask) === 0 && end - pieceStart >= MIN_PIECE_BYTES) {
        ranges.push([pieceStart, end]);
        pieceStart = end + 1;
      }
    });
    if (l.start < l.last) ranges.push([pieceStart, l.last]);
    return ranges;
  });
}

/** The cut: the fewest mask bits (from MIN_CUT_BITS) that make at most MAX_PIECES pieces, so a bigger tree has bigger pieces. */
export function cutLists(lists: readonly ListEntries[]): [number, number][][] {
  for (let bits = MIN_CUT_BITS; ; bits++) {
    const ranges = rangesOf(lists, 2 ** bits - 1);
    if (bits === 31 || ranges.reduce((n, r) => n + r.length, 0) <= MAX_PIECES) return ranges;
  }
}

/**
 * The root document and distinct pieces of a document cut into `parts` around its lists,
 * each list's entries given by `lists`; `piece` gives the digest and first path of the
 * bytes [start, end) of the document.
 */
export function piecesOf(parts: readonly string[], lists: readonly ListEntries[], piece: (start: number, end: number) => { digest: string; first: string }): DocumentPieces {
  const seen = new Set<string>();
  const pieces: PieceRange[] = [];
  let root = parts[0]!;
  cutLists(lists).forEach((listRanges, i) => {
    const digests = listRanges.map(([start, end]) => {
      const { digest, first } = piece(start, end);
      if (!seen.has(digest)) {
        seen.add(digest);
        pieces.push({ digest, start, end, first });
      }
      return digest;
    });
    root += JSON.stringify(digests) + parts[i + 1]!;
  });
  return { root, pieces };
}

/** Cuts a snapshot's manifest.json (canonical) into its pieces and root document. */
export function cutPieces(doc: Buffer): DocumentPieces {
  const bad = (why: string): SealError => new SealError('SEAL_CORRUPT', `snapshot manifest is corrupt: ${why}`);
  const { parts, lists } = cutDocument(doc, bad);
  const entries = lists.map((list) => entriesOf(list, list.byteOffset - doc.byteOffset, bad));
  return piecesOf(parts, entries, (start, end) => ({ digest: sha256Digest(doc.subarray(start, end)), first: firstPath(doc, start, end) }));
}

/** Each list's places a piece may end, noted as a document streams by (streamDocument's visitor). */
export class CutCandidates implements ListVisitor {
  readonly lists: ListEntries[] = [];

  list(_index: number, open: number): void {
    this.lists.push({ start: open + 1, last: open + 1, ends: [], hashes: [] });
  }

  entry(buf: Buffer, pathFrom: number, pathTo: number, end: number): void {
    const hash = pathHash(buf, pathFrom, pathTo);
    if ((hash & CANDIDATE_MASK) !== 0) return;
    const l = this.lists[this.lists.length - 1]!;
    l.ends.push(end);
    l.hashes.push(hash);
  }

  end(last: number): void {
    const l = this.lists[this.lists.length - 1]!;
    l.last = last;
    // The list's last entry ends it whatever its path.
    if (l.ends[l.ends.length - 1] === last) {
      l.ends.pop();
      l.hashes.pop();
    }
  }
}

/** A root document read back: the text around its lists, and each list's piece digests. */
export interface RootDocument {
  parts: string[];
  lists: string[][];
  /** The distinct digests, in the order the root first names them. */
  distinct: string[];
}

/**
 * Reads a root document: cut as a manifest is, each list a canonical JSON list of
 * `sha256:` digests (else SEAL_CORRUPT naming `where`). Only a guess at the snapshot
 * until the document assembled from it and its pieces proves its digest.
 */
export function readRoot(root: Buffer, where: string): RootDocument {
  const bad = (why: string): SealError => new SealError('SEAL_CORRUPT', `${where} does not hold a valid snapshot root document: ${why}`);
  const { parts, lists: texts } = cutDocument(root, bad);
  const lists = texts.map((text) => {
    let digests: unknown;
    try {
      digests = JSON.parse(text.toString('latin1'));
    } catch {
      throw bad('a list of pieces is not JSON');
    }
    if (!Array.isArray(digests) || !digests.every((d) => typeof d === 'string' && PIECE_RE.test(d))) throw bad('a list of pieces holds other than sha256 digests');
    if (JSON.stringify(digests) !== text.toString('latin1')) throw bad('a list of pieces is not in canonical form');
    return digests as string[];
  });
  checkRootPatterns(root, bad);
  return { parts, lists, distinct: [...new Set(lists.flat())] };
}

/**
 * A registry's exclude patterns held to the wildcards a capture takes in all
 * (wildcardBudgetProblem) before the document is assembled: its check matches every entry
 * against them.
 */
function checkRootPatterns(root: Buffer, bad: (why: string) => SealError): void {
  let exclude: unknown;
  try {
    exclude = (JSON.parse(root.toString('utf8')) as { exclude?: unknown }).exclude;
  } catch {
    // Said where the document is read as JSON (`its JSON is malformed (…)`).
    return;
  }
  if (!Array.isArray(exclude) || !exclude.every((p) => typeof p === 'string')) return;
  const why = wildcardBudgetProblem(exclude as string[]);
  if (why !== undefined) throw bad(`exclude ${why}`);
}

/** Where an assembly's bytes go: memory (a Buffer is one), or a file (pull-document.ts). */
export interface AssemblyTarget {
  /** Puts bytes at offset `at`. */
  set(bytes: Uint8Array, at: number): void;
}

const latin1 = (text: string): Buffer => Buffer.from(text, 'latin1');

/**
 * The manifest a root document and its pieces make (each list `[` + its pieces joined by
 * commas + `]`), built as the pieces arrive: the root's text is in place from the start,
 * each piece is copied to where it goes and need not be kept.
 */
export class DocumentAssembly<T extends AssemblyTarget = Buffer> {
  /** The document's bytes (complete once every piece is put). */
  readonly bytes: T;
  readonly #places = new Map<string, { size: number; at: number[] }>();

  /**
   * `sizeOf`: each piece's size in bytes, as its layer says (a piece of another size is
   * refused). `bad`: the error for a document past `maxBytes`. `memory`: zeroed bytes of
   * the document's size (releasable() for a document whose end of use is known, or a file
   * of that size), so the bytes of a piece that never comes stay zero and fail every proof.
   */
  constructor(root: RootDocument, sizeOf: (digest: string) => number, maxBytes: number, bad: (why: string) => SealError, memory: (size: number) => T = Buffer.alloc as unknown as (size: number) => T) {
    let total = 0;
    const text = (t: string): number => (total += t.length);
    text(root.parts[0]!);
    root.lists.forEach((digests, i) => {
      total += 1;
      // One list's pieces hold different entries (its paths are distinct), so never the same bytes:
      // a digest named twice in a list only makes a small download into a large document.
      if (new Set(digests).size !== digests.length) throw bad(`list ${i} names a piece twice`);
      digests.forEach((d, k) => {
        if (k > 0) total += 1;
        let place = this.#places.get(d);
        if (place === undefined) {
          const size = sizeOf(d);
          if (!Number.isSafeInteger(size) || size < 0) throw bad(`piece ${d} has no size`);
          this.#places.set(d, (place = { size, at: [] }));
        }
        place.at.push(total);
        total += place.size;
      });
      total += 1;
      text(root.parts[i + 1]!);
    });
    if (total > maxBytes) throw bad(`entry lists make a manifest of ${total} bytes (at most ${maxBytes})`);
    this.bytes = memory(total);
    // The root's own text, gathered run by run (a file target gets one write per list, not one per comma).
    let at = 0;
    let run: number[] = [];
    let runAt = 0;
    const flush = (): void => {
      if (run.length > 0) this.bytes.set(Uint8Array.from(run), runAt);
      run = [];
    };
    const put = (t: string): void => {
      flush();
      const bytes = latin1(t);
      this.bytes.set(bytes, at);
      at += bytes.length;
      runAt = at;
    };
    const byte = (b: number): void => {
      if (run.length === 0) runAt = at;
      run.push(b);
      at++;
    };
    put(root.parts[0]!);
    root.lists.forEach((digests, i) => {
      byte(0x5b);
      digests.forEach((d, k) => {
        if (k > 0) byte(0x2c);
        flush();
        at += this.#places.get(d)!.size;
      });
      byte(0x5d);
      put(root.parts[i + 1]!);
    });
    flush();
  }

  /** Copies piece `digest` to every place the root names it. */
  put(digest: string, piece: Uint8Array): void {
    const place = this.#places.get(digest);
    if (place === undefined || piece.length !== place.size) throw new SealError('SEAL_CORRUPT', `piece ${digest} is not one the root document names with ${piece.length} bytes`);
    for (const at of place.at) this.bytes.set(piece, at);
  }
}

/** The manifest a root document and its pieces make, all at hand. */
export function assembleDocument(root: RootDocument, piece: (digest: string) => Buffer): Buffer {
  const doc = new DocumentAssembly(root, (d) => piece(d).length, Number.MAX_SAFE_INTEGER, (why) => new SealError('SEAL_CORRUPT', why));
  for (const d of root.distinct) doc.put(d, piece(d));
  return doc.bytes;
}
