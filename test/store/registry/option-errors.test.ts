// option-errors.test.ts: every wrong push or pull option is Node's own TypeError or RangeError, with Node's message, before anything is sent.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { tempDir } from '../../helpers.js';

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
});
