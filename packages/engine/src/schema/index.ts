/** The drizzle schema of `ratchet`: the source of the generated migrations in `drizzle/`. */
export { ratchetSchema } from './common.js';
export { tasks, TASK_STATES, FINAL_TASK_STATES } from './tasks.js';
export type { TaskRow, TaskState } from './tasks.js';
export { operations, OPERATION_STATES, OPERATION_KINDS } from './operations.js';
export type { OperationRow, OperationState, OperationKind } from './operations.js';
export { events, EVENT_TYPES } from './events.js';
export type { EventRow, EventType } from './events.js';
export { outbox } from './outbox.js';
export type { OutboxRow } from './outbox.js';
export { contracts, CONTRACT_STATUSES } from './contracts.js';
export type { ContractRow, ContractStatus } from './contracts.js';
export { signals } from './signals.js';
export type { SignalRow } from './signals.js';
export { clock } from './clock.js';
export { schedules, CATCH_UP_POLICIES } from './schedules.js';
export type { ScheduleRow, CatchUpPolicy } from './schedules.js';
export { idempotencyKeys, tenantPurges, tenantSessions, tenantSecret, TOMBSTONE_OUTCOMES, PURGE_STATES } from './tenancy.js';
export type { IdempotencyKeyRow, TenantPurgeRow } from './tenancy.js';
