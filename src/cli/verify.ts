// verify.ts: `treeseal verify`: re-hashes snapshots against their manifests and reports every corrupt one.
import { SealError, type SnapshotStore } from '../index.js';
import type { CommandSpec, Context } from './command.js';
import { bytes } from './format.js';

function targets(store: SnapshotStore, args: string[]): string[] {
  return args.length === 0 ? store.list() : args.map((d) => store.resolveDigest(d));
}

async function run(ctx: Context): Promise<number> {
  const { io } = ctx;
  const store = await ctx.store();
  const digests = targets(store, ctx.args);
  const results: Record<string, unknown>[] = [];
  const lines: string[] = [];
  for (const digest of digests) {
    try {
      const snap = store.get(digest);
      const files = [...snap.entries, ...snap.mounts.flatMap((m) => m.entries)].filter((e) => e.kind === 'file');
      const line = io.progress(`verifying ${digest.slice(0, 12)}`, { entries: files.length, bytes: files.reduce((n, e) => n + e.size, 0) });
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
  io.emit({ ok: bad === 0, snapshots: results }, lines.join('\n'));
  return bad === 0 ? 0 : 1;
}

export const VERIFY: CommandSpec = {
  name: 'verify',
  synopsis: 'verify [<digest>...]',
  summary: 're-hash snapshots against their manifests',
  help: `usage: treeseal verify [<digest>...]

Re-hashes snapshots against their manifests; with no digest, every snapshot in the store.
Exits 1 when any snapshot is corrupt, after reporting them all.`,
  run,
};
