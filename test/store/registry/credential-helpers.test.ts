// credential-helpers.test.ts: docker credential helpers (credsStore, credHelpers) run as docker runs them, with fake
// docker-credential-* executables on PATH, and identity tokens (from a helper or auths[host].identitytoken) used as OAuth2
// refresh tokens at the token realm.
import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { mkfifo, storeLeftovers, tempDir } from '../../helpers.js';
import { captured } from './fixtures.js';
import { checkNoFileFdLeaks, expireTokensAtFirstBlob, fails, repoName, testRegistry, tokenProxy } from './harness.js';

const basic = await testRegistry('basic');
const plain = await testRegistry('plain');
const CLI = fileURLToPath(new URL('../../../dist/cli.js', import.meta.url));

checkNoFileFdLeaks();

const VARS = ['PATH', 'DOCKER_CONFIG', 'TREESEAL_REGISTRY_USER', 'TREESEAL_REGISTRY_PASSWORD'];
const saved = Object.fromEntries(VARS.map((k) => [k, process.env[k]]));
delete process.env.TREESEAL_REGISTRY_USER;
delete process.env.TREESEAL_REGISTRY_PASSWORD;
afterEach(() => {
  for (const k of VARS) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
  delete process.env.TREESEAL_REGISTRY_USER;
  delete process.env.TREESEAL_REGISTRY_PASSWORD;
});

interface Helpers {
  /** The docker config file. */
  config: string;
  /** Each helper run: its arguments and what it read on stdin. */
  calls: () => string[];
  /** Writes $DOCKER_CONFIG/config.json. */
  configure: (config: object) => void;
}

/**
 * A temp dir on PATH with docker-credential-<name> for each of `answers` (a server URL to
 * the JSON it prints; any other URL gets the not-found message and exit 1), plus `broken`
 * (complains on stderr, exit 3); and a DOCKER_CONFIG of its own.
 */
function helpers(answers: Record<string, Record<string, { Username: string; Secret: string }>>): Helpers {
  const dir = tempDir();
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  mkdirSync(join(dir, 'docker'));
  const log = join(dir, 'calls.log');
  writeFileSync(log, '');
  const write = (name: string, body: string): void => {
    writeFileSync(join(bin, `docker-credential-${name}`), `#!/bin/sh\nserver=$(cat)\nprintf '%s %s %s\\n' "${name}" "$*" "$server" >> '${log}'\n${body}\n`);
    chmodSync(join(bin, `docker-credential-${name}`), 0o755);
  };
  for (const [name, byServer] of Object.entries(answers)) {
    const cases = Object.entries(byServer).map(([server, out]) => `  '${server}') printf '%s' '${JSON.stringify({ ServerURL: server, ...out })}' ;;`);
    write(name, `case "$server" in\n${cases.join('\n')}\n  *) echo 'credentials not found in native keychain'; exit 1 ;;\nesac`);
  }
  write('broken', "echo 'the keyring is locked' >&2\nexit 3");
  // Its answer (the secret in it) printed, then a failure, with nothing on stderr; and an answer past the size a helper may print.
  write('leaky', `printf '%s\\n' '${JSON.stringify({ ServerURL: 'any', Username: 'ciuser', Secret: 'leaked-secret' })}'\nexit 3`);
  write('huge', `printf '%s\\n' '${JSON.stringify({ ServerURL: 'any', Username: 'ciuser', Secret: 'leaked-secret' })}'\nhead -c 2000000 /dev/zero | tr '\\0' x`);
  process.env.PATH = `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`;
  process.env.DOCKER_CONFIG = join(dir, 'docker');
  const config = join(dir, 'docker', 'config.json');
  return {
    config,
    calls: () => readFileSync(log, 'utf8').split('\n').filter((l) => l !== ''),
    configure: (c) => writeFileSync(config, JSON.stringify(c)),
  };
}

describe.skipIf(basic === undefined || plain === undefined)('docker credential helpers', () => {
  it('credsStore: the helper is run once per push or pull (`get`, the host on stdin), only when the registry asks for credentials', async () => {
    const host = basic!.address;
    const h = helpers({ desktop: { [host]: { Username: basic!.user!, Secret: basic!.password! } } });
    h.configure({ credsStore: 'desktop', auths: { [host]: { auth: Buffer.from('ignored:when-a-helper-answers').toString('base64') } } });
    const { work, store: a, snap } = await captured();
    const remote = `${host}/${repoName('creds-store')}`;
    const pushed = await a.push(snap.digest, remote, { concurrency: 4 });
    expect(pushed).toMatchObject({ uploaded: pushed.blobs });
    expect(h.calls()).toEqual([`desktop get ${host}`]);
    const b = await SnapshotStore.open(join(work, 'b'));
    expect(await b.pull(snap.digest, remote)).toMatchObject({ downloaded: pushed.blobs });
    expect(h.calls()).toEqual([`desktop get ${host}`, `desktop get ${host}`]);
    // From the command line too.
    const cli = await new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, [CLI, '--store', join(work, 'c'), 'pull', snap.digest, remote, '--json'], { encoding: 'utf8' }, (err, stdout, stderr) =>
        resolve({ status: err === null ? 0 : Number((err as { code?: number }).code), stdout, stderr }),
      );
    });
    expect([cli.status, cli.stderr]).toEqual([0, '']);
    expect(h.calls()).toHaveLength(3);
    // A registry that never asks for credentials never runs the helper, even a broken one.
    h.configure({ credsStore: 'broken' });
    await a.push(snap.digest, `${plain!.address}/${repoName('anonymous')}`);
    expect(h.calls()).toHaveLength(3);
    // Given credentials and the environment's come first: no helper runs.
    process.env.TREESEAL_REGISTRY_USER = basic!.user!;
    process.env.TREESEAL_REGISTRY_PASSWORD = basic!.password!;
    const c = await SnapshotStore.open(join(work, 'd'));
    await c.pull(snap.digest, remote);
    expect(h.calls()).toHaveLength(3);
    for (const s of [a, b, c]) await s.close();
  });

  it('credHelpers[host] wins over credsStore for its host only (keys as docker writes them)', async () => {
    const host = basic!.address;
    const right = { Username: basic!.user!, Secret: basic!.password! };
    const h = helpers({ ecr: { [host]: right }, store: { [host]: { Username: basic!.user!, Secret: 'stale' } } });
    const { store: a, snap } = await captured();
    const remote = `${host}/${repoName('cred-helpers')}`;
    h.configure({ credsStore: 'store', credHelpers: { [`https://${host}`]: 'ecr' } });
    await a.push(snap.digest, remote);
    expect(h.calls()).toEqual([`ecr get ${host}`]);
    h.configure({ credsStore: 'store', credHelpers: { 'other.example.com': 'ecr' } });
    const err = await fails(a.push(snap.digest, `${host}/${repoName('cred-helpers-other')}`));
    expect(err.message).toMatch(new RegExp(`^registry ${host} refused GET /v2/.+: HTTP 401 UNAUTHORIZED`));
    expect(h.calls()).toEqual([`ecr get ${host}`, `store get ${host}`]);
    await a.close();
  });

  it('a helper that holds nothing, fails, is missing or is no name: SEAL_REMOTE naming it; nothing left', async () => {
    const host = basic!.address;
    const h = helpers({ empty: {} });
    const { work, store: a, snap } = await captured();
    const remote = `${host}/${repoName('helper-fails')}`;
    h.configure({ credsStore: 'empty' });
    let err = await fails(a.push(snap.digest, remote));
    expect([err.code, err.message]).toEqual([
      'SEAL_REMOTE',
      `registry ${host} requires authentication (HTTP 401 UNAUTHORIZED) (credential helper docker-credential-empty holds none for ${host}); give credentials through options, TREESEAL_REGISTRY_USER / TREESEAL_REGISTRY_PASSWORD or ~/.docker/config.json`,
    ]);
    h.configure({ credsStore: 'broken' });
    err = await fails(a.push(snap.digest, remote));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `credential helper docker-credential-broken (credsStore in ${h.config}) failed for ${host}: the keyring is locked`]);
    // Never its stdout, which holds the secret of an answer: the status, or the size it passed.
    h.configure({ credsStore: 'leaky' });
    err = await fails(a.push(snap.digest, remote));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `credential helper docker-credential-leaky (credsStore in ${h.config}) failed for ${host}: exit status 3 (nothing on stderr)`]);
    h.configure({ credsStore: 'huge' });
    err = await fails(a.push(snap.digest, remote));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `credential helper docker-credential-huge (credsStore in ${h.config}) answered more than 1048576 bytes for ${host}`]);
    h.configure({ credHelpers: { [host]: 'missing' } });
    const b = await SnapshotStore.open(join(work, 'b'));
    err = await fails(b.pull(snap.digest, remote));
    // Unprivileged, a directory on root's PATH this user cannot search makes execvp say EACCES instead of ENOENT.
    expect(err.code).toBe('SEAL_REMOTE');
    expect(err.message).toMatch(new RegExp(`^credential helper docker-credential-missing \\(credHelpers in ${h.config.replace(/[.]/g, '\\.')}\\) is not on PATH(, or cannot be run \\(EACCES\\))?$`));
    expect(storeLeftovers(b.root)).toEqual([]);
    h.configure({ credsStore: '../../bin/sh' });
    err = await fails(b.pull(snap.digest, remote));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `docker config credsStore names no usable credential helper ("../../bin/sh"): ${h.config}`]);
    // A FIFO as the config: said at once (it waited for a writer for ever, whatever --timeout said).
    rmSync(h.config);
    mkfifo(h.config);
    err = await fails(b.pull(snap.digest, remote));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `docker config is not a regular file: ${h.config}`]);
    // Bounded at 16 MiB: one byte more is refused, not read.
    rmSync(h.config);
    writeFileSync(h.config, '');
    truncateSync(h.config, 16 * 1024 * 1024 + 1);
    err = await fails(b.pull(snap.digest, remote));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `docker config is larger than 16777216 bytes: ${h.config}`]);
    await a.close();
    await b.close();
  });
});

describe.skipIf(plain === undefined || basic === undefined)('identity tokens', () => {
  it('from a helper (Username <token>) or auths[host].identitytoken: POSTed to the realm as a refresh_token grant; a token handed back is used next', async () => {
    const proxy = await tokenProxy(plain!.address, { refreshToken: 'refresh-A' });
    const host = proxy.address;
    const h = helpers({ idp: { [host]: { Username: '<token>', Secret: 'refresh-A' } } });
    h.configure({ credsStore: 'idp' });
    const { work, store: a, snap } = await captured();
    const repo = repoName('identity');
    const remote = `${host}/${repo}`;
    await a.push(snap.digest, remote);
    expect(proxy.grants).toHaveLength(1);
    const [first] = proxy.grants;
    expect(first).toMatchObject({ contentType: 'application/x-www-form-urlencoded', authorization: undefined });
    expect(first!.form).toEqual({ grant_type: 'refresh_token', refresh_token: 'refresh-A', client_id: 'treeseal', service: 'treeseal-test', scope: `repository:${repo}:pull,push repository:${repo}:pull` });

    // The docker config's identitytoken; the tokens expire mid-pull: the next grant uses the refresh token the realm handed back.
    h.configure({ auths: { [`https://${host}`]: { identitytoken: 'refresh-A' } } });
    expireTokensAtFirstBlob(proxy);
    const b = await SnapshotStore.open(join(work, 'b'));
    await b.pull(snap.digest, remote, { concurrency: 1 });
    expect(proxy.grants.map((g) => g.form.refresh_token)).toEqual(['refresh-A', 'refresh-A', 'rotated-2']);
    expect(b.get(snap.digest).toJSON()).toEqual(snap.toJSON());

    h.configure({ auths: { [host]: { identitytoken: 'revoked' } } });
    const c = await SnapshotStore.open(join(work, 'c'));
    const err = await fails(c.pull(snap.digest, remote));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `token server ${host} refused the identity token for ${host}: HTTP 401`]);
    expect(storeLeftovers(c.root)).toEqual([]);

    // A registry that wants Basic cannot take an identity token.
    h.configure({ auths: { [basic!.address]: { identitytoken: 'refresh-A' } } });
    const basicErr = await fails(a.push(snap.digest, `${basic!.address}/${repoName('identity-basic')}`));
    expect([basicErr.code, basicErr.message]).toEqual([
      'SEAL_REMOTE',
      `registry ${basic!.address} asks for Basic authentication, and its credentials are an identity token (a token realm's refresh token)`,
    ]);
    for (const s of [a, b, c]) await s.close();
  });
});
