// identity.test.ts: treeseal/sys's file identity: identityOf keeps exactly the six fields a change shows in, sameIdentity compares
// every one of them, sameObject compares device, inode and file type only. Each title names the mutation (src/sys/identity.ts) it kills.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { AT_FDCWD, AT_SYMLINK_NOFOLLOW, identityOf, sameIdentity, sameObject, sys, type FileIdentity } from '../../dist/sys/index.js';
import { tempDir } from '../helpers.js';

const base: FileIdentity = { dev: 2049n, ino: 131_075n, mode: 0o100644, size: 4096, mtimeNs: 1_700_000_000_123_456_789n, ctimeNs: 1_700_000_001_987_654_321n };

/** base with one field changed, for each field. */
const oneFieldChanged: [keyof FileIdentity, FileIdentity][] = [
  ['dev', { ...base, dev: base.dev + 1n }],
  ['ino', { ...base, ino: base.ino + 1n }],
  ['mode', { ...base, mode: 0o100600 }],
  ['size', { ...base, size: base.size + 1 }],
  ['mtimeNs', { ...base, mtimeNs: base.mtimeNs + 1n }],
  ['ctimeNs', { ...base, ctimeNs: base.ctimeNs + 1n }],
];

describe('identityOf', () => {
  it('keeps dev, ino, mode, size, mtimeNs and ctimeNs of an fstatat, and nothing else (kills the object literal emptied)', () => {
    const file = join(tempDir(), 'f');
    writeFileSync(file, 'twelve bytes');
    const st = sys.fstatat(AT_FDCWD, file, AT_SYMLINK_NOFOLLOW);
    expect(identityOf(st)).toEqual({ dev: st.dev, ino: st.ino, mode: st.mode, size: 12, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs });
  });
});

describe('sameIdentity', () => {
  it('an identity equals an equal copy of itself (kills the comparisons of any field inverted)', () => {
    expect(sameIdentity(base, { ...base })).toBe(true);
  });

  for (const [field, other] of oneFieldChanged) {
    it(`a change of ${field} alone is another identity (kills the ${field} comparison replaced by true, or its && turned into ||)`, () => {
      expect(sameIdentity(base, other)).toBe(false);
      expect(sameIdentity(other, base)).toBe(false);
    });
  }
});

describe('sameObject', () => {
  it('the same device, inode and file type is the same object, whatever else changed', () => {
    expect(sameObject(base, { ...base, mode: 0o100600, size: 1, mtimeNs: 0n, ctimeNs: 0n })).toBe(true);
  });

  for (const [field, other] of [
    ['dev', { ...base, dev: base.dev + 1n }],
    ['ino', { ...base, ino: base.ino + 1n }],
    ['file type', { ...base, mode: 0o040644 }],
  ] as const) {
    it(`another ${field} is another object (kills the ${field} comparison replaced by true, or its && turned into ||)`, () => {
      expect(sameObject(base, other)).toBe(false);
      expect(sameObject(other, base)).toBe(false);
    });
  }
});
