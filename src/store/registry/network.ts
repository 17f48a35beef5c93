// network.ts: the connection pool of one push or pull: proxies from the environment (undici's EnvHttpProxyAgent), loopback hosts direct, and extra trusted CAs.
import type * as Undici from 'undici';

import { SealError } from '../../base/errors.js';
import { tls } from '../../base/lazy-builtins.js';
import type { ProxyEnv } from './proxy-env.js';
import { isLoopback } from './remote.js';
import { NotSettingFile, readSettingFileAsync } from './setting-file.js';

/**
 * Undici's Dispatcher and Agent, each loaded from its own module: the package's index
 * loads all of undici (its fetch, WebSocket, cache and mock agents among them), about
 * 100 ms more than the Agent a transfer without a proxy uses (140–190 ms against 40–85 ms
 * here), paid by every registry command. A release that moves the modules falls back to
 * the index. The proxy agents come from the index (see connectionPool).
 */
async function loadUndici(): Promise<Pick<typeof Undici, 'Agent' | 'Dispatcher'>> {
  try {
    const [dispatcher, agent] = await Promise.all([import('undici/lib/dispatcher/dispatcher.js'), import('undici/lib/dispatcher/agent.js')]);
    return { Dispatcher: dispatcher.default, Agent: agent.default };
  } catch {
    return import('undici');
  }
}

const { Agent, Dispatcher } = await loadUndici();
type Dispatcher = Undici.Dispatcher;

/**
 * What a transfer may call on its connection pool: an Agent loaded on its own lacks the
 * request methods (request, stream, connect, …) the index adds to every dispatcher, and
 * Node's fetch calls only dispatch.
 */
export type ConnectionPool = Pick<Dispatcher, 'dispatch' | 'close' | 'destroy'>;

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

async function certificates(file: string, what: string): Promise<string[]> {
  let text: string;
  try {
    text = (await readSettingFileAsync(file)).toString('utf8');
  } catch (err) {
    const why = err instanceof NotSettingFile ? err.message : ((err as NodeJS.ErrnoException).code ?? String(err));
    throw new SealError('SEAL_REMOTE', `${what} cannot be read: ${file}: ${why}`, { cause: err });
  }
  const certs = text.match(PEM_CERT) ?? [];
  if (certs.length === 0) throw new SealError('SEAL_REMOTE', `${what} holds no PEM certificate: ${file}`);
  return certs;
}

/**
 * The CAs a TLS connection trusts when a CA file is given: Node's bundled roots, the
 * certificates of NODE_EXTRA_CA_CERTS (which an explicit `ca` would otherwise drop), and
 * the file's. Undefined (Node's defaults) without a file.
 */
export async function trustedCas(caFile: string | undefined, env: NodeJS.ProcessEnv): Promise<string[] | undefined> {
  if (caFile === undefined) return undefined;
  const extra = env.NODE_EXTRA_CA_CERTS ? await certificates(env.NODE_EXTRA_CA_CERTS, 'NODE_EXTRA_CA_CERTS').catch(() => []) : [];
  return [...tls().rootCertificates, ...extra, ...(await certificates(caFile, 'CA file'))];
}

/**
 * Sends loopback hosts to `direct` and everything else to `proxied`: with a proxy set and
 * NO_PROXY unset, a registry (realm, redirect) on this machine is not sent to a proxy that
 * cannot reach it.
 */
class LoopbackDirect extends Dispatcher {
  readonly #direct: Dispatcher;
  readonly #proxied: Dispatcher;

  constructor(direct: Dispatcher, proxied: Dispatcher) {
    super();
    this.#direct = direct;
    this.#proxied = proxied;
  }

  override dispatch(options: Undici.Dispatcher.DispatchOptions, handler: Undici.Dispatcher.DispatchHandler): boolean {
    const origin = options.origin === undefined ? undefined : new URL(String(options.origin));
    return (origin !== undefined && isLoopback(origin.host) ? this.#direct : this.#proxied).dispatch(options, handler);
  }

  override async close(): Promise<void> {
    await Promise.all([this.#direct.close(), this.#proxied.close()]);
  }

  override async destroy(): Promise<void> {
    await Promise.all([this.#direct.destroy(), this.#proxied.destroy()]);
  }
}

/**
 * The connection pool of one push or pull. Without HTTP_PROXY / HTTPS_PROXY (or their
 * lower-case forms) every host is reached directly. With one, undici's EnvHttpProxyAgent
 * decides: HTTPS through a CONNECT tunnel, plain HTTP as absolute-form requests to the
 * proxy, and NO_PROXY's hosts directly, as undici matches them. While NO_PROXY is unset
 * or empty, loopback hosts are reached directly too. `ca` (see trustedCas) is trusted for
 * the registry, its realm and an HTTPS proxy.
 */
export async function connectionPool(proxy: ProxyEnv, ca: string[] | undefined): Promise<ConnectionPool> {
  const tls = ca === undefined ? {} : { ca };
  if (proxy.httpProxy === undefined && proxy.httpsProxy === undefined) return new Agent({ connect: tls });
  // From the index: a CONNECT tunnel needs the request methods it adds to every dispatcher.
  const { EnvHttpProxyAgent } = await import('undici');
  const proxied = new EnvHttpProxyAgent({
    ...(proxy.httpProxy === undefined ? {} : { httpProxy: proxy.httpProxy }),
    ...(proxy.httpsProxy === undefined ? {} : { httpsProxy: proxy.httpsProxy }),
    noProxy: proxy.noProxy,
    connect: tls,
    requestTls: tls,
    proxyTls: tls,
    proxyTunnel: false,
  });
  return proxy.noProxy.trim() === '' ? new LoopbackDirect(new Agent({ connect: tls }), proxied) : proxied;
}
