// credentials.ts: where a registry's credentials come from: options, the environment, or the docker config (auths, identity tokens, credential helpers).
import { homedir } from 'node:os';
import { join } from 'node:path';

import { checkOptions, checkString } from '../../base/arg-errors.js';
import { SealError, abortedError } from '../../base/errors.js';
import { childProcess } from '../../base/lazy-builtins.js';
import { NotSettingFile, readSettingFile } from './setting-file.js';

export interface Credentials {
  username: string;
  password: string;
}

/** An identity token (docker's `identitytoken`): an OAuth2 refresh token for the registry's token realm. */
export interface IdentityToken {
  identityToken: string;
}

/** What authenticates to a registry. */
export type Auth = Credentials | IdentityToken;

/** The credentials a docker credential helper holds for a registry, asked for when the registry first wants credentials. */
export interface HelperCredentials {
  /** `<name>` of the `docker-credential-<name>` executable. */
  helper: string;
  /** Where the docker config names it: `credsStore` or `credHelpers`. */
  setting: 'credsStore' | 'credHelpers';
  configFile: string;
  /** What the helper is asked for (the registry's host[:port], as `docker login` stores it). */
  serverUrl: string;
  env: NodeJS.ProcessEnv;
}

/** Where a registry's credentials are: known now, in a helper, or nowhere (anonymous). */
export type CredentialSource = Auth | HelperCredentials | undefined;

export function isHelper(source: CredentialSource): source is HelperCredentials {
  return source !== undefined && 'helper' in source;
}

export function isIdentityToken(auth: Auth | undefined): auth is IdentityToken {
  return auth !== undefined && 'identityToken' in auth;
}

interface AuthEntry {
  auth?: unknown;
  identitytoken?: unknown;
}

interface DockerConfig {
  auths?: Record<string, AuthEntry>;
  credsStore?: unknown;
  credHelpers?: Record<string, unknown>;
}

/** A docker config key (`host`, `https://host`, `https://host/v1/`) as the host it names. */
function keyHost(key: string): string {
  return key.replace(/^https?:\/\//, '').replace(/\/.*$/, '').toLowerCase();
}

/** A helper name as docker-credential-<name> takes it: a plain file name, never a path. */
const HELPER_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

function fromDockerConfig(host: string, env: NodeJS.ProcessEnv): CredentialSource {
  const file = join(env.DOCKER_CONFIG || join(homedir(), '.docker'), 'config.json');
  let text: string;
  try {
    text = readSettingFile(file).toString('utf8');
  } catch (err) {
    // A FIFO or a device there is no config (read, it would block or fill memory): said; one missing or unreadable is none.
    if (err instanceof NotSettingFile) throw new SealError('SEAL_REMOTE', `docker config is ${err.message}: ${file}`, { cause: err });
    return undefined;
  }
  let config: DockerConfig;
  try {
    config = (JSON.parse(text) as DockerConfig | null) ?? {};
  } catch (err) {
    throw new SealError('SEAL_REMOTE', `docker config is not valid JSON: ${file}`, { cause: err });
  }
  // A helper for this host, else the store for every host: it alone answers, as docker has it.
  const helperKey = Object.keys(config.credHelpers ?? {}).find((k) => keyHost(k) === host);
  const named = helperKey === undefined ? undefined : config.credHelpers![helperKey];
  const helper = named ?? config.credsStore;
  if (helper !== undefined && helper !== '') {
    const setting = named === undefined ? 'credsStore' : 'credHelpers';
    if (typeof helper !== 'string' || !HELPER_NAME_RE.test(helper)) {
      throw new SealError('SEAL_REMOTE', `docker config ${setting} names no usable credential helper (${JSON.stringify(helper)}): ${file}`);
    }
    return { helper, setting, configFile: file, serverUrl: host, env };
  }
  const auths = config.auths ?? {};
  const key = Object.keys(auths).find((k) => keyHost(k) === host);
  const entry = key === undefined ? undefined : auths[key];
  if (typeof entry?.identitytoken === 'string' && entry.identitytoken !== '') return { identityToken: entry.identitytoken };
  const auth = entry?.auth;
  if (typeof auth !== 'string' || auth === '') return undefined;
  const plain = Buffer.from(auth, 'base64').toString('utf8');
  const cut = plain.indexOf(':');
  if (cut < 0) throw new SealError('SEAL_REMOTE', `docker config auth for ${host} is not base64 of user:password: ${file}`);
  return { username: plain.slice(0, cut), password: plain.slice(cut + 1) };
}

/**
 * Where the credentials for host are: the given ones, else TREESEAL_REGISTRY_USER and
 * TREESEAL_REGISTRY_PASSWORD, else $DOCKER_CONFIG/config.json (~/.docker/config.json):
 * `credHelpers[host]`, else `credsStore` (a docker credential helper, run when the
 * registry first asks for credentials), else `auths[host]` (`identitytoken` or `auth`).
 */
export function findCredentials(host: string, given: Credentials | undefined, env: NodeJS.ProcessEnv = process.env): CredentialSource {
  if (given !== undefined) {
    checkOptions('options.credentials', given, { op: 'credentials', keys: ['username', 'password'] });
    checkString('options.credentials.username', given.username);
    checkString('options.credentials.password', given.password);
    return given;
  }
  const user = env.TREESEAL_REGISTRY_USER;
  if (user !== undefined && user !== '') return { username: user, password: env.TREESEAL_REGISTRY_PASSWORD ?? '' };
  return fromDockerConfig(host, env);
}

/** What a credential helper prints when it holds nothing for the server (docker-credential-helpers' ErrCredentialsNotFound). */
const NOT_FOUND = 'credentials not found in native keychain';
/** Longest a helper may take (it may ask a keyring or an agent). */
const HELPER_TIMEOUT_MS = 60_000;
const HELPER_MAX_OUTPUT = 1024 * 1024;

/**
 * What a failed helper said: the first line of its stderr, at most 200 characters. Never
 * its stdout, which may hold its answer, Secret and all (a helper that printed the
 * credentials and then failed, or whose answer passed the size it may have).
 */
function complaint(stderr: string): string {
  const text = stderr.trim().split('\n')[0] ?? '';
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}

/**
 * Runs `docker-credential-<name> get` as docker does: the server URL on stdin, JSON
 * `{ServerURL, Username, Secret}` on stdout; a Username of `<token>` makes the Secret an
 * identity token. Undefined when the helper holds nothing for the server; SEAL_REMOTE
 * naming the helper when it cannot be run or fails.
 */
export function askHelper(h: HelperCredentials, signal?: AbortSignal): Promise<Auth | undefined> {
  const exe = `docker-credential-${h.helper}`;
  const named = `credential helper ${exe} (${h.setting} in ${h.configFile})`;
  return new Promise((resolve, reject) => {
    const child = childProcess().execFile(exe, ['get'], { env: h.env, timeout: HELPER_TIMEOUT_MS, maxBuffer: HELPER_MAX_OUTPUT, encoding: 'utf8', signal }, (err, stdout, stderr) => {
      if (err !== null) {
        const e = err as NodeJS.ErrnoException & { killed?: boolean };
        if (e.name === 'AbortError') reject(abortedError(`asking ${named}`, signal));
        else if (e.code === 'ENOENT') reject(new SealError('SEAL_REMOTE', `${named} is not on PATH`, { cause: err }));
        // A directory on PATH this user may not search, or a helper found but not executable: execvp says EACCES.
        else if (e.code === 'EACCES') reject(new SealError('SEAL_REMOTE', `${named} is not on PATH, or cannot be run (EACCES)`, { cause: err }));
        else if (stdout.trim() === NOT_FOUND) resolve(undefined);
        else if (e.killed === true) reject(new SealError('SEAL_REMOTE', `${named} did not answer for ${h.serverUrl} in ${HELPER_TIMEOUT_MS / 1000} s`, { cause: err }));
        else if (e.code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER') reject(new SealError('SEAL_REMOTE', `${named} answered more than ${HELPER_MAX_OUTPUT} bytes for ${h.serverUrl}`, { cause: err }));
        else reject(new SealError('SEAL_REMOTE', `${named} failed for ${h.serverUrl}: ${complaint(stderr) || `exit status ${String(e.code)} (nothing on stderr)`}`, { cause: err }));
        return;
      }
      let out: { Username?: unknown; Secret?: unknown };
      try {
        out = JSON.parse(stdout) as typeof out;
      } catch (parseErr) {
        reject(new SealError('SEAL_REMOTE', `${named} printed no JSON for ${h.serverUrl}`, { cause: parseErr }));
        return;
      }
      if (typeof out?.Username !== 'string' || typeof out.Secret !== 'string') {
        reject(new SealError('SEAL_REMOTE', `${named} printed no Username and Secret for ${h.serverUrl}`));
        return;
      }
      if (out.Secret === '') resolve(undefined);
      else if (out.Username === '<token>') resolve({ identityToken: out.Secret });
      else resolve({ username: out.Username, password: out.Secret });
    });
    child.stdin?.on('error', () => {});
    child.stdin?.end(h.serverUrl);
  });
}
