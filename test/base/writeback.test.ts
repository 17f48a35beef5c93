// writeback.test.ts: an overlay's upper layer found in mountinfo (the rule its files' writeback follows), escapes and all.
import { describe, expect, it } from 'vitest';

import { upperDirOf } from '../../dist/internal.js';

const MOUNTINFO = [
  '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
  // Optional fields (shared:, master:) come before the '-'; the upper path escaped as the kernel writes it.
  '61 22 0:52 / /merged rw,relatime shared:30 master:2 - overlay overlay rw,lowerdir=/l,upperdir=/dev/shm/up\\040per\\054x\\134y,workdir=/dev/shm/work',
  '62 22 0:53 / /ro rw,relatime - overlay overlay ro,lowerdir=/a:/b',
  '63 22 0:54 / /t rw - tmpfs tmpfs rw,upperdir=/not-an-overlay',
  '',
].join('\n');

describe('upperDirOf', () => {
  it('reads the upperdir of the overlay with that mount ID, unescaped; none for another ID, a read-only overlay or another type', () => {
    expect(upperDirOf(MOUNTINFO, 61)).toBe('/dev/shm/up per,x\\y');
    expect(upperDirOf(MOUNTINFO, 62)).toBeUndefined();
    expect(upperDirOf(MOUNTINFO, 63)).toBeUndefined();
    expect(upperDirOf(MOUNTINFO, 6)).toBeUndefined();
    expect(upperDirOf(MOUNTINFO, 22)).toBeUndefined();
  });
});
