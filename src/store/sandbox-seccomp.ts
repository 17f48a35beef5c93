// sandbox-seccomp.ts: the seccomp filter a sandbox runs under (bubblewrap's --seccomp): XFS's ioctls that swap or exchange a file's extents refused, everything else allowed.

/**
 * The ioctls refused, by their type and number (the low 16 bits of the request, whatever
 * size it encodes): the defragmenters' calls, which any process that can open a file for
 * writing may use to change its bytes while its mtime and ctime stay as they were (so a
 * clone's file would hold other bytes under the identity the ledger recorded):
 * XFS_IOC_SWAPEXT ('X', 109, extents swapped with another file's), XFS_IOC_EXCHANGE_RANGE,
 * XFS_IOC_START_COMMIT and XFS_IOC_COMMIT_RANGE ('X', 129 to 131, its successors), and
 * ext4's EXT4_IOC_MOVE_EXT ('f', 15: the donor file's range left reading as zeros). Nothing
 * a benchmark's command needs.
 */
export const REFUSED_IOCTLS: readonly number[] = [0x586d, 0x5881, 0x5882, 0x5883, 0x660f];

/** Each architecture the filter knows (AUDIT_ARCH_*) and its ioctl system call numbers. */
const ARCHES: readonly (readonly [arch: number, ioctls: readonly number[]])[] = [
  // x86_64, and its x32 ABI (__X32_SYSCALL_BIT | 514).
  [0xc000003e, [16, 0x40000202]],
  // i386 (a 32-bit program on x86_64 calls through it).
  [0x40000003, [54]],
  // aarch64, and arm (its 32-bit programs).
  [0xc00000b7, [29]],
  [0x40000028, [54]],
  // riscv64, loongarch64 (the generic table), ppc64le. Little-endian all: the request's low half is at REQUEST.
  [0xc00000f3, [29]],
  [0xc0000102, [29]],
  [0xc0000015, [54]],
];

const BPF_LD_W_ABS = 0x20;
const BPF_JEQ_K = 0x15;
const BPF_AND_K = 0x54;
const BPF_RET_K = 0x06;
const SECCOMP_RET_ALLOW = 0x7fff0000;
/** SECCOMP_RET_ERRNO with EPERM: the call fails as a refused permission would. */
const SECCOMP_RET_EPERM = 0x00050000 | 1;
/** Offsets in struct seccomp_data: nr, arch, and the low half of args[1] (the request; little-endian). */
const NR = 0;
const ARCH = 4;
const REQUEST = 24;

type Insn = { code: number; jt: number | string; jf: number | string; k: number; label?: string };

/**
 * The compiled classic BPF program (struct sock_filter, 8 bytes each, little-endian) that
 * bubblewrap's `--seccomp FD` reads: on a known architecture, an ioctl whose request is one
 * of REFUSED_IOCTLS fails with EPERM; every other call, and every call of an architecture it
 * does not know, is allowed.
 */
export function seccompFilter(): Buffer {
  const prog: Insn[] = [{ code: BPF_LD_W_ABS, jt: 0, jf: 0, k: ARCH }];
  ARCHES.forEach(([arch, ioctls], a) => {
    const next = a + 1 < ARCHES.length ? `arch${a + 1}` : 'allow';
    prog.push({ code: BPF_JEQ_K, jt: 0, jf: next, k: arch, label: `arch${a}` });
    prog.push({ code: BPF_LD_W_ABS, jt: 0, jf: 0, k: NR });
    ioctls.forEach((nr, i) => prog.push({ code: BPF_JEQ_K, jt: 'request', jf: i + 1 < ioctls.length ? 0 : 'allow', k: nr }));
  });
  // Only an arch check's jf reaches the next arch check, with the arch still loaded; a number that is no ioctl is allowed.
  prog.push({ code: BPF_LD_W_ABS, jt: 0, jf: 0, k: REQUEST, label: 'request' });
  prog.push({ code: BPF_AND_K, jt: 0, jf: 0, k: 0xffff });
  REFUSED_IOCTLS.forEach((req, i) => prog.push({ code: BPF_JEQ_K, jt: 'deny', jf: i + 1 < REFUSED_IOCTLS.length ? 0 : 'allow', k: req }));
  prog.push({ code: BPF_RET_K, jt: 0, jf: 0, k: SECCOMP_RET_ALLOW, label: 'allow' });
  prog.push({ code: BPF_RET_K, jt: 0, jf: 0, k: SECCOMP_RET_EPERM, label: 'deny' });
  return assemble(prog);
}

/** The program's bytes, each label resolved to the forward jump BPF takes (instructions skipped after this one). */
function assemble(prog: Insn[]): Buffer {
  const at = new Map(prog.flatMap((insn, i) => (insn.label === undefined ? [] : [[insn.label, i] as const])));
  const out = Buffer.alloc(prog.length * 8);
  prog.forEach((insn, i) => {
    const jump = (to: number | string): number => {
      if (typeof to === 'number') return to;
      const skip = at.get(to)! - i - 1;
      if (!(skip >= 0 && skip <= 255)) throw new Error(`seccomp filter: jump to ${to} out of range`);
      return skip;
    };
    out.writeUInt16LE(insn.code, i * 8);
    out.writeUInt8(jump(insn.jt), i * 8 + 2);
    out.writeUInt8(jump(insn.jf), i * 8 + 3);
    out.writeUInt32LE(insn.k >>> 0, i * 8 + 4);
  });
  return out;
}
