/**
 * @ratchet/engine — the durable runtime on PostgreSQL.
 *
 * @example
 * ```ts
 * import { createEngine } from '@ratchet/engine';
 * const engine = await createEngine();          // embedded PostgreSQL under .ratchet/postgres
 * await engine.migrate();
 * await engine.close();
 * ```
 */
export { createEngine } from './engine.js';
export type { Engine, EngineOptions } from './engine.js';
export { embedded, startEmbedded, stopEmbedded } from './embedded/embedded.js';
export type { EmbeddedDatabase, EmbeddedOptions, EmbeddedServer } from './embedded/embedded.js';
export type { DatabaseOption } from './store/database.js';
export type { MigrationStatus } from './store/migrate.js';
export { DEFAULT_TENANT_ID } from './ids.js';
