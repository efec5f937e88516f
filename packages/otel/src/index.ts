/**
 * @ratchet/otel — OpenTelemetry for Ratchet (spans for runs, steps, model and tool calls,
 * following the GenAI semantic conventions). Not built yet: the engine already exposes the
 * instrumentation hooks it will plug into.
 */
export {};
