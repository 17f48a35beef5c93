// lazy-builtins.ts: Node modules only some calls need (threads, child processes, sockets), loaded at their first use: imported up front, each cost every process 2-6 ms before its first line ran.
import { createRequire } from 'node:module';

const nodeRequire = createRequire(import.meta.url);

/** node:worker_threads, for a call that starts a thread. */
export function workerThreads(): typeof import('node:worker_threads') {
  return nodeRequire('node:worker_threads') as typeof import('node:worker_threads');
}

/** node:child_process, for a call that runs a program (a sandbox, a credential helper). */
export function childProcess(): typeof import('node:child_process') {
  return nodeRequire('node:child_process') as typeof import('node:child_process');
}

/** node:net, for telling an IP address from a host name. */
export function net(): typeof import('node:net') {
  return nodeRequire('node:net') as typeof import('node:net');
}

/** node:tls, for its bundled root certificates. */
export function tls(): typeof import('node:tls') {
  return nodeRequire('node:tls') as typeof import('node:tls');
}
