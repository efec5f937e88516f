/**
 * A stochastic stand-in for a language model, sampling at temperature 0.8: the same ticket can
 * be classified differently on two calls, and about one answer in eight is malformed (the schema
 * rejects it and Ratchet samples again). Every call is counted in `triage_demo.model_calls`.
 * Swap `classify` for a real client (OpenAI, Anthropic, the Vercel AI SDK): nothing else changes.
 */
import type pg from 'pg';

const TEAMS = ['billing', 'hardware', 'accounts', 'support'] as const;
const KEYWORDS: Record<(typeof TEAMS)[number], string[]> = {
  billing: ['invoice', 'charge', 'refund', 'card'],
  hardware: ['printer', 'laptop', 'screen', 'fire'],
  accounts: ['password', 'login', 'locked', '2fa'],
  support: [],
};
const TEMPERATURE = 0.8;

export interface ModelAnswer {
  output: unknown;
  usage: { inputTokens: number; outputTokens: number };
  responseModel: string;
}

export async function classify(pool: pg.Pool, ticket: string, signal: AbortSignal): Promise<ModelAnswer> {
  await new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, 40 + Math.random() * 80); // latency of a small model
    signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)));
  });
  const text = ticket.toLowerCase();
  const teamScores = TEAMS.map((team) => KEYWORDS[team].filter((k) => text.includes(k)).length + (team === 'support' ? 0.3 : 0));
  const urgency = ['fire', 'down', 'locked', 'urgent', 'refund'].filter((k) => text.includes(k)).length;
  const priority = sample(['low', 'medium', 'high'], [0.6, 0.8, 0.2 + urgency]);
  const output =
    Math.random() < 0.12
      ? { priority: 'URGENT!!!', team: '' } // malformed: fails the schema
      : { priority, team: sample([...TEAMS], teamScores.map((s) => s * 2)) };
  await pool.query(`INSERT INTO triage_demo.model_calls (ticket, answer, pid) VALUES ($1, $2, $3)`, [ticket, JSON.stringify(output), process.pid]);
  return { output, usage: { inputTokens: 20 + ticket.length / 4, outputTokens: 9 }, responseModel: 'stub-triage-2026-11' };
}

/** Softmax sampling over `logits` at TEMPERATURE. */
function sample<T>(choices: readonly T[], logits: number[]): T {
  const weights = logits.map((l) => Math.exp(l / TEMPERATURE));
  let r = Math.random() * weights.reduce((a, b) => a + b, 0);
  for (const [i, w] of weights.entries()) {
    r -= w;
    if (r <= 0) return choices[i]!;
  }
  return choices[choices.length - 1]!;
}
