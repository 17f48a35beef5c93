// credentials.ts: where a registry's user name and password come from: options, the environment, or ~/.docker/config.json.
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

import { checkOptions, checkString } from '../../base/arg-errors.js';
import { SealError } from '../../base/errors.js';

export interface Credentials {
  username: string;
  password: string;
}

function fromDockerConfig(host: string, env: NodeJS.ProcessEnv): Credentials | undefined {
  const file = join(env.DOCKER_CONFIG || join(homedir(), '.docker'), 'config.json');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  let auths: Record<string, { auth?: unknown }>;
  try {
    auths = (JSON.parse(text) as { auths?: Record<string, { auth?: unknown }> }).auths ?? {};
  } catch (err) {
    throw new SealError('SEAL_REMOTE', `docker config is not valid JSON: ${file}`, { cause: err });
  }
  // Keys are written as `host`, `https://host` or `https://host/v1/`.
  const key = Object.keys(auths).find((k) => k.replace(/^https?:\/\//, '').replace(/\/.*$/, '').toLowerCase() === host);
  const auth = key === undefined ? undefined : auths[key]?.auth;
  if (typeof auth !== 'string' || auth === '') return undefined;
  const plain = Buffer.from(auth, 'base64').toString('utf8');
  const cut = plain.indexOf(':');
  if (cut < 0) throw new SealError('SEAL_REMOTE', `docker config auth for ${host} is not base64 of user:password: ${file}`);
  return { username: plain.slice(0, cut), password: plain.slice(cut + 1) };
}

/**
 * The credentials for host: the given ones, else TREESEAL_REGISTRY_USER and
 * TREESEAL_REGISTRY_PASSWORD, else `auths[host].auth` of $DOCKER_CONFIG/config.json
 * (~/.docker/config.json). Credential helpers (credsStore) are not consulted.
 */
export function findCredentials(host: string, given: Credentials | undefined, env: NodeJS.ProcessEnv = process.env): Credentials | undefined {
  if (given !== undefined) {
    checkOptions('options.credentials', given);
    checkString('options.credentials.username', given.username);
    checkString('options.credentials.password', given.password);
    return given;
  }
  const user = env.TREESEAL_REGISTRY_USER;
  if (user !== undefined && user !== '') return { username: user, password: env.TREESEAL_REGISTRY_PASSWORD ?? '' };
  return fromDockerConfig(host, env);
}
