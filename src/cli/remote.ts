// remote.ts: `treeseal push`, `pull` and `cat`: a snapshot to or from an OCI registry repository, or one file of it.
import { resolve } from 'node:path';

import { catRemote, escapePath, type CatReport, type PullReport, type PushReport, type RetryNotice, type SnapshotRef } from '../index.js';
import { UsageError, flag, listOption, need, stringOption, type CommandSpec, type Context } from './command.js';
import { bytes, ms } from './format.js';

function concurrency(ctx: Context): { concurrency?: number } {
  const raw = stringOption(ctx, 'concurrency');
  if (raw === undefined) return {};
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < 1 || n > 64) throw new UsageError(`--concurrency takes a number from 1 to 64, not ${JSON.stringify(raw)}`, ctx.command);
  return { concurrency: n };
}

/** --timeout SECONDS: the wait for response headers and for each body chunk (the rate floor keeps its default). */
function timeout(ctx: Context): { timeouts?: { headersMs: number; idleMs: number } } {
  const raw = stringOption(ctx, 'timeout');
  if (raw === undefined) return {};
  const ms = Math.round(Number(raw) * 1000);
  if (!/^\d+(?:\.\d+)?$/.test(raw) || ms < 1 || ms > 86_400_000) {
    throw new UsageError(`--timeout takes seconds from 0.001 to 86400, not ${JSON.stringify(raw)}`, ctx.command);
  }
  return { timeouts: { headersMs: ms, idleMs: ms } };
}

/**
 * --ca-file PATH (a PEM file of CA certificates to trust besides Node's own), and Node's
 * global connections: the command's process ends with its transfer, so a pool of its own
 * (and the second HTTP client it loads) would only add to its start.
 */
function connectionOptions(ctx: Context): { caFile?: string; connections: 'shared' } {
  const raw = stringOption(ctx, 'ca-file');
  if (raw === undefined) return { connections: 'shared' };
  if (raw === '') throw new UsageError('--ca-file takes the path of a PEM file', ctx.command);
  return { caFile: raw, connections: 'shared' };
}

/** --tag NAME (handed to the library, which checks it). */
function tagOption(ctx: Context): { tag?: string } {
  const raw = stringOption(ctx, 'tag');
  return raw === undefined ? {} : { tag: raw };
}

/**
 * What names the snapshot: --tag NAME or --manifest DIGEST (then `<digest>` is left out
 * of the arguments), else the argument at `digestAt` among `names` (the others'). Returns
 * it and the other arguments, in order.
 */
function snapshotRef(ctx: Context, names: string[], digestAt: number): { ref: SnapshotRef; args: string[] } {
  const tag = stringOption(ctx, 'tag');
  const manifest = stringOption(ctx, 'manifest');
  if (tag !== undefined && manifest !== undefined) throw new UsageError(`${ctx.command} takes --tag or --manifest, not both`, ctx.command);
  if (tag === undefined && manifest === undefined) {
    const all = [...names.slice(0, digestAt), '<digest>', ...names.slice(digestAt)];
    need(ctx, all.length, `${all.join(' ')} (or --tag NAME or --manifest DIGEST instead of <digest>)`);
    checkOrder(ctx, all, digestAt);
    return { ref: ctx.args[digestAt]!, args: ctx.args.filter((_a, i) => i !== digestAt) };
  }
  need(ctx, names.length, `${names.join(' ')} with --${tag !== undefined ? 'tag' : 'manifest'} (and no <digest>)`);
  return { ref: tag !== undefined ? { tag } : { manifest: manifest! }, args: ctx.args };
}

/**
 * A usage error when the arguments look swapped: no digest where the digest goes, and a
 * snapshot digest (64 hex digits) elsewhere (pull and push take `<digest> <remote>`, cat
 * `<remote> <digest> <path>`).
 */
function checkOrder(ctx: Context, names: string[], digestAt: number): void {
  if (/^[0-9a-f]+$/.test(ctx.args[digestAt]!)) return;
  const at = ctx.args.findIndex((a, i) => i !== digestAt && /^[0-9a-f]{64}$/.test(a));
  if (at < 0) return;
  const nth = (i: number): string => ['first', 'second', 'third'][i] ?? `number ${i + 1}`;
  throw new UsageError(`${ctx.command} takes ${names.join(' ')}: the digest is the ${nth(digestAt)} argument, not the ${nth(at)}`, ctx.command);
}

/** Each retry said on stderr (clearing the progress line first), as it happens. */
function sayRetries(ctx: Context, command: string): { onRetry: (r: RetryNotice) => void } {
  return {
    onRetry: (r) => ctx.io.warn(`treeseal: ${command}: ${r.what} failed (${r.reason}); retry ${r.attempt} of ${r.retries} in ${(r.waitMs / 1000).toFixed(1)} s`),
  };
}

async function push(ctx: Context): Promise<void> {
  need(ctx, 2, '<digest> <remote>');
  checkOrder(ctx, ['<digest>', '<remote>'], 0);
  const store = await ctx.store();
  const line = ctx.io.progress('pushing');
  const r: PushReport = await store.push(ctx.args[0]!, ctx.args[1]!, {
    ...concurrency(ctx),
    ...timeout(ctx),
    ...connectionOptions(ctx),
    ...tagOption(ctx),
    insecure: flag(ctx, 'insecure'),
    mountFrom: listOption(ctx, 'mount-from'),
    onProgress: (p) => line.update(p),
    ...sayRetries(ctx, 'push'),
  });
  line.done();
  const what = r.existed
    ? `already there, nothing sent`
    : `${r.uploaded} of ${r.blobs} blobs uploaded (${bytes(r.bytesUploaded)}), ${r.mounted} mounted, ${r.skipped} already there`;
  const also = r.tags.length > 1 ? ` (also tagged ${r.tags.slice(1).join(', ')})` : '';
  ctx.io.emit(r, `pushed ${r.digest.slice(0, 12)} to ${r.remote}:${r.tag}${also}: ${what} in ${ms(r.elapsedMs)}; manifest ${r.manifestDigest}`);
}

async function pull(ctx: Context): Promise<void> {
  const { ref, args } = snapshotRef(ctx, ['<remote>'], 0);
  const store = await ctx.store();
  const line = ctx.io.progress('pulling');
  const sourceArg = stringOption(ctx, 'source');
  // A relative --source names a path below the working directory, as capture's does.
  const source = sourceArg === undefined ? {} : { source: resolve(sourceArg) };
  const r: PullReport = await store.pull(ref, args[0]!, { ...concurrency(ctx), ...timeout(ctx), ...connectionOptions(ctx), ...source, ...(flag(ctx, 'no-reuse') ? { reuseLocal: false } : {}), insecure: flag(ctx, 'insecure'), onProgress: (p) => line.update(p), ...sayRetries(ctx, 'pull') });
  line.done();
  const what = r.existed
    ? 'already in the store, nothing fetched'
    : `${r.downloaded} of ${r.blobs} blobs downloaded (${bytes(r.bytesDownloaded)}), ${r.reused} contents (${bytes(r.reusedBytes)}) taken from local snapshots, all verified`;
  const from = typeof ref === 'string' ? r.remote : 'tag' in ref ? `${r.remote}:${ref.tag}` : `${r.remote}@${r.manifestDigest}`;
  const moved = r.remoteDigest === r.digest ? '' : ` (${r.remoteDigest.slice(0, 12)} there, published for ${escapePath(source.source!)})`;
  ctx.io.emit(r, `pulled ${r.digest.slice(0, 12)} from ${from}${moved}: ${what} in ${ms(r.elapsedMs)}`);
}

async function cat(ctx: Context): Promise<void> {
  const { ref, args } = snapshotRef(ctx, ['<remote>', '<path>'], 1);
  // --json: the report instead of the bytes (fetched and proven all the same).
  // node:stream only here: loaded by the command that uses it, not by every command's start.
  const output = ctx.io.json ? new (await import('node:stream')).Writable({ write: (_chunk, _encoding, done) => done() }) : ctx.io.stdout;
  const r: CatReport = await catRemote(args[0]!, ref, args[1]!, { ...timeout(ctx), ...connectionOptions(ctx), insecure: flag(ctx, 'insecure'), output, ...sayRetries(ctx, 'cat') });
  if (ctx.io.json) ctx.io.emit(r, '');
}

export const PUSH: CommandSpec = {
  name: 'push',
  synopsis: 'push <digest> <remote>',
  summary: 'push a snapshot to an OCI registry',
  help: `usage: treeseal push <digest> <remote> [--tag NAME] [--concurrency N] [--insecure] [--timeout SECONDS] [--ca-file PEM] [--mount-from REPO]...

Pushes a snapshot to an OCI registry repository (<remote> is host[:port]/repository) as tag ts-<digest>,
and points a named tag at it too: --tag NAME, else one derived from the snapshot's revision (the
revision itself when it is a valid tag). Blobs the registry already has are skipped; an existing
ts-<digest> for the same snapshot sends no blob. The manifest carries the OCI annotations
org.opencontainers.image.created, .revision and .source; its digest is printed (pull --manifest).
  --tag NAME          the named tag ([a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}, not ts-<64 hex digits>)
  --concurrency N     blobs moved at once (default 8)
  --insecure          allow plain HTTP to a registry that is not on a loopback address
  --timeout SECONDS   longest wait for a response and for each chunk of a body (default 30); slower
                      than 1 KiB/s over that long also fails; a timed-out request is retried
  --ca-file PEM       CA certificates to trust besides Node's own (else TREESEAL_CA_FILE), for a
                      registry, token realm or HTTPS proxy signed by a private CA
  --mount-from REPO   a repository of the same registry to mount blobs from (repeatable)
Credentials: TREESEAL_REGISTRY_USER / TREESEAL_REGISTRY_PASSWORD, else ~/.docker/config.json (its
credential helpers, identity tokens and auths). HTTPS_PROXY, HTTP_PROXY and NO_PROXY are honoured.`,
  options: {
    tag: { type: 'string' },
    concurrency: { type: 'string' },
    insecure: { type: 'boolean' },
    timeout: { type: 'string' },
    'ca-file': { type: 'string' },
    'mount-from': { type: 'string', multiple: true },
  },
  run: push,
};

export const PULL: CommandSpec = {
  name: 'pull',
  synopsis: 'pull <digest> <remote>',
  summary: 'pull a snapshot from an OCI registry, verified',
  help: `usage: treeseal pull <digest> <remote> [--source DIR] [--no-reuse] [--concurrency N] [--insecure] [--timeout SECONDS] [--ca-file PEM]
       treeseal pull --tag NAME <remote> [options]
       treeseal pull --manifest DIGEST <remote> [options]

Pulls snapshot <digest> (all 64 digits) from an OCI registry repository into the store; or the
snapshot a tag names, or the one whose image manifest has digest DIGEST (sha256:..., which the
manifest's bytes must hash to). The snapshot digest (recomputed from the config) and every
file's bytes are checked before it is published; contents the store already holds are taken from
local snapshots instead of downloaded. Pulls of one snapshot into one store at the same time
download it once: the later ones wait, then find it published.
  --tag NAME          pull the snapshot tag NAME names
  --manifest DIGEST   pull the snapshot of the image manifest DIGEST
  --source DIR        publish it for source path DIR (the same tree checked out there): its digest is
                      the one a capture of DIR gives; proven as the registry holds it first
  --no-reuse          download every content, none taken from local snapshots: the registry cannot
                      tell from the blobs never asked for which of its contents the store holds
  --concurrency N     blobs moved at once (default 8)
  --insecure          allow plain HTTP to a registry that is not on a loopback address
  --timeout SECONDS   longest wait for a response and for each chunk of a body (default 30); slower
                      than 1 KiB/s over that long also fails; a timed-out request is retried
  --ca-file PEM       CA certificates to trust besides Node's own (else TREESEAL_CA_FILE), for a
                      registry, token realm or HTTPS proxy signed by a private CA
Credentials: TREESEAL_REGISTRY_USER / TREESEAL_REGISTRY_PASSWORD, else ~/.docker/config.json (its
credential helpers, identity tokens and auths). HTTPS_PROXY, HTTP_PROXY and NO_PROXY are honoured.`,
  options: {
    tag: { type: 'string' },
    manifest: { type: 'string' },
    source: { type: 'string' },
    'no-reuse': { type: 'boolean' },
    concurrency: { type: 'string' },
    insecure: { type: 'boolean' },
    timeout: { type: 'string' },
    'ca-file': { type: 'string' },
  },
  run: pull,
};

export const CAT: CommandSpec = {
  name: 'cat',
  synopsis: 'cat <remote> <digest> <path>',
  summary: 'print one file of a snapshot in an OCI registry (fetches only its bytes)',
  help: `usage: treeseal cat <remote> <digest> <path> [--insecure] [--timeout SECONDS] [--ca-file PEM]
       treeseal cat --tag NAME <remote> <path> [options]
       treeseal cat --manifest DIGEST <remote> <path> [options]

Writes the bytes of one file of a snapshot in an OCI registry repository to stdout, without pulling
the snapshot. By snapshot digest it fetches the image manifest and the whole snapshot manifest
(whose digest is recomputed); by --tag or --manifest the manifest is the anchor, and it fetches its
root document and the piece of each list that may record the file (plus, for a packed file, the
pack's index).
Then only the file's bytes: a Range read of the pack that holds them, or of their own blob. <path>
is the file as a clone shows it (a mount's as <target>/...). Nothing is written
before the bytes match the sha256 the snapshot records (a file over 64 MiB is proven in a temp
file first); a mismatch is SEAL_CORRUPT with nothing on stdout. A directory is SEAL_BAD_PATH, a
symlink SEAL_SYMLINK, a path not in the snapshot SEAL_UNAVAILABLE. No store is needed.
  --tag NAME          the snapshot tag NAME names
  --manifest DIGEST   the snapshot of the image manifest DIGEST
  --insecure          allow plain HTTP to a registry that is not on a loopback address
  --timeout SECONDS   longest wait for a response and for each chunk of a body (default 30)
  --ca-file PEM       CA certificates to trust besides Node's own (else TREESEAL_CA_FILE)
  --json              print what was fetched (digest, proof, size, sha256, blob, offset, bytes) instead of the file
Credentials: as push and pull take them.`,
  options: {
    tag: { type: 'string' },
    manifest: { type: 'string' },
    insecure: { type: 'boolean' },
    timeout: { type: 'string' },
    'ca-file': { type: 'string' },
  },
  run: cat,
};
