/**
 * `pnpm db:stop [dataDir]`: stops the embedded PostgreSQL server running on dataDir (default
 * `.ratchet/postgres`), e.g. one left running by a process that was SIGKILLed.
 *
 *   pnpm db:stop                  # .ratchet/postgres under the directory you run it from
 *   pnpm db:stop /srv/ratchet/pg
 *
 * pnpm runs scripts from the workspace root; paths resolve against the directory it was invoked
 * from (INIT_CWD), as the app whose server this is ran there.
 */
import path from 'node:path';
import { stopEmbedded } from './embedded.js';

const invokedFrom = process.env.INIT_CWD ?? process.cwd();
const dataDir = path.resolve(invokedFrom, process.argv[2] ?? path.join('.ratchet', 'postgres'));
try {
  const stopped = await stopEmbedded(dataDir);
  console.log(stopped ? `stopped the PostgreSQL server on ${dataDir}` : `no PostgreSQL server was running on ${dataDir}`);
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exitCode = 1;
}
