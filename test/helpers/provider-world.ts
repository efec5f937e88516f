/**
 * The setup crash and lease tests share: a database with the fake payment provider's tables, an
 * engine serving the fixture workflows, and worker processes (killed after each test) that run
 * them — `worker('afterRecord:kill')` SIGKILLs itself at that fault point.
 */
import { afterEach, beforeAll } from 'vitest';
import type { Engine, EngineOptions } from '@ratchet/engine';
import type { TestDatabase } from './database.js';
import { engineOn, testDatabase } from './engine.js';
import { spawnWorker, type WorkerProcess } from './processes.js';
import { PROVIDER_DDL, all } from '../fixtures/workflows.js';

export interface ProviderWorld {
  readonly db: TestDatabase;
  readonly engine: Engine;
  /** A worker process on this database; `faults` is a RATCHET_FAULTS spec. */
  worker(faults?: string): WorkerProcess;
}

export function providerWorld(options: Omit<EngineOptions, 'database'> = {}, workerEnv: Record<string, string> = {}): ProviderWorld {
  let db: TestDatabase | undefined;
  let engine: Engine | undefined;
  const processes: WorkerProcess[] = [];
  beforeAll(async () => {
    db = await testDatabase();
    await db.pool.query(PROVIDER_DDL);
    process.env.PROVIDER_URL = db.url;
    engine = await engineOn(db, { workflows: all, ...options });
  });
  afterEach(async () => {
    await Promise.all(processes.splice(0).map((p) => p.kill('SIGKILL')));
  });
  return {
    get db() {
      return db!;
    },
    get engine() {
      return engine!;
    },
    worker(faults) {
      const p = spawnWorker({ DATABASE_URL: db!.url, PROVIDER_URL: db!.url, ...workerEnv, ...(faults ? { RATCHET_FAULTS: faults } : {}) });
      processes.push(p);
      return p;
    },
  };
}
