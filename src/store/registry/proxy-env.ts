// proxy-env.ts: the proxy settings of the environment (HTTP_PROXY, HTTPS_PROXY, NO_PROXY), read without loading an HTTP client.
import { SealError } from '../../base/errors.js';
import { hideUserinfo } from './remote.js';

/** The proxy settings of the environment, read as undici reads them (the lower-case name first). */
export interface ProxyEnv {
  httpProxy: string | undefined;
  httpsProxy: string | undefined;
  /** NO_PROXY's value, '' when unset. */
  noProxy: string;
}

/**
 * The proxy settings of env. A proxy that is not an http:// or https:// URL (a typo, or a
 * SOCKS proxy, which is not supported) is SEAL_BAD_PATH naming the variable, its
 * credentials not shown, before anything connects.
 */
export function proxyEnv(env: NodeJS.ProcessEnv): ProxyEnv {
  const httpProxy = checkProxy(env.http_proxy === undefined ? 'HTTP_PROXY' : 'http_proxy', env.http_proxy ?? env.HTTP_PROXY);
  const httpsProxy = checkProxy(env.https_proxy === undefined ? 'HTTPS_PROXY' : 'https_proxy', env.https_proxy ?? env.HTTPS_PROXY);
  return { httpProxy, httpsProxy, noProxy: env.no_proxy ?? env.NO_PROXY ?? '' };
}

function checkProxy(name: string, value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    // said below
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
    throw new SealError('SEAL_BAD_PATH', `${name} is not an http:// or https:// proxy URL (SOCKS proxies are not supported): ${hideUserinfo(value)}`);
  }
  // The proxy's user and password are percent-decoded when it is used: a bare '%' (a password `50%off`) would fail there, untyped.
  try {
    decodeURIComponent(url.username);
    decodeURIComponent(url.password);
  } catch {
    throw new SealError('SEAL_BAD_PATH', `${name} holds a user or password that is not percent-encoded (write a '%' in it as %25, an '@' as %40): ${hideUserinfo(value)}`);
  }
  return value;
}
