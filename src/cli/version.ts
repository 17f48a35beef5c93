// version.ts: the package's version, read from its package.json (no library code needed: `treeseal --version` loads nothing else).
import { readFileSync } from 'node:fs';

export function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}
