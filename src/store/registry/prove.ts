// prove.ts: what a pulled config must be (the requested snapshot, canonical, well formed) and the layers it implies; a sync core for the worker.
import { SealError } from '../../base/errors.js';
import { decodeDocument, documentText, type StoredSnapshot } from '../document.js';
import { expectLayers, type Artifact, type PackLayer } from './artifact.js';
import { chooseLayout, layoutWith, type Layout } from './mapping.js';

export interface Fetched {
  digest: string;
  /** `remote:tag`, for messages. */
  where: string;
  /** The config blob (its size and sha256 already proven against the descriptor). */
  config: string;
  artifact: Artifact;
  /** The local source path to publish the snapshot for (options.source), when it is not the one captured. */
  source?: string | undefined;
}

/**
 * Proves that the config is the snapshot asked for: its digest recomputed from its own
 * entries equals `digest` (a moved tag is refused), it is in canonical form, its entries
 * are well formed (decodeDocument checks the whole document), and the manifest's layers are exactly the ones it implies.
 */
export function proveSnapshot(f: Fetched): { data: StoredSnapshot; layout: Layout; packLayers: PackLayer[] } {
  let data: StoredSnapshot;
  try {
    data = decodeDocument(f.config);
  } catch (err) {
    const path = err instanceof SealError ? err.path : undefined;
    throw new SealError('SEAL_CORRUPT', `${f.where} does not hold a valid snapshot manifest: ${(err as Error).message}`, path === undefined ? { cause: err } : { cause: err, path });
  }
  if (data.digest !== f.digest) {
    throw new SealError('SEAL_CORRUPT', `${f.where} holds snapshot ${data.digest}, not ${f.digest} (the tag was moved or the registry lies)`);
  }
  if (documentText(data) !== f.config) throw new SealError('SEAL_CORRUPT', `${f.where} holds a snapshot manifest that is not in canonical form`);
  const layout = layoutWith(data, f.artifact.threshold, f.artifact.buckets);
  return { data, layout, packLayers: expectLayers(f.artifact, layout, f.where) };
}

/** The layout push uses for the snapshot whose manifest.json is `config` (proven to hash to `digest`). */
export function planPush(config: string, digest: string): Layout {
  return chooseLayout(decodeDocument(config, digest));
}
