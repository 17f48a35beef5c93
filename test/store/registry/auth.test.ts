// auth.test.ts: credentials (options, environment, docker config), Basic against htpasswd, the Bearer token flow, and transport rules.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import { SealError, SnapshotStore } from '../../../dist/index.js';
import { findCredentials, parseChallenge, parseRemote } from '../../../dist/internal.js';
import { storeLeftovers, tempDir } from '../../helpers.js';
import { captured } from './fixtures.js';
import { checkNoFileFdLeaks, expireTokensAtFirstBlob, fails, repoName, testRegistry, tokenProxy } from './harness.js';

const basic = await testRegistry('basic');
const plain = await testRegistry('plain');

checkNoFileFdLeaks();

const saved = { ...process.env };
afterEach(() => {
  for (const key of ['TREESEAL_REGISTRY_USER', 'TREESEAL_REGISTRY_PASSWORD', 'DOCKER_CONFIG']) {
    if (saved[key] === undefined) delete process.env[key];
    else process.env[key] = saved[key];
  }
});

describe.skipIf(basic === undefined)('basic auth (htpasswd)', () => {
  it('takes credentials from options, the environment and ~/.docker/config.json; refuses none and wrong ones', async () => {
    const { work, store: a, snap } = await captured();
    const remote = `${basic!.address}/${repoName('basic')}`;
    const credentials = { username: basic!.user!, password: basic!.password! };
    delete process.env.TREESEAL_REGISTRY_USER;
    process.env.DOCKER_CONFIG = join(work, 'no-docker-config');
    let err = await fails(a.push(snap.digest, remote));
    expect([err.code, err.message]).toEqual([
      'SEAL_REMOTE',
      `registry ${basic!.address} requires authentication (HTTP 401 UNAUTHORIZED); give credentials through options, TREESEAL_REGISTRY_USER / TREESEAL_REGISTRY_PASSWORD or ~/.docker/config.json`,
    ]);
    err = await fails(a.push(snap.digest, remote, { credentials: { ...credentials, password: 'wrong' } }));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `registry ${basic!.address} refused GET /v2/${remote.slice(remote.indexOf('/') + 1)}/manifests/ts-${snap.digest}: HTTP 401 UNAUTHORIZED (authentication required): the registry rejected the credentials sent (user ${JSON.stringify(credentials.username)})`]);
    expect(err.message).not.toContain('wrong');
    expect(await a.push(snap.digest, remote, { credentials })).toMatchObject({ uploaded: 5 });

    process.env.TREESEAL_REGISTRY_USER = credentials.username;
    process.env.TREESEAL_REGISTRY_PASSWORD = credentials.password;
    const b = await SnapshotStore.open(join(work, 'b'));
    expect(await b.pull(snap.digest, remote)).toMatchObject({ downloaded: 5 });

    delete process.env.TREESEAL_REGISTRY_USER;
    mkdirSync(join(work, 'docker'));
    const auth = Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64');
    writeFileSync(join(work, 'docker/config.json'), JSON.stringify({ auths: { [`http://${basic!.address}/v1/`]: { auth } } }));
    process.env.DOCKER_CONFIG = join(work, 'docker');
    const c = await SnapshotStore.open(join(work, 'c'));
    expect(await c.pull(snap.digest, remote)).toMatchObject({ downloaded: 5 });
    expect(c.get(snap.digest).toJSON()).toEqual(snap.toJSON());
    for (const s of [a, b, c]) await s.close();
  });
});

describe.skipIf(plain === undefined)('bearer token flow', () => {
  it('gets a token from the realm with the credentials, and a new one when the registry refuses an expired token', async () => {
    const credentials = { username: 'robot', password: 'tok-pw' };
    const proxy = await tokenProxy(plain!.address, { user: credentials.username, password: credentials.password });
    const { work, store: a, snap } = await captured();
    const remote = `${proxy.address}/${repoName('bearer')}`;
    await a.push(snap.digest, remote, { credentials });
    expect(proxy.tokensIssued).toBe(1);
    // The tokens expire while the pull is under way: the next request is refused and fetches a new one.
    expireTokensAtFirstBlob(proxy);
    const b = await SnapshotStore.open(join(work, 'b'));
    expect(await b.pull(snap.digest, remote, { credentials, concurrency: 1 })).toMatchObject({ downloaded: 5 });
    expect(proxy.tokensIssued).toBe(3);
    const c = await SnapshotStore.open(join(work, 'c'));
    const err = await fails(c.pull(snap.digest, remote, { credentials: { ...credentials, password: 'nope' } }));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `token server ${proxy.address} refused the credentials for ${proxy.address}: HTTP 401`]);
    expect(storeLeftovers(c.root)).toEqual([]);
    for (const s of [a, b, c]) await s.close();
  });
});

describe('transport and parsing', () => {
  it('speaks HTTPS unless the registry is on a loopback address or insecure is asked for', () => {
    expect(parseRemote('registry.example.com/team/snaps').origin).toBe('https://registry.example.com');
    expect(parseRemote('Registry.Example.com:5000/team/snaps').host).toBe('registry.example.com:5000');
    expect(parseRemote('127.0.0.1:5000/x').origin).toBe('http://127.0.0.1:5000');
    expect(parseRemote('localhost:5000/x').origin).toBe('http://localhost:5000');
    expect(parseRemote('[::1]:5000/x').origin).toBe('http://[::1]:5000');
    expect(parseRemote('https://127.0.0.1:5000/x').origin).toBe('https://127.0.0.1:5000');
    expect(parseRemote('registry.lan:5000/x', true).origin).toBe('http://registry.lan:5000');
    const err = (() => {
      try {
        parseRemote('http://registry.lan/x');
      } catch (e) {
        return e as SealError;
      }
      return undefined;
    })();
    expect([err?.code, err?.message]).toEqual(['SEAL_REMOTE', 'plain HTTP to registry.lan needs --insecure (only loopback registries are spoken to without TLS)']);
    for (const bad of ['noslash', '/x', 'host/UPPER', 'host/a//b', 'host/-a', 'ho st/x']) {
      expect(() => parseRemote(bad)).toThrow(SealError);
    }
    // A port out of range: typed here (it was Node's ERR_INVALID_URL from the first request).
    for (const port of ['0', '65536', '99999']) {
      expect(() => parseRemote(`127.0.0.1:${port}/ci/snaps`)).toThrow(`not a registry repository (port must be 1 to 65535): 127.0.0.1:${port}/ci/snaps`);
    }
    expect(parseRemote('h:65535/x').origin).toBe('https://h:65535');
    // A password written into the remote is refused without being shown.
    for (const [given, shown] of [
      ['https://alice:HUNTER2@host/repo', 'https://***@host/repo'],
      ['alice:HUNTER2@host/repo', '***@host/repo'],
      // A password that holds @ or / is hidden whole too.
      ['alice:p@ss@host/repo', '***@host/repo'],
      ['https://alice:s3cr/t@host/repo', 'https://***@host/repo'],
      ['alice:pa/ss@host/repo', '***@host/repo'],
    ]) {
      expect(() => parseRemote(given)).toThrow(`not a registry repository (bad host): ${shown}`);
    }
  });

  it('parses Basic and Bearer challenges with quoted parameters', () => {
    expect(parseChallenge('Basic realm="Registry Realm"')).toEqual({ scheme: 'basic', params: { realm: 'Registry Realm' } });
    expect(parseChallenge('Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push"')).toEqual({
      scheme: 'bearer',
      params: { realm: 'https://auth.example.com/token', service: 'registry.example.com', scope: 'repository:a/b:pull,push' },
    });
    // RFC 7235 allows whitespace after each comma (as many registries send it).
    expect(parseChallenge('Bearer realm="https://auth.example.com/token", service="registry.example.com", scope="repository:a/b:pull"')).toEqual({
      scheme: 'bearer',
      params: { realm: 'https://auth.example.com/token', service: 'registry.example.com', scope: 'repository:a/b:pull' },
    });
    expect(parseChallenge('Negotiate abc')).toBeUndefined();
    expect(parseChallenge(null)).toBeUndefined();
  });

  it('finds credentials in the given order: options, environment, docker config', () => {
    const work = tempDir();
    const env = { DOCKER_CONFIG: work } as NodeJS.ProcessEnv;
    writeFileSync(join(work, 'config.json'), JSON.stringify({ auths: { 'reg.example.com': { auth: Buffer.from('u:p:with:colons').toString('base64') } } }));
    expect(findCredentials('reg.example.com', undefined, env)).toEqual({ username: 'u', password: 'p:with:colons' });
    expect(findCredentials('other.example.com', undefined, env)).toBeUndefined();
    expect(findCredentials('reg.example.com', undefined, { ...env, TREESEAL_REGISTRY_USER: 'e', TREESEAL_REGISTRY_PASSWORD: 'f' })).toEqual({ username: 'e', password: 'f' });
    expect(findCredentials('reg.example.com', { username: 'o', password: 'q' }, env)).toEqual({ username: 'o', password: 'q' });
    expect(() => findCredentials('x', { username: 1 } as never, env)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
  });

  it('refuses bad options as Node does', async () => {
    const work = tempDir();
    const s = await SnapshotStore.open(join(work, 's'));
    await expect(s.pull('a'.repeat(64), '127.0.0.1:1/x', { concurrency: 0 })).rejects.toMatchObject({ name: 'RangeError', code: 'ERR_OUT_OF_RANGE' });
    await expect(s.pull('a'.repeat(64), '127.0.0.1:1/x', { insecure: 'yes' as never })).rejects.toMatchObject({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
    await expect(s.pull('abc', '127.0.0.1:1/x')).rejects.toMatchObject({
      name: 'TypeError',
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The argument 'digest' must be a full snapshot digest (64 lower-case hex digits). Received 'abc'",
    });
    await expect(s.pull(7 as never, '127.0.0.1:1/x')).rejects.toMatchObject({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
    await s.close();
  });
});
