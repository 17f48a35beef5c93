// progress.ts: progress reports (entries, bytes) and their throttling to one call per interval.
export interface Progress {
  entries: number;
  bytes: number;
}

export type ProgressFn = (p: Progress) => void;

/** Wraps fn so it runs at most once per intervalMs (and always when forced); undefined stays a no-op. */
export function throttled(fn: ProgressFn | undefined, intervalMs = 100): (entries: number, bytes: number, force?: boolean) => void {
  if (fn === undefined) return () => {};
  let last = 0;
  return (entries, bytes, force = false) => {
    const now = Date.now();
    if (!force && now - last < intervalMs) return;
    last = now;
    fn({ entries, bytes });
  };
}
