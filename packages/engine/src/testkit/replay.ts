/**
 * The replay helper: runs recorded runs against new workflow code, with no database and no side
 * effect, to catch nondeterminism before a deploy (Temporal's replay tests).
 *
 * A recorded run is its history — `client.inspect(runId)`, or `ratchet show <runId> --json`
 * saved to a file. The new code is called with a context that answers every `ctx` call from the
 * record, in recording order (as the engine's replay does, runtime/replay-order.ts): a recorded
 * key returns its result or rethrows its error; nothing is executed. The first call the record
 * does not have is the frontier: the run would go on from there with fresh steps, so the replay
 * stops (that call never resolves) and the record is judged by what was reached:
 *
 * - a recorded key reached as another kind (`step` where the record has an `effect`) — mismatch;
 * - a recorded step the code no longer reaches before it goes quiet, returns or throws (a renamed
 *   or removed step, a reordered branch) — mismatch, naming the record expected and the calls the
 *   code made instead;
 * - otherwise the new code replays the record: it may be deployed under the same version.
 *
 * "Quiet" means no call made progress for `stallMs` (default 100 ms): workflow code awaits only
 * ctx calls, so between two calls it takes microseconds.
 */
import {
  NonDeterminismError,
  ValidationError,
  deserializeError,
  seededRandom,
  seededUuid,
  type SerializedError,
  type Workflow,
  type WorkflowContext,
} from '@ratchet/sdk';
import type { OperationKind } from '../schema/index.js';
import { isUuid } from '../ids.js';
import type { RunDetail } from '../client/inspect.js';

/** The part of a history replay reads: `RunDetail` (client.inspect), or its JSON. */
export interface RecordedRun {
  run: { runId: string; tenantId: string; workflow: string; version: string; input: unknown; createdAt: Date | string; state?: string };
  steps: readonly {
    stepKey: string;
    kind: OperationKind;
    state: string;
    seq: number;
    result: unknown;
    error: SerializedError | null;
    completedAt: Date | string | null;
    createdAt: Date | string;
  }[];
}

export interface ReplayOptions {
  /** How long with no progress before the replay judges where the code stopped. Default 100 ms. */
  stallMs?: number;
}

export interface ReplayReport {
  runId: string;
  workflow: string;
  version: string;
  /** The new code replays the record. */
  ok: boolean;
  /** Records replayed, of those the run has. */
  replayed: number;
  recorded: number;
  /** Calls beyond the record (the run would execute these next). */
  frontier: string[];
  /** When not ok: what was wrong, as the engine would park the run. */
  error?: NonDeterminismError;
}

type Step = RecordedRun['steps'][number];

const NEVER = new Promise<never>(() => {});

/** Replays one recorded run against `wf` (see the file comment). Never throws for a mismatch: it reports it. */
export async function replayRun(wf: Workflow<any, any, any>, history: RecordedRun | RunDetail, options: ReplayOptions = {}): Promise<ReplayReport> {
  const h = history as RecordedRun;
  if (!h || typeof h !== 'object' || !h.run || !Array.isArray(h.steps)) {
    throw new ValidationError('must be a recorded run: client.inspect(runId) or `ratchet show <runId> --json`', { path: ['history'] });
  }
  if (h.run.workflow !== wf.name) {
    throw new ValidationError(`the history is a run of ${h.run.workflow}, not of ${wf.name}`, { path: ['history', 'run', 'workflow'] });
  }
  const stallMs = options.stallMs ?? 100;
  const runId = h.run.runId;
  const settled = h.steps.filter((s) => s.state !== 'reserved');
  const byKey = new Map(h.steps.map((s) => [s.stepKey, s]));
  const order = [...settled].sort((a, b) => a.seq - b.seq);
  const report: ReplayReport = { runId, workflow: wf.name, version: h.run.version, ok: true, replayed: 0, recorded: order.length, frontier: [] };

  let cursor = 0;
  let progress = 0;
  let finished: 'returned' | 'threw' | undefined;
  let mismatch: NonDeterminismError | undefined;
  const queued = new Map<string, () => void>();
  const occurrences = new Map<string, number>();
  let lastFact = new Date(h.run.createdAt);
  let lastKey: string | undefined;
  let random = seededRandom(`${runId}:`);
  const fact = (key: string, at: Date | string | null) => {
    if (at && new Date(at).getTime() > lastFact.getTime()) lastFact = new Date(at);
    if (key !== lastKey) {
      lastKey = key;
      random = seededRandom(`${runId}:${key}`);
    }
  };
  let releasing = false;
  const pump = () => {
    if (releasing || mismatch) return;
    const next = order[cursor];
    if (!next) return;
    const release = queued.get(next.stepKey);
    if (!release) return;
    queued.delete(next.stepKey);
    cursor += 1;
    releasing = true;
    release();
    setImmediate(() => {
      releasing = false;
      pump();
    });
  };

  const call = <T>(name: string, kind: OperationKind, answer: (s: Step) => T): Promise<T> => {
    if (mismatch) return NEVER;
    progress += 1;
    const n = (occurrences.get(name) ?? 0) + 1;
    occurrences.set(name, n);
    const key = `${name}#${n}`;
    const rec = byKey.get(key);
    if (rec && rec.kind !== kind) {
      mismatch = new NonDeterminismError(`replay reached ${kind} ${key}, but the run recorded ${rec.kind} ${key} there`, {
        runId,
        step: key,
        expected: `${rec.kind} ${key}`,
        actual: `${kind} ${key}`,
      });
      return NEVER;
    }
    if (!rec || rec.state === 'reserved') {
      report.frontier.push(key);
      return NEVER;
    }
    return new Promise<void>((resolve) => {
      queued.set(key, resolve);
      pump();
    }).then(() => {
      progress += 1;
      report.replayed += 1;
      fact(key, rec.completedAt ?? rec.createdAt);
      if (rec.state === 'failed' || rec.state === 'unknown') throw deserializeError(rec.error ?? { name: 'Error', message: 'failed' });
      return answer(rec);
    });
  };
  const result = (s: Step) => s.result as never;
  const ctx: WorkflowContext = {
    runId,
    tenantId: h.run.tenantId,
    attempt: 1,
    step: (name) => call(name, 'step', result),
    effect: (name) => call(name, 'effect', result),
    tool: (name) => call(name, 'tool', result),
    infer: (name) => call(name, 'infer', (s) => (s.result as { output: never }).output),
    sleep: (name) => call(name, 'sleep', () => undefined),
    sleepUntil: (name) => call(name, 'sleep', () => undefined),
    waitFor: (name) => call(name, 'wait', (s) => (s.result as { payload: never }).payload),
    waitForAny: (name) => call(name, 'wait', (s) => ({ signal: (s.result as { signal: string }).signal, payload: (s.result as { payload: never }).payload })),
    seal: (name) => call(name, 'seal', result),
    commit: (contract) => call(`commit:${contractId(contract)}`, 'commit', result),
    abandon: (contract) => call(`commit:${contractId(contract)}`, 'commit', () => undefined),
    child: (name) => call(name, 'child', result),
    emit: (topic) => call(topic, 'emit', () => undefined),
    now: () => new Date(lastFact.getTime()),
    random: () => random(),
    uuid: () => seededUuid(() => random()),
  } as WorkflowContext;

  Promise.resolve()
    .then(() => wf.fn(ctx, h.run.input as never))
    .then(
      () => (finished = 'returned'),
      () => (finished = 'threw'),
    );
  // Wait until the code is quiet: finished, mismatched, or no progress for stallMs.
  let seen = -1;
  let quietSince = Date.now();
  for (;;) {
    await new Promise((r) => setImmediate(r));
    if (mismatch || finished) break;
    if (progress !== seen) {
      seen = progress;
      quietSince = Date.now();
    } else if (Date.now() - quietSince >= stallMs) break;
  }
  if (!mismatch && cursor < order.length) {
    const expected = order[cursor]!;
    const reached = [...queued.keys(), ...report.frontier];
    const actual = reached.length > 0 ? reached.join(', ') : finished ? `the code ${finished === 'returned' ? 'returned' : 'threw'} first` : 'nothing (the code stopped)';
    mismatch = new NonDeterminismError(
      `replay waited for ${expected.kind} ${expected.stepKey}, recorded next, but the code reached ${actual}${reached.length > 0 ? ' instead' : ''}`,
      { runId, step: expected.stepKey, expected: `${expected.kind} ${expected.stepKey}`, actual },
    );
  }
  if (mismatch) {
    report.ok = false;
    report.error = mismatch;
  }
  return report;
}

/**
 * Replays every history and throws a NonDeterminismError naming each run that the new code does
 * not replay (the message lists them all). The reports otherwise.
 */
export async function assertReplays(wf: Workflow<any, any, any>, histories: readonly (RecordedRun | RunDetail)[], options: ReplayOptions = {}): Promise<ReplayReport[]> {
  const reports: ReplayReport[] = [];
  for (const h of histories) reports.push(await replayRun(wf, h, options));
  const bad = reports.filter((r) => !r.ok);
  if (bad.length > 0) {
    const first = bad[0]!.error!;
    throw new NonDeterminismError(`${bad.length} of ${reports.length} recorded run(s) of ${wf.name} do not replay on this code: ${bad.map((r) => `${r.runId}: ${r.error!.message}`).join('; ')}`, {
      ...(first.runId ? { runId: first.runId } : {}),
      ...(first.step ? { step: first.step } : {}),
      expected: first.expected,
      actual: first.actual,
    });
  }
  return reports;
}

function contractId(contract: unknown): string {
  const id = (contract as { id?: unknown } | null)?.id;
  if (typeof id !== 'string' || !isUuid(id)) throw new ValidationError('must be the SealedContract ctx.seal returned', { path: ['contract'] });
  return id;
}
