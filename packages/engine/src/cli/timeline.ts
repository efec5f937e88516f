/**
 * `ratchet show`: a run as a timeline a person reads at 3 a.m. — the run's header (state,
 * version, claims, lease, the error, the trace link), then its steps in recording order with
 * attempts, durations and states (effects with their idempotency keys and how their outcome was
 * settled, sleeps and waits with their targets), the contracts with hash and status, signals,
 * children and the events.
 */
import type { RunDetail, StepInfo } from '../client/inspect.js';
import { age, brief, duration, table, time, traceLink } from './format.js';

export function renderRun(d: RunDetail, traceTemplate: string | undefined, now = new Date()): string {
  const r = d.run;
  const lines: string[] = [];
  lines.push(`run ${r.runId}  ${r.workflow}@${r.version}  ${r.state.toUpperCase()}`);
  lines.push(`  tenant    ${r.tenantId}`);
  lines.push(`  created   ${time(r.createdAt)} (${age(r.createdAt, now)})   updated ${time(r.updatedAt)}${r.completedAt ? `   finished ${time(r.completedAt)}` : ''}`);
  const facts = [`claims ${r.claimCount}`, `version ${r.stateVersion}`];
  if (r.idempotencyKey) facts.push(`key ${r.idempotencyKey}`);
  if (r.concurrencyKey) facts.push(`concurrency key ${r.concurrencyKey}`);
  if (r.priority !== 0) facts.push(`priority ${r.priority}`);
  if (r.parentId) facts.push(`parent ${r.parentId}`);
  lines.push(`  ${facts.join(' · ')}`);
  if (r.leaseOwner) lines.push(`  lease     ${r.leaseOwner} until ${time(r.leaseExpiresAt)} (${age(r.leaseExpiresAt, now)})`);
  if (r.wakeAt) lines.push(`  wakes     ${time(r.wakeAt)} (${age(r.wakeAt, now)})`);
  if (r.deadlineAt) lines.push(`  deadline  ${time(r.deadlineAt)} (${age(r.deadlineAt, now)})`);
  if (r.cancelRequestedAt) lines.push(`  cancel requested ${time(r.cancelRequestedAt)}`);
  if (r.traceId) {
    const link = traceLink(traceTemplate, r.traceId, r.spanId);
    lines.push(`  trace     ${r.traceId}${link ? `  ${link}` : ''}`);
  }
  lines.push(`  input     ${brief(r.input, 160)}`);
  if (r.state === 'completed') lines.push(`  output    ${brief(r.output, 160)}`);
  if (r.error) lines.push(`  error     ${r.error.name}${r.error.code ? ` [${r.error.code}]` : ''}: ${r.error.message}`);
  if (r.state === 'parked') {
    const stuck = d.steps.filter((s) => s.state === 'unknown' || s.state === 'reserved').map((s) => s.stepKey);
    if (stuck.length > 0) lines.push(`  settle with: ratchet resolve ${r.runId} ${stuck[0]} --result <json> | --error <message>`);
  }
  if (r.state === 'failed') lines.push(`  re-run from the failure point: ratchet retry ${r.runId}`);

  lines.push('', `STEPS (${d.steps.length})`);
  if (d.steps.length > 0) {
    lines.push(
      indent(
        table(
          ['SEQ', 'STEP', 'KIND', 'STATE', 'ATTEMPT', 'AT', 'DURATION', 'DETAIL'],
          d.steps.map((s) => [
            String(s.seq),
            s.stepKey,
            s.kind,
            s.state,
            String(s.attempt),
            `+${duration(s.createdAt.getTime() - r.createdAt.getTime())}`,
            s.durationMs === null ? (s.state === 'reserved' ? 'in flight' : '-') : duration(s.durationMs),
            stepDetail(s, d),
          ]),
        ),
      ),
    );
  }
  if (d.contracts.length > 0) {
    lines.push('', `CONTRACTS (${d.contracts.length})`);
    lines.push(
      indent(
        table(
          ['ID', 'STEP', 'STATUS', 'SHA-256', 'KEY', 'SEAL→COMMIT', 'DETAIL'],
          d.contracts.map((c) => [
            c.id,
            c.stepKey ?? '-',
            c.status,
            c.bodyHash,
            c.idempotencyKey,
            c.committedAt ? duration(c.committedAt.getTime() - c.createdAt.getTime()) : '-',
            c.status === 'failed' ? brief(c.errorDetail, 80) : `${operationCount(c.body)} operation(s)`,
          ]),
        ),
      ),
    );
  }
  if (d.signals.length > 0) {
    lines.push('', `SIGNALS (${d.signals.length})`);
    lines.push(
      indent(
        table(
          ['NAME', 'SENT', 'CONSUMED BY', 'PAYLOAD'],
          d.signals.map((s) => [s.name, time(s.createdAt), s.consumedAt ? `${s.consumedBy ?? '?'} at ${time(s.consumedAt)}` : 'pending', brief(s.payload, 60)]),
        ),
      ),
    );
  }
  if (d.children.length > 0) {
    lines.push('', `CHILDREN (${d.children.length})`);
    lines.push(indent(table(['RUN', 'WORKFLOW', 'STATE', 'CREATED'], d.children.map((c) => [c.runId, `${c.workflow}@${c.version}`, c.state, time(c.createdAt)]))));
  }
  lines.push('', `EVENTS (${d.events.length})`);
  lines.push(
    indent(
      table(
        ['SEQ', 'EVENT', 'AT', 'ACTOR', 'PAYLOAD'],
        d.events.map((e) => [String(e.seq), e.type, time(e.createdAt), e.actor ?? '-', e.payload === null ? '' : brief(e.payload, 70)]),
      ),
    ),
  );
  return lines.join('\n');
}

function stepDetail(s: StepInfo, d: RunDetail): string {
  const parts: string[] = [];
  const result = s.result as Record<string, unknown> | null;
  if (s.kind === 'sleep' && result && typeof result.wakeAt === 'string') parts.push(`until ${result.wakeAt.replace(/\.\d{3}Z$/, 'Z')}`);
  if (s.kind === 'wait') {
    if (s.state === 'reserved') parts.push(`waiting for ${brief((result as { signals?: unknown })?.signals ?? '?', 40)}${s.deadlineAt ? ` until ${time(s.deadlineAt)}` : ''}`);
    else if (result && 'name' in result) parts.push(`got ${String(result.name)}`);
  }
  if (s.idempotencyKey) parts.push(`key ${s.idempotencyKey}`);
  if (s.providerReference) parts.push(s.providerReference === 'reconciled' ? 'settled by reconcile()' : s.providerReference);
  if ((s.kind === 'effect' || s.kind === 'tool') && s.state === 'reserved' && s.deadlineAt) parts.push(`in flight until ${time(s.deadlineAt)}`);
  if (s.state === 'unknown') parts.push('outcome unknown: resolve it');
  if (s.kind === 'seal') {
    const c = d.contracts.find((x) => x.stepKey === s.stepKey);
    if (c) parts.push(`contract ${c.bodyHash.slice(0, 12)}… ${c.status}`);
  }
  if (s.kind === 'child' && result && typeof result.runId === 'string') parts.push(`child ${result.runId}`);
  if (s.kind === 'infer' && result && typeof result.model === 'string') parts.push(`model ${result.model}`);
  if (s.error) parts.push(`${s.error.name}${s.error.code ? ` [${s.error.code}]` : ''}: ${s.error.message}`);
  else if (s.kind === 'step' && s.state === 'succeeded') parts.push(`→ ${brief(s.result, 50)}`);
  return parts.join(' · ');
}

function operationCount(body: unknown): number {
  const ops = (body as { operations?: unknown[] } | null)?.operations;
  return Array.isArray(ops) ? ops.length : 0;
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
}
