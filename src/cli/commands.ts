// commands.ts: what each treeseal subcommand does, and what it prints (a summary, or one JSON document).
import { readdirSync } from 'node:fs';
import { resolve } from 'node:path';

import {
  SealError,
  SnapshotStore,
  freeze,
  thaw,
  type ManifestEntry,
  type MountDeclaration,
  type ReflinkMode,
  type SnapshotData,
} from '../index.js';
import { bytes, ms, progressLine } from './format.js';
import { pull, push, type RemoteValues } from './remote.js';
import { UsageError, emit, need, type Io } from './shared.js';

export { UsageError, type Io } from './shared.js';

export interface Values extends RemoteValues {
  store: string;
  copy: string[];
  mount: string[];
  revision: string | undefined;
  reflink: string | undefined;
  fallbackBytes: string | undefined;
  statCache: boolean;
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

function summary(data: SnapshotData): Record<string, unknown> {
  return {
    digest: data.digest,
    manifestDigest: data.manifestDigest,
    source: data.source,
    revision: data.revision,
    declarations: data.declarations,
    mounts: data.mounts.map((m) => ({ source: m.source, target: m.target, kind: m.kind, entries: m.entries.length })),
    entries: data.entries.length + data.mounts.reduce((n, m) => n + m.entries.length, 0),
    totalBytes: data.totalBytes,
    mountBinding: data.mountBinding,
  };
}

function parseMount(spec: string): MountDeclaration {
  const cut = spec.indexOf(':');
  const source = cut < 0 ? spec : spec.slice(0, cut);
  const target = cut < 0 ? spec : spec.slice(cut + 1);
  if (source === '' || target === '') throw new UsageError(`--mount takes SRC[:TARGET], not ${JSON.stringify(spec)}`, 'capture');
  return { source, target };
}

async function capture(store: SnapshotStore, args: string[], v: Values, io: Io): Promise<void> {
  need(args, 1, 'capture', 'one <source> directory');
  const source = resolve(args[0]!);
  let copy = v.copy;
  if (copy.length === 0 && v.mount.length === 0) {
    try {
      copy = readdirSync(source).sort();
    } catch (err) {
      throw new SealError('SEAL_UNAVAILABLE', `source is unavailable: ${source}: ${(err as Error).message}`, { cause: err });
    }
  }
  const line = progressLine('capturing', io.err);
  const snap = await store.capture({
    source,
    copy,
    mounts: v.mount.map(parseMount),
    ...(v.revision === undefined ? {} : { revision: v.revision }),
    statCache: v.statCache,
    onProgress: (p) => line.update(p),
  });
  line.done();
  const data = snap.toJSON();
  const s = summary(data);
  const r = snap.captureReport ?? { files: 0, reusedFiles: 0, built: true };
  const reuse = v.statCache ? `${r.reusedFiles} of ${plural(r.files, 'file')} unchanged (stat cache)${r.built ? '' : ', snapshot already stored'}` : 'off (--no-stat-cache)';
  emit(
    io,
    { ...s, root: snap.root, files: r.files, reusedFiles: r.reusedFiles, built: r.built },
    [
      `captured ${source}`,
      `  digest    ${data.digest}`,
      `  manifest  ${data.manifestDigest}`,
      `  entries   ${String(s.entries)}`,
      `  bytes     ${data.totalBytes} (${bytes(data.totalBytes)})`,
      `  reused    ${reuse}`,
      `  root      ${snap.root}`,
    ].join('\n'),
  );
}

async function materialize(store: SnapshotStore, args: string[], v: Values, io: Io): Promise<void> {
  need(args, 2, 'materialize', '<digest> <clone>');
  const reflink = v.reflink ?? 'auto';
  if (reflink !== 'auto' && reflink !== 'always' && reflink !== 'never') {
    throw new UsageError(`--reflink must be auto, always or never, not ${JSON.stringify(reflink)}`, 'materialize');
  }
  let fallbackBytes: number | undefined;
  if (v.fallbackBytes !== undefined) {
    fallbackBytes = Number(v.fallbackBytes);
    if (!/^\d+$/.test(v.fallbackBytes) || !Number.isSafeInteger(fallbackBytes)) {
      throw new UsageError(`--fallback-bytes takes a byte count, not ${JSON.stringify(v.fallbackBytes)}`, 'materialize');
    }
  }
  const snap = store.get(args[0]!);
  const clone = resolve(args[1]!);
  const files = snap.entries.filter((e) => e.kind === 'file');
  const line = progressLine('materializing', io.err, { entries: files.length, bytes: files.reduce((n, e) => n + e.size, 0) });
  const report = await snap.materialize(clone, {
    reflink: reflink as ReflinkMode,
    ...(fallbackBytes === undefined ? {} : { fallbackBytes }),
    onProgress: (p) => line.update(p),
  });
  line.done();
  emit(
    io,
    { digest: snap.digest, clone, ...report },
    `materialized ${snap.digest.slice(0, 12)} into ${clone}: ${plural(report.files, 'file')}, ${plural(report.directories, 'directory', 'directories')} ` +
      `(${report.reflinked} reflinked, ${report.copied} copied, ${bytes(report.bytesCopied)} buffered) in ${ms(report.elapsedMs)}`,
  );
}

async function verify(store: SnapshotStore, args: string[], _v: Values, io: Io): Promise<number> {
  const digests = args.length === 0 ? store.list() : args.map((d) => store.resolveDigest(d));
  const results: Record<string, unknown>[] = [];
  const lines: string[] = [];
  for (const digest of digests) {
    try {
      const snap = store.get(digest);
      const files = [...snap.entries, ...snap.mounts.flatMap((m) => m.entries)].filter((e) => e.kind === 'file');
      const line = progressLine(`verifying ${digest.slice(0, 12)}`, io.err, { entries: files.length, bytes: files.reduce((n, e) => n + e.size, 0) });
      const report = await snap.verify({ onProgress: (p) => line.update(p) });
      line.done();
      results.push({ digest, ok: true, ...report });
      lines.push(`ok   ${digest}  ${report.entries} entries, ${bytes(report.bytes)}`);
    } catch (err) {
      if (!(err instanceof SealError)) throw err;
      results.push({ digest, ok: false, error: { code: err.code, message: err.message } });
      lines.push(`BAD  ${digest}  ${err.code}: ${err.message}`);
    }
  }
  const bad = results.filter((r) => r.ok === false).length;
  lines.push(`${digests.length - bad} ok, ${bad} corrupt`);
  emit(io, { ok: bad === 0, snapshots: results }, lines.join('\n'));
  return bad === 0 ? 0 : 1;
}

function ls(store: SnapshotStore, args: string[], _v: Values, io: Io): void {
  need(args, 0, 'ls', 'no arguments');
  const rows: Record<string, unknown>[] = [];
  const lines: string[] = [];
  for (const digest of store.list()) {
    try {
      const s = summary(store.get(digest).toJSON());
      rows.push(s);
      const decl = [...(s.declarations as string[]), ...(s.mounts as { target: string }[]).map((m) => `mount:${m.target}`)].join(',');
      lines.push(`${digest.slice(0, 12)}  ${String(s.entries).padStart(7)} entries  ${bytes(s.totalBytes as number).padStart(10)}  ${String(s.source)}  [${decl}]${s.revision ? `  @${String(s.revision)}` : ''}`);
    } catch (err) {
      if (!(err instanceof SealError)) throw err;
      rows.push({ digest, error: { code: err.code, message: err.message } });
      lines.push(`${digest.slice(0, 12)}  ${err.code}: ${err.message}`);
    }
  }
  emit(io, rows, lines.length === 0 ? 'no snapshots' : lines.join('\n'));
}

function entryLine(e: ManifestEntry): string {
  const mode = e.mode.toString(8).padStart(4, '0');
  const tail = e.kind === 'symlink' ? ` -> ${e.link_target}` : '';
  return `${e.kind.padEnd(9)} ${mode} ${String(e.size).padStart(10)} ${e.sha256 === '' ? '-'.repeat(64) : e.sha256}  ${e.path}${tail}`;
}

function show(store: SnapshotStore, args: string[], _v: Values, io: Io): void {
  need(args, 1, 'show', 'one <digest>');
  const data = store.get(args[0]!).toJSON();
  const lines = [`snapshot ${data.digest}`, `source   ${data.source}`, `revision ${data.revision === '' ? '(none)' : data.revision}`, `manifest ${data.manifestDigest}`, '', ...data.entries.map(entryLine)];
  data.mounts.forEach((m, i) => {
    lines.push('', `mount ${String(i).padStart(5, '0')}: ${m.source} -> ${m.target}`, ...m.entries.map(entryLine));
  });
  emit(io, data, lines.join('\n'));
}

function keyed(data: SnapshotData): Map<string, ManifestEntry> {
  const out = new Map<string, ManifestEntry>();
  for (const e of data.entries) out.set(e.path, e);
  for (const m of data.mounts) for (const e of m.entries) out.set(`[mount ${m.target}] ${e.path}`, e);
  return out;
}

function diff(store: SnapshotStore, args: string[], _v: Values, io: Io): void {
  need(args, 2, 'diff', '<a> <b>');
  const a = keyed(store.get(args[0]!).toJSON());
  const b = keyed(store.get(args[1]!).toJSON());
  const added = [...b.keys()].filter((k) => !a.has(k)).sort();
  const removed = [...a.keys()].filter((k) => !b.has(k)).sort();
  const changed = [...a.keys()]
    .filter((k) => {
      const x = b.get(k);
      const y = a.get(k)!;
      return x !== undefined && (x.kind !== y.kind || x.sha256 !== y.sha256 || x.size !== y.size || x.mode !== y.mode || x.link_target !== y.link_target);
    })
    .sort();
  const lines = [...added.map((p) => `+ ${p}`), ...removed.map((p) => `- ${p}`), ...changed.map((p) => `~ ${p}`)];
  lines.push(`${added.length} added, ${removed.length} removed, ${changed.length} changed`);
  emit(io, { added, removed, changed }, lines.join('\n'));
}

function rm(store: SnapshotStore, args: string[], _v: Values, io: Io): void {
  if (args.length === 0) throw new UsageError('rm takes one or more <digest>', 'rm');
  const removed = args.map((d) => store.remove(d));
  emit(io, { removed }, removed.map((d) => `removed ${d}`).join('\n'));
}

function gc(store: SnapshotStore, args: string[], _v: Values, io: Io): void {
  need(args, 0, 'gc', 'no arguments');
  const swept = store.gc();
  emit(io, { swept }, `swept ${swept} stale ${swept === 1 ? 'build' : 'builds'}`);
}

async function freezeCmd(args: string[], io: Io, thawing: boolean): Promise<void> {
  const command = thawing ? 'thaw' : 'freeze';
  need(args, 1, command, 'one <dir>');
  const dir = resolve(args[0]!);
  await (thawing ? thaw(dir) : freeze(dir));
  emit(io, { [thawing ? 'thawed' : 'frozen']: dir }, `${thawing ? 'thawed' : 'froze'} ${dir}`);
}

export const COMMANDS = ['capture', 'materialize', 'verify', 'ls', 'show', 'diff', 'rm', 'gc', 'push', 'pull', 'freeze', 'thaw'] as const;
export type Command = (typeof COMMANDS)[number];

type Handler = (store: SnapshotStore, args: string[], v: Values, io: Io) => Promise<number | void> | number | void;

const STORE_COMMANDS: Record<Exclude<Command, 'freeze' | 'thaw'>, Handler> = { capture, materialize, verify, ls, show, diff, rm, gc, push, pull };

/** Runs one subcommand; returns the exit status. */
export async function run(command: Command, args: string[], v: Values, io: Io): Promise<number> {
  if (command === 'freeze' || command === 'thaw') {
    await freezeCmd(args, io, command === 'thaw');
    return 0;
  }
  const store = await SnapshotStore.open(v.store);
  try {
    return (await STORE_COMMANDS[command](store, args, v, io)) ?? 0;
  } finally {
    await store.close();
  }
}
