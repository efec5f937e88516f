/**
 * Named fault-injection points. Tests hook them to crash (SIGKILL the process), delay or drop
 * the connection at an exact phase of a run, so "a worker dies between reserve and execute" is a
 * deterministic test rather than a hope. Production passes no hooks; each point then costs one
 * property lookup.
 */
export const FAULT_POINTS = [
  'afterClaim',
  'afterReserveBeforeExecute',
  'afterExecuteBeforeRecord',
  'afterRecord',
  'beforeStepRecord',
  'duringLeaseRenewal',
  'beforeCommit',
  'beforeCommitRetry',
  'afterCommitBeforePublish',
] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

export interface FaultContext {
  readonly point: FaultPoint;
  readonly runId: string;
  readonly stepKey?: string;
  readonly attempt?: number;
}

export type FaultHooks = Partial<Record<FaultPoint, (context: FaultContext) => void | Promise<void>>>;

export async function fault(hooks: FaultHooks | undefined, context: FaultContext): Promise<void> {
  const hook = hooks?.[context.point];
  if (hook) await hook(context);
}

/**
 * Hooks from the RATCHET_FAULTS environment variable, for child processes in crash tests:
 * `RATCHET_FAULTS=afterReserveBeforeExecute:kill` SIGKILLs the process at that point (the first
 * time it is reached; `:kill@2` the second time).
 */
export function faultsFromEnv(env: NodeJS.ProcessEnv = process.env): FaultHooks {
  const spec = env.RATCHET_FAULTS;
  if (!spec) return {};
  const hooks: FaultHooks = {};
  for (const item of spec.split(',')) {
    const match = /^(\w+):kill(?:@(\d+))?$/.exec(item.trim());
    if (!match || !(FAULT_POINTS as readonly string[]).includes(match[1]!)) {
      throw new Error(`RATCHET_FAULTS: cannot read "${item}"; expected <point>:kill[@n] with a point of ${FAULT_POINTS.join(', ')}`);
    }
    const nth = Number(match[2] ?? 1);
    let seen = 0;
    hooks[match[1] as FaultPoint] = () => {
      seen += 1;
      if (seen === nth) process.kill(process.pid, 'SIGKILL');
    };
  }
  return hooks;
}
