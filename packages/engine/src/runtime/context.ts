/**
 * The `ctx` a workflow function receives: each durable call goes through `Execution.call` (step
 * key, replay lookup, bookkeeping) into the module that implements its kind.
 */
import { ValidationError, parseDuration, seededUuid, type WorkflowContext } from '@ratchet/sdk';
import { isUuid } from '../ids.js';
import { runAbandon, runCommit } from './commit.js';
import { runEffect } from './effect.js';
import { runEmit } from './emit.js';
import { runChild } from './child.js';
import { runWait, signalNames } from './wait.js';
import { runInfer } from './infer.js';
import { runSeal } from './seal.js';
import type { Execution } from './execution.js';
import { runSleep } from './sleep.js';
import { runStep } from './step.js';

export function createContext(run: Execution, attempt: number): WorkflowContext {
  const ctx: WorkflowContext = {
    runId: run.runId,
    tenantId: run.tenantId,
    attempt,
    step: (name, fn, opts) => run.call(name, 'step', (key, rec) => runStep(run, key, rec, fn, opts)),
    effect: (name, opts) => run.call(name, 'effect', (key, rec) => runEffect(run, 'effect', name, key, rec, opts)),
    tool: (name, opts) => run.call(name, 'tool', (key, rec) => runEffect(run, 'tool', name, key, rec, opts)),
    sleep: (name, duration) => run.call(name, 'sleep', (key, rec) => runSleep(run, name, key, rec, () => run.dbNow() + parseDuration(duration, 'duration'))),
    sleepUntil: (name, at) =>
      run.call(name, 'sleep', (key, rec) => {
        if (!(at instanceof Date) || Number.isNaN(at.getTime())) {
          return Promise.reject(new ValidationError('sleepUntil needs a valid Date', { path: ['at'] }));
        }
        return runSleep(run, name, key, rec, () => at.getTime());
      }),
    infer: (name, opts) => run.call(name, 'infer', (key, rec) => runInfer(run, name, key, rec, opts)),
    waitFor: (name, opts) =>
      run.call(name, 'wait', (key, rec) => {
        const o = optionsOf(opts);
        return runWait(run, name, key, rec, { names: [name], schema: o.schema, timeout: o.timeout }).then((r) => r.payload as never);
      }),
    waitForAny: (name, opts) =>
      run.call(name, 'wait', (key, rec) => {
        const o = optionsOf(opts);
        return runWait(run, name, key, rec, { names: signalNames(o.signals, 'signals'), schema: o.schema, timeout: o.timeout });
      }),
    seal: (name, opts) => run.call(name, 'seal', (key, rec) => runSeal(run, name, key, rec, opts)),
    commit: (contract) => {
      if (typeof contract !== 'object' || contract === null || !isUuid(contract.id) || typeof contract.hash !== 'string') {
        return Promise.reject(new ValidationError('must be the SealedContract ctx.seal returned', { path: ['contract'] }));
      }
      const name = `commit:${contract.id}`;
      return run.call(name, 'commit', (key, rec) => runCommit(run, name, key, rec, contract));
    },
    abandon: (contract, reason) => {
      if (typeof contract !== 'object' || contract === null || !isUuid(contract.id) || typeof contract.hash !== 'string') {
        return Promise.reject(new ValidationError('must be the SealedContract ctx.seal returned', { path: ['contract'] }));
      }
      if (typeof reason !== 'string' || reason.length === 0 || reason.length > 1000) {
        return Promise.reject(new ValidationError('must be a non-empty string of at most 1000 characters', { path: ['reason'] }));
      }
      const name = `commit:${contract.id}`;
      return run.call(name, 'commit', (key, rec) => runAbandon(run, name, key, rec, contract, reason));
    },
    child: (name, wf, input, opts) => run.call(name, 'child', (key, rec) => runChild(run, name, key, rec, wf as never, input, opts)),
    // The step is named by its topic: `emit('order.paid', …)` twice records order.paid#1 and #2.
    emit: (topic, payload) => run.call(topic, 'emit', (key, rec) => runEmit(run, key, rec, topic, payload)),
    now: () => run.now(),
    random: () => run.random(),
    uuid: () => seededUuid(() => run.random()),
  };
  return Object.freeze(ctx);
}

/** Options objects of ctx calls: undefined is `{}`, anything else but an object is a ValidationError. */
function optionsOf<T extends object>(opts: T | undefined): Partial<T> {
  if (opts === undefined) return {};
  if (typeof opts !== 'object' || opts === null) throw new ValidationError('must be an options object', { path: ['opts'] });
  return opts;
}
