// sandbox-seccomp.test.ts: the seccomp filter's verdicts, by running its classic BPF program over seccomp_data for every architecture it knows (the sandbox tests run it for real on this machine's).
import { describe, expect, it } from 'vitest';

import { seccompFilter } from '../../dist/index.js';

const ALLOW = 0x7fff0000;
const EPERM = 0x00050001;

/** Runs a classic BPF program (the instructions seccomp takes) over a struct seccomp_data: nr, arch, the request as args[1]. */
function run(program: Buffer, nr: number, arch: number, request: bigint): number {
  const data = Buffer.alloc(64);
  data.writeInt32LE(nr, 0);
  data.writeUInt32LE(arch, 4);
  data.writeBigUInt64LE(request, 24);
  let a = 0;
  for (let pc = 0, steps = 0; steps < 1000; steps++) {
    expect(pc * 8).toBeLessThan(program.length);
    const code = program.readUInt16LE(pc * 8);
    const jt = program[pc * 8 + 2]!;
    const jf = program[pc * 8 + 3]!;
    const k = program.readUInt32LE(pc * 8 + 4);
    if (code === 0x20) a = data.readUInt32LE(k);
    else if (code === 0x54) a = (a & k) >>> 0;
    else if (code === 0x15) {
      pc += a === k ? jt : jf;
    } else if (code === 0x06) return k;
    else throw new Error(`instruction ${pc}: code ${code.toString(16)} not expected`);
    pc++;
  }
  throw new Error('the program did not return');
}

describe('seccompFilter', () => {
  const arches: [string, number, number[]][] = [
    ['x86_64', 0xc000003e, [16, 0x40000202]],
    ['i386', 0x40000003, [54]],
    ['aarch64', 0xc00000b7, [29]],
    ['arm', 0x40000028, [54]],
    ['riscv64', 0xc00000f3, [29]],
    ['loongarch64', 0xc0000102, [29]],
    ['ppc64le', 0xc0000015, [54]],
  ];
  // The requests as programs pass them: XFS_IOC_SWAPEXT (_IOWR('X', 109, 192 bytes)), its 32-bit size, the exchange and
  // commit calls, ext4's EXT4_IOC_MOVE_EXT, and the high half set (the kernel compares the low 32 bits of the argument).
  const refused = [0xc0c0586dn, 0xc0b8586dn, 0x40185881n, 0x80405882n, 0x40405883n, 0xc028660fn, 0xffffffff00000000n | 0xc0c0586dn];
  const allowed = [0x5401n /* TCGETS */, 0xc0c0586en, 0x40185884n, 0x8008661en /* FS_IOC_GETVERSION-like */, 0x40049409n /* FICLONE */];

  it('is 8 bytes an instruction, and refuses the defragmenters\' ioctls with EPERM on every architecture it knows, whatever their size', () => {
    const program = seccompFilter();
    expect(program.length % 8).toBe(0);
    for (const [name, arch, ioctls] of arches) {
      for (const nr of ioctls) {
        for (const request of refused) expect([name, nr, request.toString(16), run(program, nr, arch, request)]).toEqual([name, nr, request.toString(16), EPERM]);
        for (const request of allowed) expect([name, nr, request.toString(16), run(program, nr, arch, request)]).toEqual([name, nr, request.toString(16), ALLOW]);
      }
    }
  });

  it('allows every other call, and every call of an architecture it does not know', () => {
    const program = seccompFilter();
    for (const [name, arch, ioctls] of arches) {
      for (const nr of [0, 1, 2, 59, 100, 221, 435]) {
        if (ioctls.includes(nr)) continue;
        expect([name, nr, run(program, nr, arch, 0xc0c0586dn)]).toEqual([name, nr, ALLOW]);
      }
    }
    // s390x (big-endian) and an arch number that is none.
    for (const arch of [0x80000016, 0x12345678]) expect(run(program, 54, arch, 0xc0c0586dn)).toBe(ALLOW);
  });
});
