// proc.mjs: child processes the suite drives: JSON-line peers with timeouts, and one-shot commands.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

import { onCleanup } from './env.mjs';

const live = new Set();
onCleanup(() => {
  for (const child of live) {
    try {
      process.kill(child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Spawns a child and tracks it so an interrupted run kills it. */
export function track(child) {
  live.add(child);
  child.on('exit', () => live.delete(child));
  return child;
}

/**
 * A child speaking one JSON document per line on stdin/stdout. request() sends one and resolves
 * with the next line (or rejects on timeout/exit). `lines` yields unsolicited lines too.
 */
export class Peer {
  constructor(cmd, args, opts = {}) {
    this.child = track(spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], ...opts }));
    this.stderr = '';
    this.queue = [];
    this.waiters = [];
    this.exited = null;
    this.child.stderr.on('data', (d) => {
      if (this.stderr.length < 20000) this.stderr += d;
    });
    this.child.stdin.on('error', () => {});
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        msg = { garbage: line };
      }
      const w = this.waiters.shift();
      if (w) w.resolve(msg);
      else this.queue.push(msg);
    });
    this.child.on('exit', (code, signal) => {
      this.exited = { code, signal };
      for (const w of this.waiters.splice(0)) w.reject(new PeerGone(this, code, signal));
    });
  }

  get pid() {
    return this.child.pid;
  }

  send(msg) {
    this.child.stdin.write(`${JSON.stringify(msg)}\n`);
  }

  /** The next line, or PeerGone / PeerTimeout. */
  next(timeoutMs = 60000) {
    if (this.queue.length > 0) return Promise.resolve(this.queue.shift());
    if (this.exited) return Promise.reject(new PeerGone(this, this.exited.code, this.exited.signal));
    return new Promise((resolve, reject) => {
      const w = { resolve, reject };
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        reject(new PeerTimeout(timeoutMs));
      }, timeoutMs);
      w.resolve = (v) => (clearTimeout(timer), resolve(v));
      w.reject = (e) => (clearTimeout(timer), reject(e));
      this.waiters.push(w);
    });
  }

  request(msg, timeoutMs) {
    this.send(msg);
    return this.next(timeoutMs);
  }

  kill(signal = 'SIGKILL') {
    if (this.exited) return;
    try {
      this.child.kill(signal);
    } catch {
      // gone
    }
  }

  /** Resolves once the child has exited. */
  done() {
    if (this.exited) return Promise.resolve(this.exited);
    return new Promise((r) => this.child.once('exit', (code, signal) => r({ code, signal })));
  }

  async close() {
    this.child.stdin.end();
    const t = setTimeout(() => this.kill(), 10000);
    await this.done();
    clearTimeout(t);
  }
}

export class PeerGone extends Error {
  constructor(peer, code, signal) {
    super(`child exited (${signal ?? code}): ${peer.stderr.trim().split('\n').slice(-3).join(' / ')}`);
    this.kind = 'gone';
  }
}

export class PeerTimeout extends Error {
  constructor(ms) {
    super(`no answer within ${ms} ms (hang)`);
    this.kind = 'timeout';
  }
}

/** Runs a command to completion: { status, signal, stdout, stderr, ms, timedOut }. */
export function runCmd(cmd, args, { timeoutMs = 60000, killAfterMs, input, ...opts } = {}) {
  return new Promise((resolve) => {
    const started = performance.now();
    const child = track(spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], ...opts }));
    let stdout = Buffer.alloc(0);
    let stderr = '';
    let timedOut = false;
    child.stdout.on('data', (d) => (stdout = Buffer.concat([stdout, d])));
    child.stderr.on('data', (d) => (stderr += d));
    child.stdin.on('error', () => {});
    child.stdin.end(input);
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    let killer;
    if (killAfterMs !== undefined) killer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    // 'close', not 'exit': only then has every byte the child wrote to its pipes been read.
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      clearTimeout(killer);
      resolve({ status, signal, stdout: stdout.toString('utf8'), stderr, ms: performance.now() - started, timedOut });
    });
  });
}
