// sandbox-status.ts: a sandboxed command's exit status as bubblewrap reports it (--json-status-fd), told apart from bubblewrap failing before the command ran.
import type { ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import type { Readable } from 'node:stream';

import { SealError } from '../base/errors.js';
import { escapePath } from '../base/paths.js';

/** What spawnSandboxed resolves with: the ChildProcess of bubblewrap, and the command's own exit status. */
export type SandboxedChild = ChildProcess & {
  /**
   * The command's exit status once bubblewrap has ended (128 + the signal that killed it,
   * as a shell reports it; 128 + the signal too when bubblewrap itself was killed). Rejects
   * with SEAL_UNAVAILABLE when bubblewrap exited without running the command (it could not
   * set up the sandbox, or not execute the command); its own message went to the command's stderr.
   */
  readonly commandExit: Promise<number>;
};

/** The most of bubblewrap's status documents kept (two of a few hundred bytes each are all it writes). */
const STATUS_BYTES = 64 * 1024;

/** The exit code bubblewrap's status documents (one JSON object a line) report for the command; undefined where none does. */
export function exitCodeIn(text: string): number | undefined {
  let code: number | undefined;
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let doc: unknown;
    try {
      doc = JSON.parse(line);
    } catch {
      continue;
    }
    if (doc === null || typeof doc !== 'object' || !Object.hasOwn(doc, 'exit-code')) continue;
    const value = (doc as Record<string, unknown>)['exit-code'];
    if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 255) code = value;
  }
  return code;
}

/** 128 + the signal's number, as a shell reports a child a signal killed. */
export function signalStatus(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/**
 * Reads bubblewrap's status documents from `status` (the pipe its --json-status-fd writes
 * to) and gives child its `commandExit`. bubblewrap writes the command's exit code only when
 * the command ran and ended; where it exits with a status of its own and wrote none, the
 * command never ran, whatever status it exited with (1: the same a command may exit with).
 */
export function watchCommandExit(child: ChildProcess, status: Readable | null | undefined, bwrap: string): SandboxedChild {
  const chunks: Buffer[] = [];
  let bytes = 0;
  status?.on('data', (chunk: Buffer) => {
    if (bytes >= STATUS_BYTES) return;
    chunks.push(chunk);
    bytes += chunk.length;
  });
  status?.on('error', () => {});
  const commandExit = new Promise<number>((resolve, reject) => {
    // 'close': after every stdio stream of the child ended, the status pipe's last document read.
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
      if (signal !== null) return resolve(signalStatus(signal));
      const reported = exitCodeIn(Buffer.concat(chunks).toString('utf8'));
      if (reported !== undefined) return resolve(reported);
      reject(
        new SealError(
          'SEAL_UNAVAILABLE',
          `the command did not run: bubblewrap (${escapePath(bwrap)}) exited ${code ?? '?'} before it ran it: it could not set up the sandbox (user namespaces refused to this user, a kernel without seccomp filters, a mount it could not make) or not execute the command (not found in the sandbox); its own message went to the command's stderr`,
        ),
      );
    });
  });
  // Never an unhandled rejection for a caller that waits on 'close' alone; one that awaits it still gets the error.
  commandExit.catch(() => {});
  Object.defineProperty(child, 'commandExit', { value: commandExit, enumerable: true });
  return child as SandboxedChild;
}
