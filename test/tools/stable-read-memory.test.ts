// stable-read-memory.test.ts: readStable of a large file under a real address-space limit: the async call moves the bytes (no second copy), a file past the memory left is SEAL_LIMIT.
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync, truncateSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

import { readStableSync, writeFrozenFile } from '../../dist/index.js';
import { tempDir } from '../helpers.js';

const INDEX = resolve('dist/index.js');
const MIB = 1024 * 1024;

/**
 * Runs `body` (an async function body of an ES module that has readStable and
 * readStableSync) in a fresh node whose address space is limited, with prlimit, to what
 * it had mapped once its worker was running plus `headroomMiB`. Resolves with its stdout.
 */
function underLimit(headroomMiB: number, body: string): Promise<string> {
  const script = `
    import { readStable, readStableSync } from ${JSON.stringify(INDEX)};
    import { readFileSync } from 'node:fs';
    // Any call starts the worker (this one is refused there: too big).
    await readStable(process.execPath, { maxBytes: 1 }).catch(() => {});
    process.stdout.write(/VmSize:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1] + '\\n');
    await new Promise((r) => process.stdin.once('data', r));
    ${body}
    process.exit(0);`;
  return new Promise((done, failed) => {
    // The young generation kept at its least: its growth under the limit once ended the child with V8's fatal out-of-memory, the read never reached.
    const child = spawn(process.execPath, ['--max-semi-space-size=1', '--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    let limited = false;
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (limited || !out.includes('\n')) return;
      limited = true;
      const mappedKb = Number(out.slice(0, out.indexOf('\n')));
      const limit = spawn('prlimit', ['--pid', String(child.pid), `--as=${mappedKb * 1024 + headroomMiB * MIB}`], { stdio: 'inherit' });
      limit.on('error', failed);
      limit.on('close', (code) => (code === 0 ? child.stdin.end('go\n') : failed(new Error(`prlimit exited ${code}`))));
    });
    child.on('error', failed);
    child.on('close', (code) => (code === 0 ? done(out.slice(out.indexOf('\n') + 1)) : failed(new Error(`child exited ${code}: ${out}`))));
  });
}

/** prlimit (util-linux) sets the child's limit; without it these tests cannot run (under CI=true that is a failure). */
function prlimitAvailable(): boolean {
  const found = spawnSync('prlimit', ['--version']).status === 0;
  if (!found && process.env.CI === 'true') throw new Error('CI=true but prlimit is not installed (apt-get install -y util-linux; .ci/run does)');
  return found;
}

describe.skipIf(!prlimitAvailable())('readStable and memory', () => {
  it('an async read of 256 MiB fits in 416 MiB more: the bytes are moved from the worker, not copied (a copy needed 512)', async () => {
    const path = join(tempDir(), 'sparse');
    writeFileSync(path, '');
    truncateSync(path, 256 * MIB);
    const out = await underLimit(416, `
      const r = await readStable(${JSON.stringify(path)}, { maxBytes: 2 ** 30 });
      console.log(r.bytes.length, r.bytes.buffer.byteLength);`);
    expect(out).toBe(`${256 * MIB} ${256 * MIB + 1}\n`);
  });

  it('a file past the memory left is SEAL_LIMIT naming it, sync and async alike', async () => {
    const path = join(tempDir(), 'sparse');
    writeFileSync(path, '');
    truncateSync(path, 512 * MIB);
    const out = await underLimit(192, `
      for (const read of [() => readStableSync(${JSON.stringify(path)}, { maxBytes: 2 ** 30 }), () => readStable(${JSON.stringify(path)}, { maxBytes: 2 ** 30 })]) {
        try { await read(); console.log('read'); } catch (e) { console.log(e.code, e.path === ${JSON.stringify(path)}, e.message); }
      }`);
    const line = `SEAL_LIMIT true file of ${512 * MIB} bytes does not fit in this process's memory (Array buffer allocation failed): ${path}\n`;
    expect(out).toBe(line + line);
  });

  it('the bytes of a sync read stay the caller\'s when passed to an async call (they are moved only out of the worker)', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'f'), 'kept bytes');
    const r = readStableSync(join(dir, 'f'), { maxBytes: 100 });
    await writeFrozenFile(join(dir, 'g'), r.bytes);
    expect(r.bytes.toString()).toBe('kept bytes');
  });
});
