/**
 * Content capture: prompts, answers, tool arguments and results as GenAI content attributes.
 * Off unless the user opts in (`captureMessageContent`, or the GenAI environment switch), since
 * content may hold personal data or secrets that must not reach a tracing backend by default.
 *
 * Messages take the conventions' JSON shape (`[{ role, parts: [{ type: 'text', content }] }]`):
 * a string prompt is one user message; an array of `{ role, content }` keeps its roles; any
 * other value is one user message holding its JSON. Each attribute is cut at `maxLength`
 * characters (marked with a trailing `…`), so one large prompt cannot blow an exporter's limits.
 */
import { ENV_CAPTURE_MESSAGE_CONTENT } from './attributes.js';

/** Whether the environment opts in (`true`, `SPAN_ONLY` or `SPAN_AND_EVENT`, any case). */
export function captureFromEnvironment(env: NodeJS.ProcessEnv = process.env): boolean {
  const value = env[ENV_CAPTURE_MESSAGE_CONTENT]?.trim().toLowerCase();
  return value === 'true' || value === 'span_only' || value === 'span_and_event';
}

export function truncate(text: string, maxLength: number): string {
  return text.length <= maxLength ? text : `${text.slice(0, Math.max(0, maxLength - 1))}…`;
}

function json(value: unknown): string {
  try {
    return typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value));
  } catch {
    return String(value);
  }
}

interface Message {
  role: string;
  parts: { type: 'text'; content: string }[];
  finish_reason?: string;
}

export function inputMessages(prompt: unknown, maxLength: number): string {
  let messages: Message[];
  if (Array.isArray(prompt) && prompt.every((m) => typeof m === 'object' && m !== null && typeof (m as { role?: unknown }).role === 'string')) {
    messages = prompt.map((m: { role: string; content?: unknown }) => ({ role: m.role, parts: [{ type: 'text', content: json(m.content) }] }));
  } else {
    messages = [{ role: 'user', parts: [{ type: 'text', content: json(prompt) }] }];
  }
  return truncate(JSON.stringify(messages), maxLength);
}

export function outputMessages(output: unknown, maxLength: number): string {
  const message: Message = { role: 'assistant', parts: [{ type: 'text', content: json(output) }], finish_reason: 'stop' };
  return truncate(JSON.stringify([message]), maxLength);
}

export function jsonContent(value: unknown, maxLength: number): string {
  return truncate(json(value ?? null), maxLength);
}
