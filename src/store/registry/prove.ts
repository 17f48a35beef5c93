// prove.ts: what a pulled config must be (the requested snapshot, canonical, well formed) and the layers it implies; a sync core for the worker.
import { SealError } from '../../base/errors.js';
import { asBuffer } from '../../base/transfer.js';
import { documentText, type StoredSnapshot } from '../document.js';
import { readDocumentBytes } from '../document-parse.js';
import { readDocumentStream } from '../document-stream.js';
import { DocumentFile } from './pull-document.js';
import { expectLayers, type Artifact, type PackLayer } from './artifact.js';
import { layoutWith, type Layout } from './mapping.js';

export interface Fetched {
  digest: string;
  /** `remote:tag`, for messages. */
  where: string;
  /** The snapshot manifest: the config blob, or the document its root and pieces make (each blob's size and sha256 already proven), in memory or in its file. */
  config: Uint8Array | DocumentFile;
  artifact: Artifact;
  /** The local source path to publish the snapshot for (options.source), when it is not the one captured. */
  source?: string | undefined;
  /** options.reuseLocal false: every content downloaded, none taken from the store's snapshots. */
  noReuse?: boolean;
}

/** A Fetched as it crosses to the worker: its manifest is there already, as document `document` (pull-document.ts). */
export interface FetchedRef extends Omit<Fetched, 'config'> {
  document: number;
}

/**
 * Proves that the config is the snapshot asked for: its digest recomputed from its own
 * entries equals `digest` (a moved tag is refused), it is in canonical form, its entries
 * are well formed (decodeDocument checks the whole document), and the manifest's layers are exactly the ones it implies.
 */
export function proveSnapshot(f: Fetched): { data: StoredSnapshot; layout: Layout; packLayers: PackLayer[] } {
  let read: { data: StoredSnapshot; canonical: boolean };
  let bytes: Buffer | undefined;
  // A document in its file is read through a window, never whole: in memory only to say what is wrong with one that is not canonical.
  const streamed = f.config instanceof DocumentFile ? readDocumentStream(f.config.readAt, f.config.size, undefined) : undefined;
  try {
    if (streamed !== undefined) read = { data: streamed.data, canonical: true };
    else {
      bytes = f.config instanceof DocumentFile ? f.config.whole() : asBuffer(f.config);
      read = readDocumentBytes(bytes);
    }
  } catch (err) {
    const path = err instanceof SealError ? err.path : undefined;
    // A later treeseal's manifest (a newer schema) is not a damaged one: said as the store says it, nothing published.
    const later = err instanceof SealError && err.code === 'SEAL_UNAVAILABLE';
    const what = later ? 'holds a snapshot manifest this treeseal cannot read' : 'does not hold a valid snapshot manifest';
    throw new SealError(later ? 'SEAL_UNAVAILABLE' : 'SEAL_CORRUPT', `${f.where} ${what}: ${(err as Error).message}`, path === undefined ? { cause: err } : { cause: err, path });
  }
  const { data } = read;
  if (data.digest !== f.digest) {
    throw new SealError('SEAL_CORRUPT', `${f.where} holds snapshot ${data.digest}, not ${f.digest} (the tag was moved or the registry lies)`);
  }
  if (!read.canonical && documentText(data) !== bytes!.toString('latin1')) throw new SealError('SEAL_CORRUPT', `${f.where} holds a snapshot manifest that is not in canonical form`);
  const layout = layoutWith(data, f.artifact.threshold, f.artifact.buckets);
  return { data, layout, packLayers: expectLayers(f.artifact, layout, f.where) };
}
