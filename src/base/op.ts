// op.ts: defineOp, the one way to declare an operation: its sync call, its async twin and its worker job from one spec.
import { checkSignal, invalidArgType, invalidArgValue } from './arg-errors.js';
import { abortedError, withAbortReason } from './errors.js';
import type { JobContext } from './jobs.js';
import { inline, offload, type Gate } from './offload.js';
import type { Progress } from './progress.js';
import { sealed } from './refusal.js';
import { sys as nativeSys, type Sys } from '../sys/native.js';

/** What one call of an operation runs with, as its spec's `validate` returns it. */
export interface OpCall<A extends unknown[]> {
  /**
   * The syscall layer. The addon's own: the async twin runs the core on the worker thread.
   * Any other (an injected layer, whose functions cannot cross threads): on the calling thread.
   */
  sys: Sys;
  /** What the core gets besides the syscall layer. */
  args: A;
  signal?: AbortSignal | undefined;
  onProgress?: ((p: Progress) => void) | undefined;
  /** The caller's bound on its calls on worker threads at once (a store's `concurrency`). */
  gate?: Gate | undefined;
}

/**
 * An operation: `In` is what the caller passes, `A` what the core gets, `R` what it
 * returns, `W` what crosses to the worker instead of `A`, `V` what crosses back instead
 * of `R`, `Out` what the caller gets.
 */
export interface OpSpec<In extends unknown[], A extends unknown[], R, Out, W extends unknown[], V> {
  /** Checks the caller's input, once, on the calling thread (Node's TypeError/RangeError, or a SealError). */
  validate(this: void, ...input: In): OpCall<A>;
  /** The sync core: on the calling thread for the sync call and an injected layer, else on the worker. */
  core(this: void, sys: Sys, args: A, ctx: JobContext): R;
  /** What crosses to the worker (structured-clonable); default: the args themselves. */
  send?(this: void, args: A): W;
  /** The args again on the worker, from what was sent. */
  receive?(this: void, sent: W, sys: Sys): A;
  /** What crosses back from the worker (given the args the core ran with); default: the core's result itself. */
  reply?(this: void, result: R, args: A): V;
  /**
   * Whose name a system error escaping the core is mapped under (default: the
   * operation's); false for a step of a public call that maps its errors itself (push, pull).
   */
  sealAs?: string | false;
  /** Always on the first worker thread: the job shares state kept in that thread with the next ones (a pull's build). */
  pinned?: boolean;
  /** The caller's result, from the core's (sync, inline) or from the reply (offloaded); input is the caller's, as validate read it. */
  finish?(this: void, result: R | V, call: OpCall<A>, ...input: In): Out;
  /** false: the input is the library's own (a registry job's), passed as it is; else the caller's, read once (readOnce). */
  callerInput?: false;
}

export interface Op<In extends unknown[], Out> {
  readonly name: string;
  /** Runs the operation on the calling thread. */
  sync(...input: In): Out;
  /** Runs it on the shared worker thread (on the calling thread after the current microtask with an injected layer). */
  async(...input: In): Promise<Out>;
}

/** A worker job: what was sent in, what goes back. */
export type JobHandler = (sent: unknown[], ctx: JobContext) => unknown;

const HANDLERS = new Map<string, JobHandler>();

/** The worker job of operation `name` (undefined: no such operation). */
export function jobHandler(name: string): JobHandler | undefined {
  return HANDLERS.get(name);
}

/** Checks a call's signal (Node's TypeError for one that is not an AbortSignal); SEAL_ABORTED, before anything is done, when it is aborted already. */
export function abortedBefore(op: string, signal: unknown): void {
  const checked = checkSignal('options.signal', signal);
  if (checked?.aborted === true) throw abortedError(op, checked);
}

/**
 * The `sys` option: undefined is the addon's layer; else an object whose every call of
 * the addon's layer is a function (Node's TypeError otherwise, naming the option).
 */
export function checkSys(name: string, value: unknown): Sys {
  if (value === undefined) return nativeSys;
  if (value === null || typeof value !== 'object') throw invalidArgType(name, 'object', value);
  const missing = Object.keys(nativeSys).find((k) => typeof (value as Record<string, unknown>)[k] !== 'function');
  if (missing !== undefined) throw invalidArgValue(name, value, `must be a syscall layer (treeseal/sys): its ${missing} is not a function`);
  return value as Sys;
}

/** Arrays longer than this are passed as they are (a list a call would refuse anyway), not copied. */
const READ_ONCE_MAX_ITEMS = 1 << 20;

/**
 * A caller's argument as it stands when the call begins: an options object or a list is
 * copied, each own property (symbol keys and non-enumerable ones too) and each item read once, so a
 * getter runs once and a Proxy answers once: what validate checks is what the call uses,
 * however the object answers later (an option once checked as one copy root and then read
 * as none captured the whole source). Plain objects and arrays inside are copied the same
 * way, a few levels down; anything else (a Buffer, an AbortSignal, a function, a class
 * instance, a syscall layer under `sys`) is passed as it is.
 */
export function readOnce(value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== 'object' || depth > 3) return value;
  if (Array.isArray(value)) {
    const n = value.length;
    if (n > READ_ONCE_MAX_ITEMS) return value;
    const out = new Array<unknown>(n);
    for (let i = 0; i < n; i++) out[i] = readOnce(value[i], depth + 1);
    return out;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if ((proto !== Object.prototype && proto !== null) || value === nativeSys) return value;
  const from = value as Record<PropertyKey, unknown>;
  const out: Record<PropertyKey, unknown> = proto === null ? Object.create(null) : {};
  for (const key of Reflect.ownKeys(from)) {
    const enumerable = Object.getOwnPropertyDescriptor(from, key)?.enumerable === true;
    const v = from[key];
    const copy = key === 'sys' ? v : readOnce(v, depth + 1);
    // One that is not enumerable stays so (no key check sees it), but is still what the call reads.
    if (enumerable) out[key] = copy;
    else Object.defineProperty(out, key, { value: copy, enumerable: false, writable: true, configurable: true });
  }
  return out;
}

/** True when the call runs with an injected syscall layer: the one test of it. */
export function isInjected(sys: Sys): boolean {
  return sys !== nativeSys;
}

/** The context of a core on the calling thread: the call's signal and progress callback. */
function localContext(call: OpCall<unknown[]>): JobContext {
  const ctx: JobContext = { isAborted: () => call.signal?.aborted === true };
  if (call.onProgress !== undefined) ctx.onProgress = call.onProgress;
  return ctx;
}

/**
 * Declares operation `name`: errors of the core are mapped once (`sealed`: a system error
 * becomes SEAL_IO or SEAL_UNAVAILABLE), whichever thread it runs on; the worker's job is
 * registered under the same name.
 */
export function defineOp<In extends unknown[], A extends unknown[], R, Out = R, W extends unknown[] = A, V = never>(
  name: string,
  spec: OpSpec<In, A, R, Out, W, V>,
): Op<In, Out> {
  if (HANDLERS.has(name)) throw new Error(`operation defined twice: ${name}`);
  const finish = spec.finish ?? ((r: R | V): Out => r as unknown as Out);
  const reply = spec.reply ?? ((r: R) => r as unknown as V);
  const send = spec.send ?? ((args: A) => args as unknown as W);
  const receive = spec.receive ?? ((sent: W) => sent as unknown as A);
  const label = spec.sealAs ?? name;
  const mapped = <T>(fn: () => T): T => (label === false ? fn() : sealed(label, fn));
  // Every operation's signal is an AbortSignal or none, sync and async alike.
  const validate = (input: In): OpCall<A> => {
    const call = spec.validate(...input);
    checkSignal('options.signal', call.signal);
    return call;
  };
  const local = (call: OpCall<A>, input: In): Out => {
    if (call.signal?.aborted === true) throw abortedError(name, call.signal);
    try {
      return finish(mapped(() => spec.core(call.sys, call.args, localContext(call as OpCall<unknown[]>))), call, ...input);
    } catch (err) {
      throw withAbortReason(err, call.signal);
    }
  };
  HANDLERS.set(name, (sent, ctx) =>
    mapped(() => {
      const args = receive(sent as W, nativeSys);
      return reply(spec.core(nativeSys, args, ctx), args);
    }),
  );
  const read = (input: In): In => (spec.callerInput === false ? input : (input.map((a) => readOnce(a)) as In));
  return {
    name,
    sync: (...given) => {
      const input = read(given);
      return local(mapped(() => validate(input)), input);
    },
    async: async (...given) => {
      const input = read(given);
      const call = mapped(() => validate(input));
      if (isInjected(call.sys)) {
        const run = (): Promise<Out> => inline(() => local(call, input));
        return call.gate === undefined ? run() : call.gate.track(run);
      }
      const hooks = { signal: call.signal, onProgress: call.onProgress, pinned: spec.pinned };
      const sent = send(call.args);
      let result: unknown;
      try {
        result = await (call.gate === undefined ? offload(name, sent, hooks) : call.gate.run(() => offload(name, sent, hooks)));
      } catch (err) {
        throw withAbortReason(err, call.signal);
      }
      return finish(result as V, call, ...input);
    },
  };
}
