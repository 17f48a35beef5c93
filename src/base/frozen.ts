// frozen.ts: the permission bits a frozen file gets: read-only for its owner, executable kept.

/** 0500 for a file whose mode has any execute bit, else 0400. */
export function frozenFileMode(mode: number): number {
  return mode & 0o111 ? 0o500 : 0o400;
}
