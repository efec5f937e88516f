/**
 * The workflow under test in `follow-up.test.ts`: three days after an order, email the customer;
 * wait up to a week for a reply; escalate to a person if none comes. The mailer is a plain
 * object so the test can count what was sent.
 */
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';

export const mailer = { sent: [] as { to: string; key: string }[] };

export const followUp = workflow(
  { name: 'order-follow-up', version: '1', input: z.object({ orderId: z.string(), email: z.string() }) },
  async (ctx, { orderId, email }) => {
    await ctx.sleep('cool-off', '3d');
    await ctx.effect('email', {
      input: { to: email, orderId },
      execute: async ({ idempotencyKey, input }) => {
        mailer.sent.push({ to: input.to, key: idempotencyKey });
        return { messageId: `m-${orderId}` };
      },
    });
    try {
      const reply = await ctx.waitFor<{ happy: boolean }>('reply', { timeout: '7d' });
      return reply.happy ? 'closed' : 'escalated';
    } catch (error) {
      if ((error as { code?: string }).code !== 'TIMEOUT') throw error;
      return ctx.step('escalate', () => 'escalated: no reply');
    }
  },
);

/** The next deploy, same version: a step renamed. Replay tests catch that before it ships. */
export const followUpRenamed = workflow(
  { name: 'order-follow-up', version: '1', input: z.object({ orderId: z.string(), email: z.string() }) },
  async (ctx, { orderId, email }) => {
    await ctx.sleep('cool-off', '3d');
    await ctx.effect('send-email', { input: { to: email, orderId }, execute: async () => ({ messageId: `m-${orderId}` }) });
    return 'closed';
  },
);
