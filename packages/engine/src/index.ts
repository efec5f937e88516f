/**
 * @ratchet/engine — the durable runtime on PostgreSQL.
 *
 * @example
 * ```ts
 * import { z } from 'zod';
 * import { workflow } from '@ratchet/sdk';
 * import { createEngine } from '@ratchet/engine';
 *
 * const greet = workflow({ name: 'greet', version: '1', input: z.object({ name: z.string() }) }, async (ctx, { name }) => {
 *   const text = await ctx.step('compose', () => `Hello, ${name}!`);
 *   await ctx.sleep('pause', '2s');
 *   return text;
 * });
 * const engine = await createEngine({ workflows: [greet] });   // embedded PostgreSQL under .ratchet/postgres
 * await engine.migrate();
 * console.log(await engine.run(greet, { name: 'Ada' }));       // { runId, state: 'sleeping' } — a worker finishes it
 * await engine.close();
 * ```
 */
import type { NodePgDatabase } from 'drizzle-orm/node-postgres';

declare module '@ratchet/sdk' {
  interface ActionTxExtensions {
    /** Drizzle on the commit transaction's connection: `tx.db.insert(tickets).values(input)`. */
    readonly db: NodePgDatabase;
  }
}

export { createEngine } from './engine.js';
export type { Engine, EngineOptions, RunResult } from './engine.js';
export { Client } from './client/client.js';
export type { RunHandle, RunInfo, StartOptions } from './client/client.js';
export type { RunDetail, StepInfo as RunStepInfo, EngineStatsReport } from './client/inspect.js';
export type { RetryResult } from './client/retry.js';
export type { ChildInfo, ContractInfo, EventInfo, SignalInfo } from './store/inspect.js';
export type { RunsByVersion, UnservedPair, WorkerRecord } from './store/workers.js';
export { Worker } from './worker/worker.js';
export type { WorkerOptions, WorkerStats } from './worker/worker.js';
export type { InFlightRun } from './runtime/execution.js';
export { Relay } from './relay/relay.js';
export type { OutboxMessage, Publish, PublishContext, PublishResult, RelayBackoff, RelayOptions, RelayStats } from './relay/relay.js';
export { notifyPublisher, NOTIFY_PAYLOAD_LIMIT } from './relay/publishers.js';
export type { NotifyPayload, NotifyPublisherOptions } from './relay/publishers.js';
export { embedded, startEmbedded, stopEmbedded } from './embedded/embedded.js';
export type { EmbeddedDatabase, EmbeddedOptions, EmbeddedServer } from './embedded/embedded.js';
export type { DatabaseOption } from './store/database.js';
export type { MigrationStatus } from './store/migrate.js';
export { registerInstrumentation } from './instrumentation.js';
export type { Instrumentation, SegmentInfo, SegmentOutcome, StepInfo, StepKind, StepOutcome, TraceIds } from './instrumentation.js';
export { FAULT_POINTS } from './faults.js';
export type { FaultContext, FaultHooks, FaultPoint } from './faults.js';
export type { ContractStatsReport } from './contracts/stats.js';
export { Schedules } from './schedules/schedules.js';
export type { ScheduleInfo, ScheduleOptions } from './schedules/schedules.js';
export { scheduledSlot } from './schedules/scheduler.js';
export type { ScheduledRun, TickResult } from './schedules/scheduler.js';
export { ON_TIME_TOLERANCE_MS } from './schedules/slots.js';
export type { InferRecord } from './runtime/infer.js';
export { DEFAULT_TENANT_ID } from './ids.js';
export { Retention, DEFAULT_RUN_RETENTION, DEFAULT_KEY_RETENTION } from './retention/retention.js';
export type { RetentionCounts, RetentionOptions, RetentionProgress, RetentionReport, RetentionSchedule, RetentionScheduleOptions } from './retention/retention.js';
export { Tenants, PURGE_POLICY } from './tenants/tenants.js';
export type { PurgeHook, PurgeOptions, PurgeReport } from './tenants/tenants.js';
export { TASK_STATES, OPERATION_STATES, OPERATION_KINDS, EVENT_TYPES, CONTRACT_STATUSES, CATCH_UP_POLICIES } from './schema/index.js';
export type { TaskState, OperationState, OperationKind, EventType, ContractStatus, CatchUpPolicy } from './schema/index.js';
