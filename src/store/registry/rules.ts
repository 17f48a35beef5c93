// rules.ts: where a request may go: HTTPS, or plain HTTP only to a loopback host or with insecure; never from HTTPS down to HTTP.
import { SealError } from '../../base/errors.js';
import { isLoopback } from './remote.js';

/** A URL as messages show it: origin and path, never the query (it can hold a signature). */
export function shownUrl(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

/** SEAL_REMOTE for a URL with user information (`user:password@host`): no request can be made of it, and none is retried. */
export function checkNoUserinfo(to: URL, what: string): void {
  if (to.username !== '' || to.password !== '') throw new SealError('SEAL_REMOTE', `${what} has credentials in its URL (${shownUrl(to)}); refused`);
}

/**
 * Throws SEAL_REMOTE unless a request may go to `to`: HTTPS, or plain HTTP to a loopback
 * host or with `insecure`; and, when the registry or a redirect at `from` sent it there,
 * never from HTTPS to HTTP (not even with `insecure`). `what` names where it came from.
 */
export function checkDestination(to: URL, insecure: boolean, what: string, from?: URL): void {
  checkNoUserinfo(to, what);
  if (to.protocol === 'https:') return;
  if (to.protocol !== 'http:') throw new SealError('SEAL_REMOTE', `${what} is not an HTTP(S) URL: ${to.protocol}`);
  if (from?.protocol === 'https:') {
    throw new SealError('SEAL_REMOTE', `${what} leads from HTTPS to plain HTTP (${shownUrl(to)}); refused even with --insecure`);
  }
  if (!insecure && !isLoopback(to.host)) {
    throw new SealError('SEAL_REMOTE', `${what} is plain HTTP to ${to.host} (${shownUrl(to)}); plain HTTP needs --insecure (only loopback hosts are spoken to without TLS)`);
  }
}
