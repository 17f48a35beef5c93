// fd.ts: an owned file descriptor with idempotent close and Symbol.dispose, for `using`.
import { sys as nativeSys, type Sys } from './native.js';

/** The largest descriptor: fds are C ints, as the addon checks them. */
const FD_MAX = 2 ** 31 - 1;

/** The addon's (and node:fs's) refusal of a number that is not a descriptor. */
function fdOutOfRange(fd: number): RangeError {
  const must = Number.isInteger(fd) ? `>= 0 && <= ${FD_MAX}` : 'an integer';
  const err = new RangeError(`The value of "fd" is out of range. It must be ${must}. Received ${String(fd)}`);
  Object.defineProperty(err, 'code', { value: 'ERR_OUT_OF_RANGE', enumerable: true, writable: true, configurable: true });
  return err;
}

/**
 * One file descriptor and who closes it. `using fd = new Fd(sys.openat(...))` closes it
 * when the scope ends, whatever happens; `release()` hands it on; `Fd.borrow(n)` wraps a
 * descriptor someone else owns (never closed here).
 */
export class Fd {
  #fd: number;
  readonly #sys: Sys;
  readonly #owned: boolean;

  constructor(fd: number, sys: Sys = nativeSys, owned = true) {
    if (!Number.isInteger(fd) || fd < 0 || fd > FD_MAX) throw fdOutOfRange(fd);
    this.#fd = fd;
    this.#sys = sys;
    this.#owned = owned;
  }

  /** A descriptor owned elsewhere: usable like an owned one, never closed by this object. */
  static borrow(fd: number, sys: Sys = nativeSys): Fd {
    return new Fd(fd, sys, false);
  }

  /** The descriptor number; throws once closed so a stale number is never reused by mistake. */
  get fd(): number {
    if (this.#fd < 0) throw new Error('file descriptor is closed');
    return this.#fd;
  }

  get closed(): boolean {
    return this.#fd < 0;
  }

  /** Closes once (a borrowed descriptor is only forgotten); later calls do nothing. A failed close throws. */
  close(): void {
    const fd = this.#fd;
    if (fd < 0) return;
    this.#fd = -1;
    if (this.#owned) this.#sys.close(fd);
  }

  /** Stops owning the descriptor and returns it: the caller (or whoever it hands it to) closes it. */
  release(): number {
    const fd = this.fd;
    this.#fd = -1;
    return fd;
  }

  /**
   * Closes at the end of a `using` scope. A failing close is ignored here: it must never
   * mask the error that is leaving the scope (call close() to see it).
   */
  [Symbol.dispose](): void {
    try {
      this.close();
    } catch {
      // EBADF/EIO on close: the descriptor is gone either way
    }
  }
}
