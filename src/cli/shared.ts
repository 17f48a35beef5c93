// shared.ts: what every subcommand uses: usage errors, the output channel, and argument counts.
export class UsageError extends Error {
  constructor(
    message: string,
    readonly command?: string,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

export interface Io {
  out: (text: string) => void;
  err: NodeJS.WriteStream;
  json: boolean;
}

/** Prints one JSON document (--json) or the human summary. */
export function emit(io: Io, json: unknown, human: string): void {
  io.out(io.json ? `${JSON.stringify(json, null, 2)}\n` : human.endsWith('\n') ? human : `${human}\n`);
}

export function need(args: string[], count: number, command: string, names: string): void {
  if (args.length !== count) throw new UsageError(`${command} takes ${names}`, command);
}
