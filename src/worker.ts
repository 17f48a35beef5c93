// worker.ts: entry of the worker thread: runs each job's sync core, one at a time, for the async twins.
import { parentPort } from 'node:worker_threads';

import { SealError } from './base/errors.js';
import { sealed } from './base/refusal.js';
import { serializeError, type JobArgs, type JobContext, type JobName, type JobReply, type JobRequest, type JobResult } from './base/jobs.js';
import { dropHelpers, keepHelpers } from './files/pool.js';
import { JOBS as CAPTURE_JOBS } from './store/jobs.js';
import { JOBS as REGISTRY_JOBS } from './store/registry/jobs.js';
import { JOBS as TOOL_JOBS } from './tools/jobs.js';

type Handlers = { [K in JobName]: (args: JobArgs<K>, ctx: JobContext) => JobResult<K> };

const HANDLERS: Handlers = { ...TOOL_JOBS, ...CAPTURE_JOBS, ...REGISTRY_JOBS };

function run(job: JobRequest, ctx: JobContext): unknown {
  const handler = HANDLERS[job.op] as ((args: unknown[], ctx: JobContext) => unknown) | undefined;
  if (handler === undefined) throw new SealError('SEAL_UNAVAILABLE', `unknown job: ${String(job.op)}`);
  if (ctx.isAborted()) throw new SealError('SEAL_ABORTED', `${job.op} was aborted`);
  // The same error the sync twin throws: a system error never crosses back raw.
  return sealed(job.op, () => handler(job.args, ctx));
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
    const ctx: JobContext = {
      isAborted: () => Atomics.load(job.abort, 0) !== 0,
      onProgress: (progress) => port.postMessage({ id: job.id, kind: 'progress', progress } satisfies JobReply),
    };
    let reply: JobReply;
    try {
      reply = { id: job.id, kind: 'result', result: run(job, ctx) };
    } catch (err) {
      reply = { id: job.id, kind: 'error', error: serializeError(err) };
    }
    port.postMessage(reply);
  });
}
