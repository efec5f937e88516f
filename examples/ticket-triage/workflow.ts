/**
 * The ticket-triage agent: reason → seal → commit (DESIGN §4).
 *
 *   infer   the model classifies the ticket (stochastic; recorded once, never called on replay)
 *   seal    the decision becomes a contract: operations + dependencies, canonical JSON + SHA-256
 *   approve billing decisions move money: a person approves the exact sealed contract (its hash)
 *           — `ctx.waitFor('approval')`, no worker held while waiting — or it is abandoned
 *   commit  one SERIALIZABLE transaction applies it through the whitelisted actions — or rejects
 *           it, with the reason, when a dependency no longer holds
 */
import { z } from 'zod';
import pg from 'pg';
import { ContractRejectedError, isRatchetError, workflow } from '@ratchet/sdk';
import { classify } from './model.js';

let pool: pg.Pool | undefined;
/** The connection the stub model counts its calls on. */
export function useModelDatabase(url: string): void {
  pool = new pg.Pool({ connectionString: url, max: 2 });
  pool.on('error', () => {});
}

/** What a reviewer sends (`client.signal(runId, 'approval', …)`): the verdict on the contract with this hash. */
export const Approval = z.object({ approve: z.boolean(), hash: z.string().regex(/^[0-9a-f]{64}$/), by: z.string().min(1) });

const Decision = z.object({ priority: z.enum(['high', 'medium', 'low']), team: z.enum(['billing', 'hardware', 'accounts', 'support']) });

export const triage = workflow(
  {
    name: 'triage-ticket',
    version: '2',
    input: z.object({ ticket: z.string().min(1), userId: z.number().int(), incident: z.string().optional() }),
    // Validated when sent (a bad approval is refused to its sender) and when the wait takes it.
    signals: { approval: Approval },
  },
  async (ctx, { ticket, userId, incident }) => {
    const decision = await ctx.infer('classify', {
      model: 'stub-triage',
      provider: 'demo',
      schema: Decision,
      prompt: { system: 'Classify the support ticket: priority and team.', ticket },
      maxSamples: 4,
      call: ({ signal }) => classify(pool!, ticket, signal),
    });
    const contract = await ctx.seal('ticket', {
      agent: 'triage-agent@1',
      operations: [
        { action: 'tickets.insert', input: { ...decision, summary: ticket, userId, ...(incident ? { incident } : {}) } },
        { action: 'users.touch', input: { id: userId, at: ctx.now() } },
      ],
      dependencies: [
        { kind: 'exists', table: 'triage_demo.users', where: { id: userId } },
        // One ticket per incident, however many reports of it arrive at once.
        ...(incident ? [{ kind: 'notExists' as const, table: 'triage_demo.tickets', where: { incident } }] : []),
      ],
    });
    if (decision.team === 'billing') {
      const review = await ctx.waitFor<z.infer<typeof Approval>>('approval', { timeout: '1d' }).catch((error: unknown) => {
        if (isRatchetError(error, 'TIMEOUT')) return null;
        throw error;
      });
      if (!review?.approve || review.hash !== contract.hash) {
        const reason = !review
          ? 'no approval within a day'
          : review.hash !== contract.hash
            ? `the approval names another contract (${review.hash.slice(0, 12)}…)`
            : `declined by ${review.by}`;
        await ctx.abandon(contract, reason);
        return { status: 'abandoned' as const, ...decision, hash: contract.hash, reason };
      }
    }
    try {
      const committed = await ctx.commit(contract);
      return { status: 'committed' as const, ...decision, hash: contract.hash, ticketId: (committed.results[0] as { ticketId: number }).ticketId };
    } catch (error) {
      if (error instanceof ContractRejectedError) return { status: 'rejected' as const, ...decision, hash: contract.hash, reason: error.reason };
      throw error;
    }
  },
);
