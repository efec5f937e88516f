/** The engine configuration the demo and its worker processes share. */
import type { EngineOptions } from '@ratchet/engine';
import { insertTicket, tickets, touchUser, users } from './app.js';
import { triage } from './workflow.js';

export const engineOptions = {
  workflows: [triage],
  actions: [insertTicket, touchUser],
  contractTables: [users, tickets],
  leaseMs: 2_000,
} satisfies EngineOptions;
