// The shape of an agent contract: operations to apply through registered actions, the
// dependencies that must hold, the sealed body and its hash, and the result of committing it.
// Types only: sealing and committing are the engine's (DESIGN §4).

/** One operation of a contract: a registered action's name and its input. */
export interface ContractOperation {
  action: string;
  input: unknown;
}

/**
 * A condition checked inside the commit transaction. `exists` / `notExists` match rows of
 * `table` whose columns equal `where`; `check` runs a registered check (`defineCheck`) by name.
 */
export type Dependency =
  | { kind: 'exists'; table: string; where: Record<string, unknown> }
  | { kind: 'notExists'; table: string; where: Record<string, unknown> }
  | { kind: 'check'; check: string; input: unknown };

/**
 * The body that is serialized canonically and hashed when a contract is sealed. Everything in it
 * is fixed by the run's durable facts, so every replay seals byte-identical bodies.
 */
export interface ContractBody {
  /** The contract format version. */
  version: number;
  /** The agent that decided (`SealOptions.agent`), or null. */
  agent: string | null;
  /** The run that sealed it. */
  runId: string;
  /** `ctx.now()` at sealing (ISO 8601): the time of the latest durable fact, not the wall clock. */
  sealedAt: string;
  operations: ContractOperation[];
  dependencies: Dependency[];
}

/** A sealed contract: a frozen body and its SHA-256, ready for `ctx.commit`. */
export interface SealedContract {
  readonly id: string;
  readonly idempotencyKey: string;
  /** SHA-256 (hex) of the body's canonical JSON. */
  readonly hash: string;
  /** The contract format version (`body.version`). */
  readonly version: number;
  readonly body: ContractBody;
}

/** What `ctx.commit` returns once every operation was applied. */
export interface CommitResult {
  contractId: string;
  hash: string;
  status: 'committed';
  /** Each operation's action result, in order. */
  results: unknown[];
}

