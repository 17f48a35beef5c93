// auth.ts: registry authorization: WWW-Authenticate challenges, Basic, and the Bearer token flow (realm, service, scope).
import { SealError } from '../../base/errors.js';
import { askHelper, isHelper, isIdentityToken, type Auth, type CredentialSource, type Credentials, type IdentityToken } from './credentials.js';
import { registryText, type Outgoing } from './http.js';
import { isLoopback, type Remote } from './remote.js';
import { checkNoUserinfo } from './rules.js';

export interface Challenge {
  scheme: 'basic' | 'bearer';
  params: Record<string, string>;
}

/** The first Basic or Bearer challenge of a WWW-Authenticate header (params with quoted strings). */
export function parseChallenge(header: string | null): Challenge | undefined {
  if (header === null) return undefined;
  const m = /^\s*(basic|bearer)\b\s*(.*)$/is.exec(header);
  if (m === null) return undefined;
  const params: Record<string, string> = {};
  const re = /\s*([a-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))\s*,?/giy;
  const rest = m[2]!;
  re.lastIndex = 0;
  for (let p = re.exec(rest); p !== null && p[0] !== ''; p = re.exec(rest)) {
    params[p[1]!.toLowerCase()] = p[2] !== undefined ? p[2].replace(/\\(.)/g, '$1') : p[3]!;
  }
  return { scheme: m[1]!.toLowerCase() as Challenge['scheme'], params };
}

/** Sends one HTTP request (with retries on 429, 5xx and lost connections). */
export type Send = (url: string, req: Outgoing) => Promise<Response>;

export interface AuthorizerOptions {
  remote: Remote;
  /** Known credentials, a credential helper to ask (once, when the registry first wants credentials), or none. */
  credentials: CredentialSource;
  signal?: AbortSignal | undefined;
  /** Token scopes asked for up front, e.g. `repository:team/x:pull,push`. */
  scopes: string[];
  send: Send;
  /** Reads an answer's body, at most `max` bytes (SEAL_CORRUPT past it), under the exchange's deadlines; `what` names it and `label` who sent it in errors. */
  read: (res: Response, max: number, what: string, label: string) => Promise<Buffer>;
}

/** The most bytes a token server's answer may have (a token is a few KB; a realm that never stops must not fill memory). */
const MAX_TOKEN_ANSWER_BYTES = 1024 * 1024;

function basicHeader(c: Credentials): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`, 'utf8').toString('base64')}`;
}

/** The OAuth2 client id sent with a refresh token (docker sends its own name too). */
const CLIENT_ID = 'treeseal';

/** Holds the Authorization a registry wants, learned from its 401 challenges and refreshed when refused. */
export class Authorizer {
  #header: string | undefined;
  readonly #o: AuthorizerOptions;
  #auth: Promise<Auth | undefined> | undefined;
  /** A newer refresh token the realm handed back, used for the rest of the operation. */
  #refreshToken: string | undefined;

  constructor(options: AuthorizerOptions) {
    this.#o = options;
  }

  /** The credentials: a credential helper is run once, on the first challenge that needs them. */
  #credentials(): Promise<Auth | undefined> {
    const { credentials: source } = this.#o;
    this.#auth ??= isHelper(source) ? askHelper(source, this.#o.signal) : Promise.resolve(source);
    return this.#auth;
  }

  /** The Authorization header to send now, if any. */
  get header(): string | undefined {
    return this.#header;
  }

  #needCredentials(status: number): SealError {
    const source = this.#o.credentials;
    const helper = isHelper(source) ? ` (credential helper docker-credential-${source.helper} holds none for ${source.serverUrl})` : '';
    return new SealError(
      'SEAL_REMOTE',
      `registry ${this.#o.remote.host} requires authentication (HTTP ${status} UNAUTHORIZED)${helper}; give credentials through options, ` +
        'TREESEAL_REGISTRY_USER / TREESEAL_REGISTRY_PASSWORD or ~/.docker/config.json',
    );
  }

  /**
   * Answers a 401 to a request sent with `sent` as its Authorization: returns true when
   * the request should be sent again (new Basic header, new or refreshed token), throws
   * SEAL_REMOTE when the registry refuses what it was given.
   */
  async challenged(res: Response, sent: string | undefined, refused: SealError): Promise<boolean> {
    const challenge = parseChallenge(res.headers.get('www-authenticate'));
    if (challenge === undefined) throw refused;
    if (challenge.scheme === 'basic') {
      const credentials = await this.#credentials();
      if (credentials === undefined) throw this.#needCredentials(res.status);
      if (isIdentityToken(credentials)) {
        throw new SealError('SEAL_REMOTE', `registry ${this.#o.remote.host} asks for Basic authentication, and its credentials are an identity token (a token realm's refresh token)`);
      }
      // Sent and refused: the user or the password is wrong (said, the password not).
      if (sent !== undefined && sent.startsWith('Basic ')) throw new SealError('SEAL_REMOTE', `${refused.message}: the registry rejected the credentials sent (user ${JSON.stringify(credentials.username)})`, { cause: refused });
      this.#header = basicHeader(credentials);
      return true;
    }
    // Another request already fetched a newer token: use it. Else fetch one (a refused token may
    // have expired; the caller bounds how often one request comes back here).
    if (sent !== this.#header) return true;
    this.#header = `Bearer ${await this.#fetchToken(challenge.params)}`;
    return true;
  }

  async #fetchToken(params: Record<string, string>): Promise<string> {
    const { remote } = this.#o;
    const realm = params.realm;
    if (realm === undefined) throw new SealError('SEAL_REMOTE', `registry ${remote.host} sent a Bearer challenge without a realm`);
    let url: URL;
    try {
      url = new URL(realm);
    } catch (err) {
      throw new SealError('SEAL_REMOTE', `registry ${remote.host} sent a bad token realm: ${registryText(realm)}`, { cause: err });
    }
    checkNoUserinfo(url, `token realm of ${remote.host}`);
    // The realm's own host decides, not the registry's: a loopback registry may name a realm anywhere.
    if (url.protocol !== 'https:' && url.protocol !== 'http:') {
      throw new SealError('SEAL_REMOTE', `token realm ${registryText(realm)} is neither HTTPS nor HTTP: a token is asked for over one of them only`);
    }
    if (url.protocol === 'http:' && !remote.insecure && !isLoopback(url.host)) {
      throw new SealError('SEAL_REMOTE', `token realm ${registryText(realm)} is not HTTPS; plain HTTP needs --insecure`);
    }
    const scopes = new Set(this.#o.scopes);
    for (const s of (params.scope ?? '').split(' ')) if (s !== '') scopes.add(s);
    const credentials = await this.#credentials();
    const res = isIdentityToken(credentials) ? await this.#refresh(url, params.service, scopes, credentials) : await this.#askToken(url, params.service, scopes, credentials);
    const what = isIdentityToken(credentials) ? 'the identity token' : 'the credentials';
    // The status first: a refusal's body, however long, is not read.
    if (!res.ok) await res.body?.cancel().catch(() => {});
    if (res.status === 401 || res.status === 403) {
      if (credentials === undefined) throw this.#needCredentials(res.status);
      throw new SealError('SEAL_REMOTE', `token server ${url.host} refused ${what} for ${remote.host}: HTTP ${res.status}`);
    }
    if (!res.ok) throw new SealError('SEAL_REMOTE', `token server ${url.host} answered HTTP ${res.status}`);
    const text = (await this.#o.read(res, MAX_TOKEN_ANSWER_BYTES, 'its answer', `token server ${url.host}`)).toString('utf8');
    let body: { token?: unknown; access_token?: unknown; refresh_token?: unknown };
    try {
      body = JSON.parse(text) as typeof body;
    } catch (err) {
      throw new SealError('SEAL_REMOTE', `token server ${url.host} sent a body that is not JSON`, { cause: err });
    }
    const token = typeof body.token === 'string' && body.token !== '' ? body.token : body.access_token;
    if (typeof token !== 'string' || token === '') throw new SealError('SEAL_REMOTE', `token server ${url.host} sent no token`);
    // Sent back as `Authorization: Bearer <token>`: printable ASCII without spaces (RFC 6750's b64token and more), never a line break.
    if (!/^[\x21-\x7e]+$/.test(token)) throw new SealError('SEAL_REMOTE', `token server ${url.host} sent a token that cannot be sent in a header (not printable ASCII)`);
    if (isIdentityToken(credentials) && typeof body.refresh_token === 'string' && body.refresh_token !== '') this.#refreshToken = body.refresh_token;
    return token;
  }

  /** The token request with a user name and password (Basic) or anonymous: GET realm?service=…&scope=…. */
  #askToken(realm: URL, service: string | undefined, scopes: Set<string>, credentials: Credentials | undefined): Promise<Response> {
    const url = new URL(realm);
    if (service !== undefined) url.searchParams.set('service', service);
    for (const s of scopes) url.searchParams.append('scope', s);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (credentials !== undefined) headers.authorization = basicHeader(credentials);
    return this.#o.send(url.toString(), { method: 'GET', headers });
  }

  /** The token request with an identity token, as docker makes it: an OAuth2 refresh-token grant POSTed to the realm. */
  #refresh(realm: URL, service: string | undefined, scopes: Set<string>, credentials: IdentityToken): Promise<Response> {
    const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: this.#refreshToken ?? credentials.identityToken, client_id: CLIENT_ID });
    if (service !== undefined) form.set('service', service);
    if (scopes.size > 0) form.set('scope', [...scopes].join(' '));
    const headers = { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' };
    return this.#o.send(realm.toString(), { method: 'POST', headers, body: Buffer.from(form.toString(), 'utf8') });
  }
}
