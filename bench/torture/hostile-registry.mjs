// hostile-registry.mjs: pulls from a registry run by an attacker (a server of this suite on 127.0.0.1): cleartext token realms,
// redirects to another origin, silence, trickled bodies, crafted and oversized documents. Each pull must fail typed within its
// deadlines, leave nothing in the store, and never send credentials anywhere but the registry's own origin.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

import { MUTATIONS, encode, valid } from './documents.mjs';
import { dropTree } from './env.mjs';
import { ready, startDriver, tmpLeftovers } from './races.mjs';
import { count, row } from './table.mjs';

const OCI = 'application/vnd.oci.image.manifest.v1+json';
const USER = 'victim';
const PASSWORD = 'hunter2-not-for-other-hosts';
const BASIC = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
/** Deadlines the pulls run with: small, so a silent or trickling server fails fast, yet past a loaded machine's stalls (400 ms was not). */
const TIMEOUTS = { headersMs: 1500, idleMs: 1500, minBytesPerSecond: 1000 };
const BOUND_MS = 15000;
const sha = (b) => createHash('sha256').update(b).digest('hex');
const EMPTY_BLOB = Buffer.from('{}');

function listen(handler) {
  const server = createServer(handler);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, port: server.address().port })));
}

/** The artifact a crafted document makes: config, the empty layer, a manifest naming both. */
function artifact(mutate) {
  const d = valid('/tmp/repo');
  mutate(d);
  const { digest, text } = encode(d);
  const config = Buffer.from(text);
  const blobs = new Map([[`sha256:${sha(config)}`, config], [`sha256:${sha(EMPTY_BLOB)}`, EMPTY_BLOB]]);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI,
      artifactType: 'application/vnd.treeseal.snapshot.v1',
      config: { mediaType: 'application/vnd.treeseal.snapshot.manifest.v1+json', digest: `sha256:${sha(config)}`, size: config.length },
      layers: [{ mediaType: 'application/vnd.oci.empty.v1+json', digest: `sha256:${sha(EMPTY_BLOB)}`, size: EMPTY_BLOB.length }],
      annotations: { 'vnd.treeseal.snapshot': digest, 'vnd.treeseal.threshold': String(1024 * 1024), 'vnd.treeseal.buckets': '1' },
    }),
  );
  return { digest, manifest, blobs };
}

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
    list.push({
      name: `crafted document: ${what}`,
      codes: ['SEAL_CORRUPT'],
      digest: a.digest,
      handle: (req, res) => {
        const blob = /\/blobs\/(sha256:[0-9a-f]{64})$/.exec(req.url ?? '')?.[1];
        if (req.url?.includes('/manifests/')) return res.writeHead(200, { 'content-type': OCI, 'content-length': a.manifest.length }).end(a.manifest);
        if (blob !== undefined && a.blobs.has(blob)) return res.writeHead(200, { 'content-length': a.blobs.get(blob).length }).end(a.blobs.get(blob));
        res.writeHead(404).end();
      },
    });
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
