// Maka's activation contract (spec §10): the ActivationRequest written as a JSON file for
// `maka activate`, its JSONL events on stdout, and the terminal outcomes with exit codes.
import { z } from 'zod';
import { IdentifierSchema, SessionRevisionRefSchema } from './repository';
import { SandboxCreateSpecSchema } from './sandboxes';

const nonBlank = z.string().refine((s) => s.trim() !== '', { message: 'must be a non-blank string' });

export const StimulusSchema = z.strictObject({
  type: z.enum(['message', 'schedule', 'system']),
  payload: z.unknown(),
});
export type Stimulus = z.infer<typeof StimulusSchema>;

export const ActivationRequestSchema = z.strictObject({
  schemaVersion: z.literal(1),
  activationId: nonBlank,
  cloudSessionId: nonBlank,
  makaSessionId: nonBlank.optional(),
  stimulus: StimulusSchema,
});
export type ActivationRequest = z.infer<typeof ActivationRequestSchema>;

export const ACTIVATION_PROTOCOL = 'maka.activation';

export const OutcomeStatusSchema = z.enum(['completed', 'blocked', 'retryable_failure', 'fatal_failure']);
export type OutcomeStatus = z.infer<typeof OutcomeStatusSchema>;

/** `maka activate` exit codes by outcome status. */
export const OUTCOME_EXIT_CODES: Record<OutcomeStatus, number> = {
  completed: 0,
  fatal_failure: 2,
  blocked: 3,
  retryable_failure: 4,
};

export const RequiredActionSchema = z.enum(['grant_permission', 'retry_activation']);

const EventPrefix = {
  protocol: z.literal(ACTIVATION_PROTOCOL),
  schemaVersion: z.literal(1),
  activationId: z.string(),
  cloudSessionId: z.string(),
  makaSessionId: z.string().optional(),
};

export const ActivationStartEventSchema = z.looseObject({
  ...EventPrefix,
  type: z.literal('start'),
  workspaceRoot: z.string(),
});

export const ActivationRuntimeEventSchema = z.looseObject({
  ...EventPrefix,
  type: z.literal('runtime_event'),
  event: z.record(z.string(), z.unknown()),
  truncated: z.boolean().optional(),
});

export const ActivationOutcomeEventSchema = z.looseObject({
  ...EventPrefix,
  type: z.literal('outcome'),
  status: OutcomeStatusSchema,
  reason: z.string().optional(),
  requiredAction: RequiredActionSchema.optional(),
  response: z.unknown().optional(),
});
export type ActivationOutcomeEvent = z.infer<typeof ActivationOutcomeEventSchema>;

/** One JSONL line of `maka activate` stdout. */
export const ActivationEventSchema = z.discriminatedUnion('type', [
  ActivationStartEventSchema,
  ActivationRuntimeEventSchema,
  ActivationOutcomeEventSchema,
]);
export type ActivationEvent = z.infer<typeof ActivationEventSchema>;

/** Event caps of `maka activate`: 256 runtime_event lines, 64 KiB of event-line bytes. */
export const ActivationEventLimits = { maxRuntimeEvents: 256, maxRuntimeEventBytes: 64 * 1024 } as const;

/**
 * What the control plane reports for an activation: provisional while the agent runs, then
 * committed (with the new revision) only after the CAS commit succeeded.
 */
export const ActivationResultSchema = z.object({
  sessionId: z.string(),
  activationId: z.string(),
  /** `committed`: the outcome and its state are in `revision`. `not_committed`: nothing changed. */
  commit: z.enum(['committed', 'not_committed']),
  revision: z.string().optional(),
  outcome: ActivationOutcomeEventSchema.optional(),
  /** Why the activation did not commit (a stable code such as `revision_conflict`). */
  error: z.object({ code: z.string(), message: z.string() }).optional(),
  /** True when the stored outcome of an earlier run of this activation id was returned. */
  deduplicated: z.boolean(),
  /** Which attempt of this activation id produced the result (1 on the first run). */
  attempt: z.number().int().min(1).optional(),
});
export type ActivationResult = z.infer<typeof ActivationResultSchema>;

/** Stable codes of `ActivationError` (refusals, thrown) and of `ActivationResult.error` (not committed, returned). */
export const ActivationErrorCodeSchema = z.enum([
  'invalid_request',
  'idempotency_conflict',
  'activation_in_progress',
  'session_busy',
  'revision_conflict',
  'ownership_lost',
  'sandbox_failed',
  'sandbox_lost',
  'agent_failed',
  'agent_protocol_error',
  'activation_timeout',
  'activation_cancelled',
  'policy_rejected',
  'bundle_failed',
  'repository_failed',
  'source_revision_not_available',
  'fork_failed',
]);
export type ActivationErrorCode = z.infer<typeof ActivationErrorCodeSchema>;

/** `activations/run` params: one agent turn of a Session in a fresh sandbox. */
export const ActivationRunRequestSchema = z.strictObject({
  sessionId: IdentifierSchema,
  /** Idempotency key: a committed id returns its stored outcome and runs nothing. */
  activationId: IdentifierSchema,
  stimulus: StimulusSchema,
  /** The agent of a Session created by this activation (ignored when the Session exists). */
  agentId: IdentifierSchema.optional(),
  /** Where the fresh sandbox comes from; its name is generated. */
  sandbox: SandboxCreateSpecSchema.omit({ name: true, env: true }),
});
export type ActivationRunRequest = z.infer<typeof ActivationRunRequestSchema>;

/** `sessions/fork` params (spec §11): an explicit, retained source revision; never "latest". */
export const ForkRequestSchema = z.strictObject({
  forkId: IdentifierSchema,
  source: SessionRevisionRefSchema,
  /** Default: derived from forkId, so a retry names the same target. */
  targetSessionId: IdentifierSchema.optional(),
});
export type ForkRequest = z.infer<typeof ForkRequestSchema>;

export const ForkResultSchema = z.strictObject({
  forkId: IdentifierSchema,
  target: SessionRevisionRefSchema,
  forkedFrom: SessionRevisionRefSchema,
  /** What the re-key hook did to the state identity (e.g. rewrote makaSessionId, or left an unknown media type as is); absent on a deduplicated retry. */
  rekey: z
    .strictObject({
      mediaType: z.string(),
      changed: z.boolean(),
      note: z.string(),
    })
    .optional(),
  /** True when the fork was already completed by an earlier call with this forkId. */
  deduplicated: z.boolean(),
});
export type ForkResult = z.infer<typeof ForkResultSchema>;

/** Splits JSONL text into validated activation events; a malformed line is an error naming it. */
export function parseActivationLine(line: string): ActivationEvent {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new Error(`activation output line is not JSON: ${line.slice(0, 120)}`);
  }
  return ActivationEventSchema.parse(value);
}
