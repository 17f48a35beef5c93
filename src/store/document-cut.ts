// document-cut.ts: a canonical snapshot manifest cut into its entry lists' texts and the text around them, without parsing the lists.
import { SealError } from '../base/errors.js';

/** A document cut at its entry lists: `parts[0] + lists[0] + parts[1] + … + parts[n]` is the document. */
export interface CutDocument {
  /** The text around the lists (latin1: canonical JSON is ASCII); one more than the lists. */
  parts: string[];
  /** Each list's text (`[…]`), the copy roots' first, then each mount's in order. */
  lists: Buffer[];
}

/**
 * Cuts a snapshot manifest at its entry lists: the copy roots' after `,"entries":[`, each
 * mount's after `{"entries":[`, each ending at the first `]` its canonical form has none
 * before (in canonical JSON an unescaped quote only delimits a string, so these marks
 * never occur inside one). The cut is only a guess until a digest proves it: the lists'
 * bytes are to be hashed as they stand. `bad` makes the error for a document with no such shape.
 */
export function cutDocument(doc: Buffer, bad: (why: string) => SealError): CutDocument {
  const parts: string[] = [];
  const lists: Buffer[] = [];
  let part = '';
  let at = 0;
  const take = (open: string, closes: string[]): boolean => {
    const start = doc.indexOf(open, at, 'latin1');
    if (start < 0) return false;
    const listStart = start + open.length - 1;
    const ends = closes.map((c) => doc.indexOf(c, listStart, 'latin1')).filter((i) => i >= 0);
    if (ends.length === 0) throw bad('an entry list has no end');
    const listEnd = Math.min(...ends) + 1;
    parts.push(part + doc.toString('latin1', at, listStart));
    part = '';
    lists.push(doc.subarray(listStart, listEnd));
    at = listEnd;
    return true;
  };
  if (!take(',"entries":[', ['],"exclude":[', '],"manifest_digest":"'])) throw bad('no entries');
  const mounts = doc.indexOf(',"mounts":[', at, 'latin1');
  if (mounts < 0) throw bad('no mounts');
  part = doc.toString('latin1', at, mounts);
  at = mounts;
  while (take('{"entries":[', ['],"kind":"'])) {
    // The next mount, if any, starts before the mounts' end.
    const next = doc.indexOf('{"entries":[', at, 'latin1');
    const endOfMounts = doc.indexOf('],"revision":', at, 'latin1');
    if (next < 0 || (endOfMounts >= 0 && endOfMounts < next)) break;
  }
  parts.push(part + doc.toString('latin1', at));
  return { parts, lists };
}
