// option-errors.test.ts: every wrong push or pull option is Node's own TypeError or RangeError, with Node's message, before anything is sent.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { tempDir, writeTree } from '../../helpers.js';

describe('push and pull options', () => {
  it('credentials that are not { username: string, password: string }', async () => {
    const store = await SnapshotStore.open(join(tempDir(), 's'));
    const pull = (credentials: unknown) => store.pull('d'.repeat(64), '127.0.0.1:1/x', { credentials: credentials as never });
    await expect(pull('user:pw')).rejects.toMatchObject({
      name: 'TypeError',
      code: 'ERR_INVALID_ARG_TYPE',
      message: `The "options.credentials" property must be of type object. Received type string ('user:pw')`,
    });
    await expect(pull({ username: 'u' })).rejects.toMatchObject({
      name: 'TypeError',
      code: 'ERR_INVALID_ARG_TYPE',
      message: 'The "options.credentials.password" property must be of type string. Received undefined',
    });
    await expect(pull({ username: 7, password: 'p' })).rejects.toMatchObject({
      name: 'TypeError',
      code: 'ERR_INVALID_ARG_TYPE',
      message: 'The "options.credentials.username" property must be of type string. Received type number (7)',
    });
    await store.close();
  });

  it('a remote that is not a string is Node\'s TypeError (push: before the snapshot is looked up), an empty one SEAL_BAD_PATH', async () => {
    const store = await SnapshotStore.open(join(tempDir(), 's'));
    const notString = (received: string) => ({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: `The "remote" argument must be of type string. ${received}` });
    await expect(store.push('b01f', 5 as never)).rejects.toMatchObject(notString('Received type number (5)'));
    await expect(store.push('b01f', {} as never)).rejects.toMatchObject(notString('Received an instance of Object'));
    await expect(store.pull('d'.repeat(64), 5 as never)).rejects.toMatchObject(notString('Received type number (5)'));
    await expect(store.pull('d'.repeat(64), '')).rejects.toMatchObject({ code: 'SEAL_BAD_PATH', message: 'remote must be host[:port]/repository' });
    await store.close();
  });

  it('chunkBytes and monolithicBytes that are not integers in range', async () => {
    const work = tempDir();
    writeTree(join(work, 'src'), { 'a.txt': 'a\n' });
    const store = await SnapshotStore.open(join(work, 's'));
    const snap = await store.capture({ source: join(work, 'src'), copy: ['a.txt'] });
    const push = (o: object) => store.push(snap.digest, '127.0.0.1:1/x', o);
    await expect(push({ chunkBytes: 1024 })).rejects.toMatchObject({
      name: 'RangeError',
      code: 'ERR_OUT_OF_RANGE',
      message: 'The value of "options.chunkBytes" is out of range. It must be >= 65536 && <= 1073741824. Received 1024',
    });
    await expect(push({ monolithicBytes: -1 })).rejects.toMatchObject({
      name: 'RangeError',
      code: 'ERR_OUT_OF_RANGE',
      message: 'The value of "options.monolithicBytes" is out of range. It must be >= 0 && <= 1073741824. Received -1',
    });
    await expect(push({ monolithicBytes: 1.5 })).rejects.toMatchObject({ name: 'RangeError', code: 'ERR_OUT_OF_RANGE' });
    await expect(push({ monolithicBytes: '32M' })).rejects.toMatchObject({
      name: 'TypeError',
      code: 'ERR_INVALID_ARG_TYPE',
      message: `The "options.monolithicBytes" property must be of type number. Received type string ('32M')`,
    });
    await store.close();
  });
});
