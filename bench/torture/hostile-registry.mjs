// hostile-registry.mjs: pulls from a registry run by an attacker (a server of this suite on 127.0.0.1): cleartext token realms,
// redirects to another origin, silence, trickled bodies, crafted and oversized documents. Each pull must fail typed within its
// deadlines, leave nothing in the store, and never send credentials anywhere but the registry's own origin.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

import { MUTATIONS, canon, encode, valid } from './documents.mjs';
import { dropTree } from './env.mjs';
import { ready, startDriver, tmpLeftovers } from './races.mjs';
import { count, row } from './table.mjs';

const OCI = 'application/vnd.oci.image.manifest.v1+json';
const USER = 'victim';
const PASSWORD = 'hunter2-not-for-other-hosts';
const BASIC = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
/**
 * Deadlines the pulls run with: small, so a silent or trickling server fails fast, yet past a loaded machine's stalls
 * (400 ms was not; nor was 1500 ms in CI, where this suite's server shares its event loop with the race trials'
 * checks beside the unprivileged suites and the fault run).
 */
const TIMEOUTS = { headersMs: 4000, idleMs: 4000, minBytesPerSecond: 1000 };
const BOUND_MS = 20000;
const sha = (b) => createHash('sha256').update(b).digest('hex');
const EMPTY_BLOB = Buffer.from('{}');

function listen(handler) {
  const server = createServer(handler);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, port: server.address().port })));
}

const PIECE = 'application/vnd.treeseal.entries.v1';

/**
 * The artifact a crafted document makes, as push makes it (a root document naming one piece
 * per entry list) or, `whole`, as the first format did (the document as the config).
 * `tweak(manifest, blobs)` may then change what the server holds.
 */
function artifact(mutate, { whole = false, tweak } = {}) {
  const d = valid('/tmp/repo');
  mutate(d);
  const { digest, text } = encode(d);
  const blobs = new Map([[`sha256:${sha(EMPTY_BLOB)}`, EMPTY_BLOB]]);
  const put = (bytes) => {
    const name = `sha256:${sha(bytes)}`;
    blobs.set(name, bytes);
    return name;
  };
  const pieces = [];
  let config = Buffer.from(text);
  if (!whole) {
    const doc = JSON.parse(text);
    const piece = (entries) => {
      if (entries.length === 0) return [];
      const bytes = Buffer.from(canon(entries).slice(1, -1));
      const name = put(bytes);
      if (!pieces.some((p) => p.digest === name)) pieces.push({ mediaType: PIECE, digest: name, size: bytes.length });
      return [name];
    };
    doc.entries = piece(doc.entries);
    for (const m of doc.mounts) m.entries = piece(m.entries);
    config = Buffer.from(`${canon(doc)}\n`);
  }
  const manifest = {
    schemaVersion: 2,
    mediaType: OCI,
    artifactType: 'application/vnd.treeseal.snapshot.v1',
    config: { mediaType: `application/vnd.treeseal.snapshot.${whole ? 'manifest.v1' : 'root.v2'}+json`, digest: put(config), size: config.length },
    layers: [...pieces, { mediaType: 'application/vnd.oci.empty.v1+json', digest: `sha256:${sha(EMPTY_BLOB)}`, size: EMPTY_BLOB.length }],
    annotations: { 'vnd.treeseal.snapshot': digest, 'vnd.treeseal.threshold': String(1024 * 1024), 'vnd.treeseal.buckets': '1' },
  };
  tweak?.(manifest, blobs);
  return { digest, manifest: Buffer.from(JSON.stringify(manifest)), blobs };
}

/** A registry that serves artifact a: its manifest at any tag, its blobs by digest. */
function serve(a) {
  return (req, res) => {
    const blob = /\/blobs\/(sha256:[0-9a-f]{64})$/.exec(req.url ?? '')?.[1];
    if (req.url?.includes('/manifests/')) return res.writeHead(200, { 'content-type': OCI, 'content-length': a.manifest.length }).end(a.manifest);
    if (blob !== undefined && a.blobs.has(blob)) return res.writeHead(200, { 'content-length': a.blobs.get(blob).length }).end(a.blobs.get(blob));
    res.writeHead(404).end();
  };
}

/** Attacks on a root document's pieces: other bytes for a piece, a piece that claims a gigabyte, a piece the root does not name. */
const PIECE_ATTACKS = [
  ['a piece answered with other bytes', (m, blobs) => blobs.set(m.layers[0].digest, Buffer.from(blobs.get(m.layers[0].digest).toString().replace('"tree/a"', '"tree/b"')))],
  ['a piece that claims two gigabytes', (m) => (m.layers[0].size = 2 ** 31)],
  ['a piece layer the root does not name', (m) => m.layers.unshift({ mediaType: PIECE, digest: `sha256:${sha('stray')}`, size: 5 })],
];

/**
 * The attacks, each: how the registry answers, and the codes a pull may end in. `recorder` is a
 * second origin (another port): whatever reaches it must carry no credentials, and for the cleartext
 * realm nothing may reach it at all.
 */
function modes(recorderPort) {
  const offOrigin = `http://localhost:${recorderPort}`;
  const list = [
    {
      name: 'cleartext token realm on a non-loopback host',
      codes: ['SEAL_REMOTE'],
      nothingOffOrigin: true,
      handle: (req, res) => {
        res.writeHead(401, { 'www-authenticate': `Bearer realm="http://[::ffff:127.0.0.1]:${recorderPort}/token",service="hostile"` }).end();
      },
    },
    {
      name: 'redirect of every request to another origin',
      codes: ['SEAL_REMOTE', 'SEAL_UNAVAILABLE', 'SEAL_CORRUPT'],
      handle: (req, res) => {
        if (req.headers.authorization !== BASIC) return res.writeHead(401, { 'www-authenticate': 'Basic realm="hostile"' }).end();
        res.writeHead(307, { location: `${offOrigin}${req.url}` }).end();
      },
    },
    {
      name: 'a server that accepts and never answers',
      codes: ['SEAL_REMOTE'],
      handle: () => {},
    },
    {
      name: 'a manifest trickled a byte at a time',
      codes: ['SEAL_REMOTE'],
      handle: (req, res) => {
        res.writeHead(200, { 'content-type': OCI, 'content-length': '100000' });
        const timer = setInterval(() => res.write('{'), 300);
        res.on('close', () => clearInterval(timer));
      },
    },
    {
      name: 'a manifest that claims a gigabyte',
      codes: ['SEAL_REMOTE', 'SEAL_CORRUPT'],
      handle: (req, res) => {
        res.writeHead(200, { 'content-type': OCI, 'content-length': String(1 << 30) });
        res.write(Buffer.alloc(64 * 1024, 0x20));
        res.end();
      },
    },
  ];
  for (const [what, mutate] of MUTATIONS) {
    const a = artifact(mutate);
    list.push({ name: `crafted document: ${what}`, codes: ['SEAL_CORRUPT'], digest: a.digest, handle: serve(a) });
  }
  // The first format (the whole document as the config) is still read: the same refusals.
  for (const [what, mutate] of MUTATIONS.slice(0, 3)) {
    const a = artifact(mutate, { whole: true });
    list.push({ name: `crafted document, first format: ${what}`, codes: ['SEAL_CORRUPT'], digest: a.digest, handle: serve(a) });
  }
  for (const [what, tweak] of PIECE_ATTACKS) {
    const a = artifact(() => {}, { tweak });
    list.push({ name: `crafted pieces: ${what}`, codes: ['SEAL_CORRUPT'], digest: a.digest, handle: serve(a) });
  }
  return list;
}

export async function runHostileRegistry(ctx, { trials, fsRoots, log }) {
  const fs = Object.keys(fsRoots)[0];
  const base = join(fsRoots[fs], 'hostile-registry');
  mkdirSync(base, { recursive: true });
  const seen = [];
  const recorder = await listen((req, res) => {
    seen.push({ url: req.url, authorization: req.headers.authorization });
    res.writeHead(404).end();
  });
  let mode;
  const registry = await listen((req, res) => mode.handle(req, res));
  const driver = await ready(startDriver(ctx, true, { cwd: base }));
  const all = modes(recorder.port);
  const r = row('hostile registry', fs, 'async');
  const fn = `async ({ treeseal: t, args: a }) => {
    const store = await t.SnapshotStore.open(a.store);
    try { await store.pull(a.digest, a.remote, { credentials: a.credentials, timeouts: a.timeouts, retries: 1 }); return 'pulled'; }
    finally { await store.close(); }
  }`;
  const rounds = Math.max(all.length, trials);
  for (let i = 0; i < rounds; i++) {
    mode = all[i % all.length];
    seen.length = 0;
    const store = join(base, `store${i}`);
    const digest = mode.digest ?? sha(String(i));
    const bad = [];
    let outcome;
    const started = performance.now();
    try {
      const res = await driver.request({ op: 'run', args: { fn, args: { store, digest, remote: `127.0.0.1:${registry.port}/team/snaps`, credentials: { username: USER, password: PASSWORD }, timeouts: TIMEOUTS } } }, BOUND_MS + 5000);
      const ms = performance.now() - started;
      if (res.ok) bad.push('pulled (accepted)');
      else {
        outcome = res.error.code ?? res.error.name;
        if (!res.error.sealError) bad.push(`untyped ${res.error.name}: ${res.error.message.slice(0, 160)}`);
        else if (!mode.codes.includes(res.error.code)) bad.push(`${res.error.code} (expected ${mode.codes.join('|')}): ${res.error.message.slice(0, 200)}`);
      }
      if (ms > BOUND_MS) bad.push(`took ${Math.round(ms)} ms (bound ${BOUND_MS})`);
      if (res.leaked?.length > 0) bad.push(`fd leaked: ${res.leaked.join(', ')}`);
      const left = tmpLeftovers(store);
      if (left.length > 0) bad.push(`store tmp/ not empty: ${left.join(', ')}`);
    } catch (err) {
      bad.push(`no answer: ${err.message}`);
    }
    if (mode.nothingOffOrigin && seen.length > 0) bad.push(`${seen.length} request(s) reached the cleartext realm`);
    for (const s of seen) if (s.authorization !== undefined) bad.push(`credentials sent off-origin to ${s.url}`);
    count(r, bad, { label: mode.name, refusedCode: outcome });
    dropTree(store);
  }
  await driver.close();
  registry.server.closeAllConnections();
  recorder.server.closeAllConnections();
  registry.server.close();
  recorder.server.close();
  log(`hostile registry: ${rounds} pulls over ${all.length} attacks`);
}
