// remote.ts: a remote (`host[:port]/repository`): its parts, its transport (HTTPS unless loopback or insecure), and a snapshot's tag.
import { invalidArgType } from '../../base/arg-errors.js';
import { SealError } from '../../base/errors.js';
import { net } from '../../base/lazy-builtins.js';
import { escapePath } from '../../base/paths.js';

export interface Remote {
  /** `host[:port]` as given (lowercased), the key for credentials. */
  readonly host: string;
  /** The repository name inside the registry, e.g. `team/snapshots`. */
  readonly repository: string;
  /** `https://host[:port]` or `http://host[:port]`. */
  readonly origin: string;
  /** Plain HTTP is allowed for this registry (loopback, or insecure asked for). */
  readonly plainHttpAllowed: boolean;
  /** `insecure` was asked for: plain HTTP to any host (the registry, its token realm, redirects). */
  readonly insecure: boolean;
  /** What the user wrote, for messages. */
  readonly text: string;
}

const REPOSITORY_RE = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/;
const HOST_RE = /^(?:\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::[0-9]{1,5})?$/;

/** The tag a snapshot is stored under in its repository. */
export function snapshotTag(digest: string): string {
  return `ts-${digest}`;
}

function hostname(host: string): string {
  if (host.startsWith('[')) return host.slice(1, host.indexOf(']'));
  const cut = host.lastIndexOf(':');
  return cut < 0 ? host : host.slice(0, cut);
}

/**
 * 127.0.0.0/8, ::1 and `localhost`: the only hosts spoken to over plain HTTP without
 * `insecure`. A name below `.localhost` (`registry.localhost`) is not one: the system's
 * resolver may send it to DNS, whose answer can be any address.
 */
export function isLoopback(host: string): boolean {
  const name = hostname(host);
  if (name === 'localhost') return true;
  const ip = net().isIP(name);
  if (ip === 4) return name.startsWith('127.');
  if (ip === 6) return name === '::1' || name === '0:0:0:0:0:0:0:1';
  return false;
}

/**
 * A URL or remote for a message, user information (`user:password@`) hidden: everything
 * before its last `@` after the scheme is shown as `***` (a password may hold `@` and `/`;
 * hiding too much is harmless), escaped.
 */
export function hideUserinfo(text: string): string {
  return escapePath(text.replace(/^((?:[a-z][a-z0-9+.-]*:\/\/)?).*@/is, '$1***@'));
}

function bad(text: string, why: string): SealError {
  return new SealError('SEAL_BAD_PATH', `not a registry repository (${why}): ${hideUserinfo(text)}`);
}

/**
 * Parses `[http://|https://]host[:port]/repository`. HTTPS unless the URL says
 * http:// or the host is loopback; plain HTTP to any other host needs `insecure`.
 */
export function parseRemote(text: unknown, insecure = false): Remote {
  if (typeof text !== 'string') throw invalidArgType('remote', 'string', text);
  if (text === '') throw new SealError('SEAL_BAD_PATH', 'remote must be host[:port]/repository');
  let rest = text;
  let scheme: 'http' | 'https' | undefined;
  const m = /^(https?):\/\//.exec(rest);
  if (m !== null) {
    scheme = m[1] as 'http' | 'https';
    rest = rest.slice(m[0].length);
  }
  const slash = rest.indexOf('/');
  if (slash <= 0) throw bad(text, 'expected host[:port]/repository');
  const host = rest.slice(0, slash).toLowerCase();
  const repository = rest.slice(slash + 1).replace(/\/+$/, '');
  if (!HOST_RE.test(host)) throw bad(text, 'bad host');
  const port = /:(\d+)$/.exec(host)?.[1];
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) throw bad(text, 'port must be 1 to 65535');
  if (!REPOSITORY_RE.test(repository) || repository.length > 255) throw bad(text, 'bad repository name');
  const loopback = isLoopback(host);
  const plainHttpAllowed = loopback || insecure;
  if (scheme === 'http' && !plainHttpAllowed) {
    throw new SealError('SEAL_REMOTE', `plain HTTP to ${host} needs --insecure (only loopback registries are spoken to without TLS)`);
  }
  const useHttp = scheme === 'http' || (scheme === undefined && plainHttpAllowed);
  return { host, repository, origin: `${useHttp ? 'http' : 'https'}://${host}`, plainHttpAllowed, insecure, text };
}
