// format.ts: human-readable sizes, durations, the progress line the CLI draws on a terminal, and what a terminal must not be sent raw.
import type { CaptureProgress as Progress } from '../index.js';

/** What a progress line counts towards (entries and bytes). */
export type Totals = Progress;

/** Whether s holds a control character (C0, DEL, C1): sent raw, a terminal may act on it (an escape retitles it, a newline forges a line). */
export function hasControl(s: string): boolean {
  return /[\u0000-\u001f\u007f-\u009f]/u.test(s);
}

/**
 * JSON text with what a terminal acts on or hides escaped as `\\uXXXX`: JSON.stringify leaves
 * DEL, the C1 controls (U+009B starts an escape sequence on many terminals), the line and
 * paragraph separators and the format characters (a right-to-left override, a zero-width
 * space) raw. The document means the same. (This module loads before the library: no import of it.)
 */
export function terminalSafeJson(text: string): string {
  return text.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, (ch) => {
    if (ch === '\n') return ch;
    let out = '';
    for (let i = 0; i < ch.length; i++) out += `\\u${ch.charCodeAt(i).toString(16).padStart(4, '0')}`;
    return out;
  });
}

export function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}

export function ms(n: number): string {
  return n < 1000 ? `${Math.round(n)} ms` : `${(n / 1000).toFixed(2)} s`;
}

export interface ProgressLine {
  update(p: Progress): void;
  done(): void;
}

/**
 * A progress line on stderr, drawn only when stderr is a terminal. With totals it
 * draws a bar; without, counts alone.
 */
export function progressLine(label: string, stream: NodeJS.WriteStream, total?: Totals): ProgressLine {
  if (!stream.isTTY) return { update: () => {}, done: () => {} };
  let drawn = false;
  const width = 24;
  return {
    update(p) {
      let bar = '';
      if (total !== undefined && total.bytes + total.entries > 0) {
        const frac = Math.min(1, total.bytes > 0 ? p.bytes / total.bytes : p.entries / total.entries);
        const fill = Math.round(frac * width);
        bar = `[${'#'.repeat(fill)}${'-'.repeat(width - fill)}] ${Math.round(frac * 100)}% `;
      }
      const counts = total === undefined ? `${p.entries} entries, ${bytes(p.bytes)}` : `${p.entries}/${total.entries} entries, ${bytes(p.bytes)}/${bytes(total.bytes)}`;
      stream.write(`\r\x1b[2K${label} ${bar}${counts}`);
      drawn = true;
    },
    done() {
      if (drawn) stream.write('\r\x1b[2K');
    },
  };
}
