// transfer.test.ts: buffers moved between threads only when marked and wholly their own, and memory given back at once by release().
import { readFileSync } from 'node:fs';
import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';

import { movable, releasable, release, transferList } from '../../dist/internal.js';

const rssMb = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;

describe('movable and transferList', () => {
  it('lists only marked buffers that are their whole, unshared ArrayBuffer, two levels into a message', () => {
    const own = movable(Buffer.allocUnsafeSlow(10_000));
    const pooled = movable(Buffer.allocUnsafe(10));
    const view = movable(Buffer.allocUnsafeSlow(100).subarray(10, 20));
    const shared = movable(Buffer.from(new SharedArrayBuffer(64)));
    const unmarked = Buffer.allocUnsafeSlow(10_000);
    expect(transferList([1, own, pooled, view, shared, unmarked])).toEqual([own.buffer]);
    expect(transferList({ bytes: own, digest: 'x' })).toEqual([own.buffer]);
    expect(transferList([{ nested: [own] }])).toEqual([]);
    expect(transferList(own)).toEqual([own.buffer]);
    expect(transferList([own, own])).toEqual([own.buffer]);
  });

  it('a marked buffer is moved by postMessage (empty on the sending side), an unmarked one copied', () => {
    const { port1, port2 } = new MessageChannel();
    const moved = movable(Buffer.from('moved bytes'.repeat(1000)));
    const copied = Buffer.from('copied bytes'.repeat(1000));
    const args = [moved, copied];
    port1.postMessage(args, transferList(args));
    const got = receiveMessageOnPort(port2)!.message as Uint8Array[];
    expect([Buffer.from(got[0]!).toString().slice(0, 11), Buffer.from(got[1]!).toString().slice(0, 12)]).toEqual(['moved bytes', 'copied bytes']);
    expect([moved.byteLength, copied.byteLength]).toEqual([0, 12_000]);
    port1.close();
    port2.close();
  });
});

describe('releasable and release', () => {
  it('gives the memory back at once, not when a collector runs; other buffers are left alone', () => {
    const before = rssMb();
    const bytes = releasable(200 * 1024 * 1024);
    expect(bytes.length).toBe(200 * 1024 * 1024);
    bytes.fill(7);
    expect(rssMb() - before).toBeGreaterThan(150);
    release(bytes);
    expect(bytes.length).toBe(0);
    expect(rssMb() - before).toBeLessThan(50);
    const plain = Buffer.alloc(16, 1);
    release(plain);
    expect(plain).toEqual(Buffer.alloc(16, 1));
    expect(releasable(0).length).toBe(0);
  });

  it('a releasable buffer moved to another port keeps that: the receiver releases it', () => {
    const { port1, port2 } = new MessageChannel();
    const bytes = movable(releasable(1024));
    bytes.fill(3);
    port1.postMessage([bytes], transferList([bytes]));
    const [got] = receiveMessageOnPort(port2)!.message as Uint8Array[];
    expect([bytes.byteLength, got!.length, got![1023]]).toEqual([0, 1024, 3]);
    release(got!);
    expect(got!.length).toBe(0);
    port1.close();
    port2.close();
  });
});
