// fd.ts: an owned file descriptor with idempotent close and Symbol.dispose.
import { sys as nativeSys, type Sys } from './native.js';

export class Fd {
  #fd: number;
  readonly #sys: Sys;

  constructor(fd: number, sys: Sys = nativeSys) {
    if (!Number.isInteger(fd) || fd < 0) throw new RangeError(`not a file descriptor: ${fd}`);
    this.#fd = fd;
    this.#sys = sys;
  }

  /** The descriptor number; throws once closed so a stale number is never reused by mistake. */
  get fd(): number {
    if (this.#fd < 0) throw new Error('file descriptor is closed');
    return this.#fd;
  }

  get closed(): boolean {
    return this.#fd < 0;
  }

  /** Closes once; later calls do nothing. */
  close(): void {
    const fd = this.#fd;
    if (fd < 0) return;
    this.#fd = -1;
    this.#sys.close(fd);
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
