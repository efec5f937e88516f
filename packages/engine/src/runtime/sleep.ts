/**
 * `ctx.sleep` / `ctx.sleepUntil`: the target time is recorded as the step's result when the
 * call is first reached; replay reads it back. Waiting is `Execution.waitUntil`: a timer for up
 * to a second, otherwise the run may suspend (state sleeping, `wake_at` = the earliest target of
 * the waits in flight) and holds no worker until then. After the sleep, `ctx.now()` is its target.
 */
import type { OperationRecord } from '../store/rows.js';
import type { Execution } from './execution.js';

export async function runSleep(run: Execution, name: string, key: string, recorded: OperationRecord | undefined, target: () => number): Promise<void> {
  let wakeAt: Date;
  if (recorded) {
    wakeAt = new Date((recorded.result as { wakeAt: string }).wakeAt);
  } else {
    wakeAt = new Date(target());
    const at = wakeAt;
    await run.instrument({ kind: 'sleep', name, stepKey: key, attempt: 1, until: at }, () => run.write({
      stepName: name,
      stepKey: key,
      kind: 'sleep',
      idempotencyKey: null,
      inputHash: null,
      state: 'succeeded',
      attempt: 1,
      expectedAttempt: null,
      inFlight: false,
      deadlineInMs: null,
      result: { wakeAt: at.toISOString() },
    }));
  }
  await run.waitUntil(key, wakeAt);
  run.fact(key, wakeAt);
}
