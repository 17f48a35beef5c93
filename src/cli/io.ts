// io.ts: the command's output: stdout and stderr with the progress line cleared first, and a closed stdout ending quietly.
import { progressLine, terminalSafeJson, type ProgressLine, type Totals } from './format.js';

export interface IoStreams {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
}

/** Round every `…Ms` number to whole milliseconds in JSON output. */
function integerMs(key: string, value: unknown): unknown {
  return typeof value === 'number' && key.endsWith('Ms') ? Math.round(value) : value;
}

export class Io {
  /** Print one JSON document instead of a summary. */
  json = false;
  readonly #streams: IoStreams;
  #line: ProgressLine | undefined;

  constructor(streams: IoStreams = { stdout: process.stdout, stderr: process.stderr }) {
    this.#streams = streams;
  }

  /** Writes to stdout (after clearing the progress line). */
  out(text: string): void {
    this.#clear();
    this.#streams.stdout.write(text);
  }

  /** The stream stdout output goes to, for bytes written as they are (`cat`); the progress line is cleared first. */
  get stdout(): NodeJS.WriteStream {
    this.#clear();
    return this.#streams.stdout;
  }

  /** Writes a line to stderr (after clearing the progress line). */
  warn(text: string): void {
    this.#clear();
    this.#streams.stderr.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  /** Prints `json` as one JSON document with --json, else the human summary. */
  emit(json: unknown, human: string): void {
    this.out(this.json ? `${terminalSafeJson(JSON.stringify(json, integerMs, 2))}\n` : human.endsWith('\n') || human === '' ? human : `${human}\n`);
  }

  /** A progress line on stderr (drawn only on a terminal); cleared before any other output. */
  progress(label: string, total?: Totals): ProgressLine {
    this.#clear();
    const line = progressLine(label, this.#streams.stderr, total);
    this.#line = line;
    return {
      update: (p) => line.update(p),
      done: () => {
        line.done();
        if (this.#line === line) this.#line = undefined;
      },
    };
  }

  #clear(): void {
    const line = this.#line;
    this.#line = undefined;
    line?.done();
  }
}

/**
 * A reader that closed our stdout (`treeseal show X | head -1`) ends the process the
 * way Unix tools end: quietly, by SIGPIPE. Any other failure to write it (a full disk,
 * /dev/full) is said on stderr as `treeseal: SEAL_IO: …` and ends with `status` (1; run's
 * 125). A closed stderr is ignored.
 */
export function endQuietlyOnClosedOutput(streams: IoStreams = { stdout: process.stdout, stderr: process.stderr }, status = 1): void {
  streams.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') {
      // The system's own text (no name in it): `ENOSPC: no space left on device, write`.
      streams.stderr.write(`treeseal: SEAL_IO: cannot write the output: ${err.message}\n`);
      process.exit(status);
    }
    // Node ignores SIGPIPE; a listener added and removed restores the default action.
    const ignore = (): void => {};
    process.on('SIGPIPE', ignore);
    process.off('SIGPIPE', ignore);
    process.kill(process.pid, 'SIGPIPE');
    // 128 + SIGPIPE, should the signal not end us.
    setTimeout(() => process.exit(141), 100);
  });
  streams.stderr.on('error', () => {});
}
