// clone-ledger.ts: what a materialize made in a clone (path, kind, inode, size, mode, mtime, ctime), kept in the store keyed by the clone directory's device and inode, never in the clone.
import { createHash } from 'node:crypto';
import { dirname } from 'node:path';

import { openChildDir, openRealDir, own } from '../base/fd.js';
import { readAllAt } from '../base/io.js';
import { isDir, isLink, isReg } from '../sys/constants.js';
import type { Stat, Sys } from '../sys/native.js';
import { CLONES_DIR, TMP_DIR } from './layout.js';
import { saveStoreFile } from './stat-cache-file.js';

const LEDGER_VERSION = 1;
const MAX_LEDGER_BYTES = 1024 * 1024 * 1024;
const DIGEST = /^[0-9a-f]{64}$/;

type Kind = 'f' | 'd' | 'l';

/** One entry as the materialize (or reset) that made it left it. */
interface LedgerRecord {
  kind: Kind;
  ino: bigint;
  size: number;
  mode: number;
  mtimeNs: bigint;
  ctimeNs: bigint;
}

function kindOf(mode: number): Kind | undefined {
  if (isReg(mode)) return 'f';
  if (isDir(mode)) return 'd';
  if (isLink(mode)) return 'l';
  return undefined;
}

/** "dev:ino" of a stat. */
function idText(st: Stat): string {
  return `${st.dev}:${st.ino}`;
}

/** The ledger's file name in clones/: the clone directory's device and inode. */
function ledgerName(cloneDir: Stat): string {
  return `${cloneDir.dev}-${cloneDir.ino}.ledger`;
}

/**
 * A clone's ledger: the identity of every entry a materialize made in its copy roots,
 * and which snapshot, store and clone directory it belongs to. A file whose whole
 * identity (device, inode, size, mode, mtime and ctime) is the one recorded is what
 * the materialize made: an unprivileged agent cannot set a ctime, and every write,
 * chmod, rename or link moves it.
 */
export class Ledger {
  readonly records = new Map<string, LedgerRecord>();

  constructor(
    /** The snapshot materialized. */
    readonly digest: string,
    /** The clone directory's device: every entry is on it. */
    readonly dev: bigint,
    /** Every file was made by a buffered copy (reflink 'never'): none shares its extents with the store. */
    readonly independent: boolean,
  ) {}

  /** Records path as st shows it now (nothing for a kind a materialize never makes). */
  record(path: string, st: Stat): void {
    const kind = kindOf(st.mode);
    if (kind === undefined) return;
    this.records.set(path, { kind, ino: st.ino, size: st.size, mode: st.mode, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs });
  }

  /** True when st is exactly the entry recorded at path: the same inode, unchanged since. */
  same(path: string, st: Stat): boolean {
    const r = this.records.get(path);
    return (
      r !== undefined &&
      st.dev === this.dev &&
      st.ino === r.ino &&
      st.mode === r.mode &&
      st.size === r.size &&
      st.mtimeNs === r.mtimeNs &&
      st.ctimeNs === r.ctimeNs
    );
  }

  /** The permission bits recorded for path (undefined: none recorded). */
  modeOf(path: string): number | undefined {
    const r = this.records.get(path);
    return r === undefined ? undefined : r.mode & 0o7777;
  }

  /** The bytes of the ledger file: one JSON line (its owners and entries), then the line's sha256. */
  encode(store: Stat, cloneDir: Stat): Buffer {
    const entries: unknown[] = [];
    for (const [path, r] of this.records) entries.push([path, r.kind, String(r.ino), r.size, r.mode, String(r.mtimeNs), String(r.ctimeNs)]);
    const body = JSON.stringify({ v: LEDGER_VERSION, store: idText(store), clone: idText(cloneDir), digest: this.digest, independent: this.independent, entries });
    return Buffer.from(`${body}\n${createHash('sha256').update(body).digest('hex')}\n`);
  }

  /** The ledger in text, or undefined when it is torn, garbage, or another store's or another clone's. */
  static decode(text: string, store: Stat, cloneDir: Stat): Ledger | undefined {
    const cut = text.lastIndexOf('\n', text.length - 2);
    if (cut < 0 || !text.endsWith('\n')) return undefined;
    const body = text.slice(0, cut);
    if (createHash('sha256').update(body).digest('hex') !== text.slice(cut + 1, -1)) return undefined;
    try {
      const doc = JSON.parse(body) as { v: unknown; store: unknown; clone: unknown; digest: unknown; independent: unknown; entries: unknown };
      if (doc.v !== LEDGER_VERSION || doc.store !== idText(store) || doc.clone !== idText(cloneDir)) return undefined;
      if (typeof doc.digest !== 'string' || !DIGEST.test(doc.digest) || !Array.isArray(doc.entries)) return undefined;
      const ledger = new Ledger(doc.digest, cloneDir.dev, doc.independent === true);
      for (const e of doc.entries as unknown[][]) {
        const [path, kind, ino, size, mode, mtime, ctime] = e as [string, Kind, string, number, number, string, string];
        if (typeof path !== 'string' || (kind !== 'f' && kind !== 'd' && kind !== 'l') || typeof size !== 'number' || typeof mode !== 'number') return undefined;
        ledger.records.set(path, { kind, ino: BigInt(ino), size, mode, mtimeNs: BigInt(mtime), ctimeNs: BigInt(ctime) });
      }
      return ledger;
    } catch {
      return undefined;
    }
  }
}

/** The store directory of a snapshot root (`<store>/snapshots/<digest>`). */
export function storeOf(snapshotRoot: string): string {
  return dirname(dirname(snapshotRoot));
}

/**
 * The ledger the store keeps for the clone directory cloneDir (its fstat), or
 * undefined when there is none, or it is torn, or it is not this store's and this
 * clone's (a ledger copied from elsewhere, or an inode number reused by another
 * directory after the clone was removed: then its entries' ctimes do not match either).
 * Nothing in the clone is read.
 */
export function loadLedger(sys: Sys, storeRoot: string, cloneDir: Stat): Ledger | undefined {
  try {
    using store = own(sys, openRealDir(sys, storeRoot, 'store directory'));
    using dir = own(sys, openChildDir(sys, store.fd, CLONES_DIR));
    const name = ledgerName(cloneDir);
    const text = readAllAt(sys, dir.fd, name, MAX_LEDGER_BYTES, name, { selfProving: true }).bytes.toString('utf8');
    return Ledger.decode(text, sys.fstat(store.fd), cloneDir);
  } catch {
    return undefined;
  }
}

/** Replaces the clone's ledger in the store crash-safe (tmp/, fsync, rename: a reader sees the old one or the new one). */
export function saveLedger(sys: Sys, storeRoot: string, cloneDir: Stat, ledger: Ledger): void {
  using store = own(sys, openRealDir(sys, storeRoot, 'store directory'));
  using tmp = own(sys, openChildDir(sys, store.fd, TMP_DIR));
  const bytes = ledger.encode(sys.fstat(store.fd), cloneDir);
  saveStoreFile(sys, store.fd, tmp.fd, CLONES_DIR, ledgerName(cloneDir), (sink) => sink(bytes));
}
