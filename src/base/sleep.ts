// sleep.ts: sleepSync, a blocking sleep for the synchronous paths (a thread that must not return to its event loop while it waits).

/** The word every sleep waits on: nothing ever changes it, so a wait lasts its whole timeout. */
const never = new Int32Array(new SharedArrayBuffer(4));

/** Blocks the calling thread for `ms` milliseconds (a fraction is rounded up by the kernel's timer); 0 or less: returns at once. */
export function sleepSync(ms: number): void {
  if (ms > 0) Atomics.wait(never, 0, 0, ms);
}
