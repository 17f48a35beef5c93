// proxy-env.ts: the proxy settings of the environment (HTTP_PROXY, HTTPS_PROXY, NO_PROXY), read without loading an HTTP client.

/** The proxy settings of the environment, read as undici reads them (the lower-case name first). */
export interface ProxyEnv {
  httpProxy: string | undefined;
  httpsProxy: string | undefined;
  /** NO_PROXY's value, '' when unset. */
  noProxy: string;
}

export function proxyEnv(env: NodeJS.ProcessEnv): ProxyEnv {
  const httpProxy = env.http_proxy ?? env.HTTP_PROXY;
  const httpsProxy = env.https_proxy ?? env.HTTPS_PROXY;
  return { httpProxy: httpProxy || undefined, httpsProxy: httpsProxy || undefined, noProxy: env.no_proxy ?? env.NO_PROXY ?? '' };
}
