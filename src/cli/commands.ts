// commands.ts: what the command loads once it is past `--version`: main and the raw arguments, bundled into one file of its own (one module to resolve and read, not a dozen chunks).
export { main, stringOptionNames } from './main.js';
export { VALUED_OPTIONS } from './own-failure.js';
export { rawArguments } from './raw-argv.js';
