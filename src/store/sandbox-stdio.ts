// sandbox-stdio.ts: a sandboxed command's stdout and stderr: a regular file the caller hands it (or lets it inherit) reaches it through a pipe this process relays, never as the file, which it could open again through /proc.
import type { ChildProcess } from 'node:child_process';
import { createReadStream, fstatSync, writeSync } from 'node:fs';
import type { Readable } from 'node:stream';

import type { Sys } from '../sys/native.js';

/** One of the three stdio slots spawnSandboxed takes. */
export type StdioSlot = 'inherit' | 'pipe' | 'ignore' | number;

/** The caller's fd behind a slot (its own 0, 1 or 2 for 'inherit', the fd given), or undefined ('pipe', 'ignore'). */
function callerFd(slot: StdioSlot, i: number): number | undefined {
  if (slot === 'inherit') return i;
  return typeof slot === 'number' ? slot : undefined;
}

/** The regular file behind a slot: its fd and identity, or undefined. */
function fileBehind(slot: StdioSlot, i: number): { fd: number; dev: number; ino: number } | undefined {
  const fd = callerFd(slot, i);
  if (fd === undefined) return undefined;
  try {
    const st = fstatSync(fd);
    return st.isFile() ? { fd, dev: st.dev, ino: st.ino } : undefined;
  } catch {
    // Not open: spawn says so, as before.
    return undefined;
  }
}

/** Writes all of `chunk` to fd (a regular file: a write may be short, never EAGAIN). */
function writeFully(fd: number, chunk: Buffer): void {
  for (let at = 0; at < chunk.length; ) at += writeSync(fd, chunk, at);
}

/**
 * How a sandboxed command's stdout and stderr are handed over. A slot whose fd is a regular
 * file becomes a pipe this process relays to the file: the command could open the file
 * itself again through `/proc/self/fd` with whatever its permissions allow the command's
 * user, and read back the log it was handed to append to (another arm's, where arms share
 * one) or empty it. Both slots on one file (a harness's `> log 2>&1`) share one pipe, so
 * their lines stay in the order the command wrote them. stdin, a terminal, a pipe, a socket
 * or `/dev/null` is handed over as it is (a relay of a stdin file would read ahead through
 * its shared offset: a shell's `while read t; do treeseal run …; done < tasks` lost every
 * task after the first).
 */
export class StdioRelay {
  /** What spawn is given for the three slots. */
  readonly spawn: StdioSlot[];
  /** The caller's files, by slot (1, 2), that the child's own pipes are relayed to. */
  readonly #files: (number | undefined)[] = [undefined, undefined, undefined];
  /** One pipe of this process's for both slots: its ends, and the file it is relayed to. */
  #shared: { read: number; write: number; to: number } | undefined;
  readonly #ended: Promise<void>[] = [];

  constructor(
    readonly sys: Sys,
    three: readonly StdioSlot[],
  ) {
    const out = fileBehind(three[1]!, 1);
    const err = fileBehind(three[2]!, 2);
    this.spawn = [...three];
    if (out !== undefined && err !== undefined && out.dev === err.dev && out.ino === err.ino) {
      const [read, write] = sys.pipe2(0);
      this.#shared = { read, write, to: out.fd };
      this.spawn[1] = write;
      this.spawn[2] = write;
      return;
    }
    for (const [i, file] of [[1, out], [2, err]] as const) {
      if (file === undefined) continue;
      this.#files[i] = file.fd;
      this.spawn[i] = 'pipe';
    }
  }

  /**
   * Once spawn has returned (or thrown): the write end of a shared pipe closed here (the
   * child has its own copies), and the relays started. What the command writes is written
   * to the caller's file as it comes, synchronously; the child's 'close' (and so its
   * `commandExit`) waits until all of it is there. A write that fails (the disk full) is
   * said once as a warning and the rest is read and dropped, so the command is never
   * blocked on a full pipe. A spawn that failed at once made no pipes of its own.
   */
  start(child: ChildProcess | undefined): void {
    if (this.#shared !== undefined) {
      this.sys.close(this.#shared.write);
      const source = createReadStream('', { fd: this.#shared.read });
      this.#relay(source, this.#shared.to, 'stdout and stderr');
    }
    const stdio = child?.stdio as (Readable | null)[] | undefined;
    for (const i of [1, 2] as const) {
      const fd = this.#files[i];
      const from = stdio?.[i];
      if (fd !== undefined && from != null) this.#relay(from, fd, i === 1 ? 'stdout' : 'stderr');
    }
    if (child !== undefined && this.#ended.length > 0) holdClose(child, Promise.all(this.#ended));
  }

  /** After a spawn that threw: the shared pipe's ends closed. */
  abandon(): void {
    if (this.#shared === undefined) return;
    this.sys.close(this.#shared.write);
    this.sys.close(this.#shared.read);
    this.#shared = undefined;
  }

  #relay(from: Readable, fd: number, what: string): void {
    let failed = false;
    from.on('data', (chunk: Buffer) => {
      if (failed) return;
      try {
        writeFully(fd, chunk);
      } catch (err) {
        failed = true;
        process.emitWarning(`the sandboxed command's ${what} could not be written to fd ${fd}; the rest of it is dropped: ${(err as Error).message}`, { code: 'TREESEAL_STDIO_LOST' });
      }
    });
    this.#ended.push(
      new Promise<void>((resolve) => {
        from.once('close', resolve);
        from.once('error', () => resolve());
      }),
    );
  }
}

/** Defers the child's 'close' until `done`: every byte relayed is in the caller's file before anyone hears the command ended. */
function holdClose(child: ChildProcess, done: Promise<unknown>): void {
  const emit = child.emit.bind(child) as (event: string | symbol, ...args: unknown[]) => boolean;
  child.emit = ((event: string | symbol, ...args: unknown[]): boolean => {
    if (event !== 'close') return emit(event, ...args);
    void done.then(() => emit(event, ...args));
    return child.listenerCount('close') > 0;
  }) as ChildProcess['emit'];
}
