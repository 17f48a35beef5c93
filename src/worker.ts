// worker.ts: entry of the worker thread: runs the jobs of the operations defined with defineOp, one at a time, for the async twins.
import { parentPort } from 'node:worker_threads';

import { SealError } from './base/errors.js';
import { serializeError, type JobContext, type JobReply, type JobRequest } from './base/jobs.js';
import { jobHandler } from './base/op.js';
import { dropHelpers, keepHelpers } from './files/pool.js';
import { transferList } from './base/transfer.js';
// Every operation registers its job when its module loads: the public API's modules load them all (the registry's with push and pull).
import './index.js';

function run(job: JobRequest, ctx: JobContext): unknown {
  const handler = jobHandler(job.op);
  if (handler === undefined) throw new SealError('SEAL_UNAVAILABLE', `unknown job: ${String(job.op)}`);
  if (ctx.isAborted()) throw new SealError('SEAL_ABORTED', `${job.op} was aborted`);
  return handler(job.args, ctx);
}

const port = parentPort;
if (port !== null) {
  // Helper threads for capture and verify live as long as this worker.
  keepHelpers();
  port.on('message', (job: JobRequest | { stop: true }) => {
    if ('stop' in job) {
      // Stop the helpers first, then let this thread end once its loop is empty.
      dropHelpers();
      port.close();
      return;
    }
    const ctx: JobContext = { isAborted: () => Atomics.load(job.abort, 0) !== 0 };
    if (job.progress) ctx.onProgress = (progress) => port.postMessage({ id: job.id, kind: 'progress', progress } satisfies JobReply);
    let reply: JobReply;
    try {
      reply = { id: job.id, kind: 'result', result: run(job, ctx) };
    } catch (err) {
      reply = { id: job.id, kind: 'error', error: serializeError(err) };
    }
    port.postMessage(reply, reply.kind === 'result' ? transferList(reply.result) : []);
  });
}
