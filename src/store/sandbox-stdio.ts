// sandbox-stdio.ts: a sandboxed command's stdio: a regular file the caller hands it (or lets it inherit) reaches it through a pipe this process relays, never as the file, which it could open again through /proc.
import type { ChildProcess } from 'node:child_process';
import { createReadStream, fstatSync, writeSync } from 'node:fs';
import type { Readable } from 'node:stream';

/** One of the three stdio slots spawnSandboxed takes. */
export type StdioSlot = 'inherit' | 'pipe' | 'ignore' | number;

/** The caller's fd behind a slot (its own 0, 1 or 2 for 'inherit', the fd given), or undefined ('pipe', 'ignore'). */
function callerFd(slot: StdioSlot, i: number): number | undefined {
  if (slot === 'inherit') return i;
  return typeof slot === 'number' ? slot : undefined;
}

/**
 * Which slots are relayed, and what spawn is given for the three: a slot whose fd is a
 * regular file becomes a pipe. The command could open the file itself again through
 * `/proc/self/fd` with whatever its permissions allow the command's user: read back the
 * log it was handed to append to (another arm's, where arms share one), empty it, or
 * write the input file it was handed to read. A terminal, a pipe, a socket or `/dev/null`
 * is handed over as it is (a terminal stays one to the command, and bubblewrap's new
 * session keeps it from injecting input).
 */
export function relayedStdio(three: readonly StdioSlot[]): { spawn: StdioSlot[]; files: (number | undefined)[] } {
  const files = three.map((slot, i) => {
    const fd = callerFd(slot, i);
    if (fd === undefined) return undefined;
    try {
      return fstatSync(fd).isFile() ? fd : undefined;
    } catch {
      // Not open: spawn says so, as before.
      return undefined;
    }
  });
  return { spawn: three.map((slot, i) => (files[i] === undefined ? slot : 'pipe')), files };
}

/** Writes all of `chunk` to fd (a regular file: a write may be short, never EAGAIN). */
function writeFully(fd: number, chunk: Buffer): void {
  for (let at = 0; at < chunk.length; ) at += writeSync(fd, chunk, at);
}

/**
 * Starts the relays of the slots relayedStdio turned into pipes: what the command writes
 * to stdout or stderr is written to the caller's file as it comes, synchronously, so it
 * is all there by the child's 'close'; the caller's stdin file is read into the command's
 * stdin until either ends. A write that fails (the disk full, the fd closed by the
 * caller) is said once as a warning and the rest is read and dropped, so the command is
 * never blocked on a full pipe. A spawn that failed at once made no pipes: nothing starts.
 */
export function startRelays(child: ChildProcess, files: readonly (number | undefined)[]): void {
  const stdio = child.stdio as (Readable | null)[] | undefined;
  for (const i of [1, 2]) {
    const fd = files[i];
    const from = stdio?.[i];
    if (fd === undefined || from == null) continue;
    let failed = false;
    from.on('data', (chunk: Buffer) => {
      if (failed) return;
      try {
        writeFully(fd, chunk);
      } catch (err) {
        failed = true;
        process.emitWarning(`the sandboxed command's ${i === 1 ? 'stdout' : 'stderr'} could not be written to fd ${fd}; the rest of it is dropped: ${(err as Error).message}`, { code: 'TREESEAL_STDIO_LOST' });
      }
    });
  }
  const input = files[0];
  const to = child.stdin;
  if (input === undefined || to == null) return;
  // The command may end, or close its stdin, before it has read it all (EPIPE): what is left stays unread.
  to.on('error', () => {});
  const source = createReadStream('', { fd: input, autoClose: false });
  source.on('error', () => to.end());
  source.pipe(to);
  // Stopped, never destroyed: a ReadStream's destroy closes its fd whatever autoClose says, and the fd is the caller's.
  child.once('exit', () => {
    source.unpipe(to);
    source.pause();
  });
}
