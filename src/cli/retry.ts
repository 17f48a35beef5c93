// retry.ts: a command run again after a retryable failure (SEAL_CHANGED, a root renamed away mid-capture, a clone busy with another call), with a short backoff, each retry said on stderr.
import { setTimeout as sleep } from 'node:timers/promises';

import { SealError } from '../index.js';
import type { Io } from './io.js';

export const DEFAULT_RETRIES = 2;
const FIRST_WAIT_MS = 100;
const MAX_WAIT_MS = 2000;

/** Runs fn; after a retryable SealError, waits 100 ms, 200 ms, … and runs it again, at most `retries` more times. */
export async function withRetries<T>(fn: () => Promise<T>, retries: number, io: Io): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof SealError) || !err.retryable || attempt > retries) throw err;
      const wait = Math.min(FIRST_WAIT_MS * 2 ** (attempt - 1), MAX_WAIT_MS);
      io.warn(`treeseal: ${err.code}: ${err.message}; retrying in ${wait} ms (${attempt} of ${retries})`);
      await sleep(wait);
    }
  }
}
