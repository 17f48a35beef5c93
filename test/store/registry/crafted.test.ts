// crafted.test.ts: an artifact whose every digest was recomputed to match a document capture would refuse is refused by pull, before anything is built; so is a root document whose pieces do not make the snapshot.
import { readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore, canonicalJson } from '../../../dist/index.js';
import { CONFIG_TYPE, EMPTY_BLOB, EMPTY_DIGEST, ENTRIES_TYPE, ROOT_TYPE, chooseLayout, cutPieces, layersOf, layoutWith, manifestOf, sha256Hex } from '../../../dist/internal.js';
import { storeLeftovers, tempDir } from '../../helpers.js';
import { CASES, text, valid, validWithLinks, type Doc } from '../documents.js';
import { checkNoFileFdLeaks, repoName, testRegistry } from './harness.js';

const registry = await testRegistry('plain');
const OCI = 'application/vnd.oci.image.manifest.v1+json';

checkNoFileFdLeaks();

async function putBlob(repo: string, bytes: Buffer): Promise<string> {
  const digest = `sha256:${sha256Hex(bytes)}`;
  const start = await fetch(`http://${registry!.address}/v2/${repo}/blobs/uploads/`, { method: 'POST' });
  expect(start.status).toBe(202);
  const location = new URL(start.headers.get('location')!, `http://${registry!.address}`);
  location.searchParams.set('digest', digest);
  const put = await fetch(location, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: bytes });
  expect(put.status).toBe(201);
  return digest;
}

/** A document's metadata as push sends it (a root document naming pieces), or as the first format did (the whole manifest.json). */
interface Metadata {
  config: Buffer;
  configType: string;
  pieces: Buffer[];
}

/** The metadata push would make of a document's text: its root document and pieces (cutPieces). */
function pieced(docText: string): Metadata {
  const doc = Buffer.from(docText, 'latin1');
  const { root, pieces } = cutPieces(doc);
  return { config: Buffer.from(root, 'latin1'), configType: ROOT_TYPE, pieces: pieces.map((p: { start: number; end: number }) => doc.subarray(p.start, p.end)) };
}

/** Publishes a document as a treeseal artifact (its metadata, the empty layer, the manifest at its usual tag). */
async function publish(d: Doc, metadata: (docText: string) => Metadata = pieced, layoutOf: (data: never) => ReturnType<typeof chooseLayout> = chooseLayout): Promise<{ digest: string; remote: string }> {
  const { digest, text: docText } = text(d);
  const repo = repoName('crafted');
  const m = metadata(docText);
  const configDigest = await putBlob(repo, m.config);
  const pieceLayers = [];
  for (const p of m.pieces) pieceLayers.push({ mediaType: ENTRIES_TYPE, digest: await putBlob(repo, p), size: p.length });
  expect(await putBlob(repo, EMPTY_BLOB)).toBe(EMPTY_DIGEST);
  // Every file is empty: the layout has no packs and no file blobs, only the empty layer.
  const layout = layoutOf({ ...d, digest, entries: d.entries, mounts: d.mounts } as never);
  // A pack's blob is a stand-in (the registry wants each layer it names): the pulls here end before one is fetched.
  const packDigests: string[] = [];
  for (const [i] of layout.packs.entries()) packDigests.push(await putBlob(repo, Buffer.from(`pack ${i}`)));
  const manifest = manifestOf(digest, layout, { mediaType: m.configType, digest: configDigest, size: m.config.length }, [...pieceLayers, ...layersOf(layout, packDigests)]);
  const res = await fetch(`http://${registry!.address}/v2/${repo}/manifests/ts-${digest}`, { method: 'PUT', headers: { 'content-type': OCI }, body: manifest });
  expect(res.status).toBe(201);
  return { digest, remote: `${registry!.address}/${repo}` };
}

/** The whole manifest.json as the config: the first format, which pull still reads. */
const whole = (docText: string): Metadata => ({ config: Buffer.from(docText, 'latin1'), configType: CONFIG_TYPE, pieces: [] });

/** A root document whose lists name the given pieces (each list's pieces given as texts), around the document's own other keys. */
function rootOf(docText: string, lists: string[][]): Metadata {
  const doc = JSON.parse(docText);
  const distinct = [...new Set(lists.flat())];
  const digestOf = (t: string): string => `sha256:${sha256Hex(Buffer.from(t, 'latin1'))}`;
  doc.entries = lists[0]!.map(digestOf);
  doc.mounts.forEach((m: { entries: string[] }, i: number) => (m.entries = lists[i + 1]!.map(digestOf)));
  return { config: Buffer.from(`${canonicalJson(doc)}\n`, 'latin1'), configType: ROOT_TYPE, pieces: distinct.map((t) => Buffer.from(t, 'latin1')) };
}

/** Each entry list of a document's text, as its entries' texts. */
function entryTexts(docText: string): string[][] {
  const doc = JSON.parse(docText);
  return [doc.entries, ...doc.mounts.map((m: { entries: unknown[] }) => m.entries)].map((list: Record<string, unknown>[]) => list.map((e) => canonicalJson(e as never)));
}

async function pullFails(digest: string, remote: string): Promise<[string, string, string[]]> {
  const store = await SnapshotStore.open(join(tempDir(), 'store'));
  const err = await store.pull(digest, remote).then(() => undefined, (e: unknown) => e as SealError);
  expect(err).toBeInstanceOf(SealError);
  const left = storeLeftovers(store.root);
  await store.close();
  return [err!.code, err!.message, left];
}

describe.skipIf(registry === undefined)('pull of a crafted artifact', () => {
  it('the valid template pulls and verifies (so each refusal below is the one change)', async () => {
    const { digest, remote } = await publish(valid());
    const store = await SnapshotStore.open(join(tempDir(), 'store'));
    await store.pull(digest, remote);
    await (await store.get(digest)).verify();
    await store.close();
  });

  it('a layout of a pack larger than a pull holds in memory is SEAL_LIMIT before a pack is fetched, and leaves nothing (one of 3 GiB took a pull to 3.3 GB and failed as a bare RangeError)', async () => {
    const d = valid();
    d.entries = [d.entries[0]!, { ...d.entries[1]!, size: 3 * 1024 * 1024 * 1024, sha256: 'ab'.repeat(32) }];
    // Every content in one pack (its size with the pack's index: 56 bytes more): the threshold above the file, one bucket.
    const { digest, remote } = await publish(d, pieced, ((data: never) => layoutWith(data, 2 ** 33, 1)) as never);
    const [code, message, left] = await pullFails(digest, remote);
    expect([code, left]).toEqual(['SEAL_LIMIT', []]);
    expect(message).toMatch(/^registry .* lays out a pack of 3221225528 bytes \(sha256:[0-9a-f]{64}\): more than a pull holds in memory \(2147483647 bytes\), which no push makes$/);
  });

  it('a root document whose exclude patterns hold twelve ** pulls and verifies, its entries matched against them at once (they took 52 s of CPU for 36 entries, on every load, when the matcher backtracked)', async () => {
    const d = valid();
    d.exclude = [`x/${'**/a/'.repeat(12)}b`, `**/${'*a'.repeat(12)}*/**/*b*`];
    const { digest, remote } = await publish(d);
    const store = await SnapshotStore.open(join(tempDir(), 'store'));
    await store.pull(digest, remote);
    const snap = await store.get(digest);
    expect(snap.exclude).toEqual(d.exclude);
    await snap.verify();
    await store.close();
    // More ? and [...] in all than a capture takes (each is tried at every place of a name): refused before a piece is fetched.
    const many = valid();
    many.exclude = [`q${'?'.repeat(600)}`, `q${'[ab]'.repeat(600)}`];
    const crafted = await publish(many);
    const [code, message, left] = await pullFails(crafted.digest, crafted.remote);
    expect([code, left]).toEqual(['SEAL_CORRUPT', []]);
    expect(message).toMatch(/ does not hold a valid snapshot root document: exclude holds 1200 \? and \[\.\.\.\] wildcards in all, more than treeseal matches \(1024\): each is tried at every place of a name$/);
  });

  it('a template with contained copy-root links pulls and verifies, its links made', async () => {
    const { digest, remote } = await publish(validWithLinks());
    const store = await SnapshotStore.open(join(tempDir(), 'store'));
    await store.pull(digest, remote);
    const snap = await store.get(digest);
    await snap.verify();
    expect(readlinkSync(join(snap.root, 'copy/src/m'))).toBe('../node_modules/i.js');
    await store.close();
  });

  it("a later treeseal's manifest (a newer schema) is SEAL_UNAVAILABLE saying so, not corrupt; one whose version alone was altered is SEAL_CORRUPT; neither leaves anything", async () => {
    const later = (t: string): Metadata => {
      const doc = JSON.parse(t) as Record<string, unknown>;
      return whole(JSON.stringify({ ...doc, schema_version: 4, entries: undefined, files: doc.entries }));
    };
    let { digest, remote } = await publish(valid(), later);
    expect(await pullFails(digest, remote)).toEqual([
      'SEAL_UNAVAILABLE',
      `${remote}:ts-${digest} holds a snapshot manifest this treeseal cannot read: snapshot manifest is schema 4, newer than this treeseal reads (3): a later treeseal made it; upgrade treeseal to use it`,
      [],
    ]);
    ({ digest, remote } = await publish(valid(), (t) => whole(JSON.stringify({ ...JSON.parse(t), schema_version: 7 }))));
    expect(await pullFails(digest, remote)).toEqual(['SEAL_CORRUPT', `${remote}:ts-${digest} does not hold a valid snapshot manifest: snapshot manifest is corrupt: schema_version altered: 7 in a schema-3 manifest`, []]);
  });

  // Every case is checked on load by document-check.test.ts, through the one check pull runs too; a third of them
  // (every third, so each kind of rule is among them) go through a real registry here, which costs a publish and a pull each;
  // so does the empty file's hash, which only this check proves (a pull makes an empty file without a byte to hash).
  it.each(CASES.filter(([name], i) => i % 3 === 0 || name.startsWith('an empty file whose hash')))('is SEAL_CORRUPT and leaves nothing: %s', async (_name, mutate, why) => {
    const d = valid();
    mutate(d);
    // The cut needs each entry's path: a case without one goes as the first format did.
    const { digest, remote } = await publish(d, (t) => (/"path":/.test(t) && !why.includes('malformed') ? pieced(t) : whole(t)));
    expect(await pullFails(digest, remote)).toEqual(['SEAL_CORRUPT', `${remote}:ts-${digest} does not hold a valid snapshot manifest: snapshot manifest is corrupt: ${why}`, []]);
  });
});

describe.skipIf(registry === undefined)('pull of a crafted root document', () => {
  it('the first format (the whole manifest.json as the config) still pulls and verifies; a push over it writes the root document', async () => {
    const { digest, remote } = await publish(valid(), whole);
    const store = await SnapshotStore.open(join(tempDir(), 'store'));
    expect(await store.pull(digest, remote)).toMatchObject({ existed: false, downloaded: 1 });
    await (await store.get(digest)).verify();
    // ts-<digest> names the first format's config, not this push's root: pushed again, in pieces.
    expect(await store.push(digest, remote)).toMatchObject({ existed: false, blobs: 4, uploaded: 3, skipped: 1 });
    const repo = remote.slice(remote.indexOf('/') + 1);
    const manifest = await (await fetch(`http://${registry!.address}/v2/${repo}/manifests/ts-${digest}`, { headers: { accept: OCI } })).json();
    expect([manifest.config.mediaType, manifest.layers.map((l: { mediaType: string }) => l.mediaType)]).toEqual([ROOT_TYPE, [ENTRIES_TYPE, ENTRIES_TYPE, 'application/vnd.oci.empty.v1+json']]);
    expect(await store.push(digest, remote)).toMatchObject({ existed: true, uploaded: 0 });
    await store.close();
  });

  it('pieces cut elsewhere than push cuts them (one entry each) pull and verify: the proof is of the document they make', async () => {
    const { digest, remote } = await publish(valid(), (t) => rootOf(t, entryTexts(t)));
    const store = await SnapshotStore.open(join(tempDir(), 'store'));
    expect(await store.pull(digest, remote)).toMatchObject({ existed: false, downloaded: 5 });
    await (await store.get(digest)).verify();
    await store.close();
  });

  it('is SEAL_CORRUPT and leaves nothing when its pieces do not make the snapshot, or are not the layers it names', async () => {
    const where = (remote: string, digest: string): string => `${remote}:ts-${digest}`;
    // A piece left out of the list that names it.
    let { digest, remote } = await publish(valid(), (t) => rootOf(t, entryTexts(t).map((l, i) => (i === 0 ? l.slice(1) : l))));
    let got = await pullFails(digest, remote);
    expect(got).toEqual(['SEAL_CORRUPT', `${where(remote, digest)} does not hold a valid snapshot manifest: snapshot manifest is corrupt: digest does not match its entries (${digest})`, []]);
    // Two pieces swapped between the lists.
    ({ digest, remote } = await publish(valid(), (t) => {
      const [copy, mount] = entryTexts(t);
      return rootOf(t, [mount!, copy!]);
    }));
    got = await pullFails(digest, remote);
    expect([got[0], got[2]]).toEqual(['SEAL_CORRUPT', []]);
    // A piece that closes its list and opens a key of its own: the entries (and so the digest) are the snapshot's, but the document is not canonical.
    ({ digest, remote } = await publish(valid(), (t) => {
      const lists = entryTexts(t);
      lists[0]![1] = `${lists[0]![1]!}],"zzz":[${lists[0]![1]!}`;
      return rootOf(t, lists);
    }));
    expect(await pullFails(digest, remote)).toEqual(['SEAL_CORRUPT', `${where(remote, digest)} holds a snapshot manifest that is not in canonical form`, []]);
    // A manifest_digest (or mount digest) that is not the lists' own: the snapshot digest does not cover
    // these claims, but the document is not the one capture wrote, and a copy of it would differ.
    for (const key of ['manifest_digest', 'mount_content_digest', 'mount_manifest_digest']) {
      ({ digest, remote } = await publish(valid(), (t) => {
        const m = pieced(t);
        const config = Buffer.from(m.config);
        const at = config.indexOf(`"${key}":"`) + key.length + 4;
        config[at] = config[at] === 0x30 ? 0x31 : 0x30;
        return { ...m, config };
      }));
      expect(await pullFails(digest, remote)).toEqual(['SEAL_CORRUPT', `${where(remote, digest)} holds a snapshot manifest that is not in canonical form`, []]);
    }
    // One 700 KB piece named 1,600 times: its layers are small, the manifest they make would be over 1 GiB.
    // Refused before any piece is fetched (a list's pieces hold distinct entries, so never the same bytes), and the fetch log keeps nothing of it.
    ({ digest, remote } = await publish(valid(), (t) => rootOf(t, [Array.from({ length: 1600 }, () => 'x'.repeat(700_000)), ...entryTexts(t).slice(1)])));
    got = await pullFails(digest, remote);
    expect([got[0], got[2]]).toEqual(['SEAL_CORRUPT', []]);
    expect(got[1]).toBe(`${where(remote, digest)} has a root document whose list 0 names a piece twice`);
    // The manifest's piece layers are not the ones the root names (one more).
    ({ digest, remote } = await publish(valid(), (t) => {
      const m = pieced(t);
      return { ...m, pieces: [...m.pieces, Buffer.from('{"extra":1}')] };
    }));
    expect(await pullFails(digest, remote)).toEqual([
      'SEAL_CORRUPT',
      `${where(remote, digest)} does not match its root document: its first layers are not the 2 pieces the root names`,
      [],
    ]);
    // A root list that is not a list of digests.
    ({ digest, remote } = await publish(valid(), (t) => {
      const m = pieced(t);
      return { ...m, config: Buffer.from(m.config.toString('latin1').replace('"entries":["sha256:', '"entries":["sha512:'), 'latin1') };
    }));
    expect(await pullFails(digest, remote)).toEqual([
      'SEAL_CORRUPT',
      `${where(remote, digest)} does not hold a valid snapshot root document: a list of pieces holds other than sha256 digests`,
      [],
    ]);
  });
});
