// Running one activation of a session and forking a session (`activations/run`, `sessions/fork`,
// `activations/event`): one feature of the method table in index.ts; the schemas are in protocol/activation.ts.
import { z } from 'zod';
import {
  ActivationEventSchema,
  ActivationResultSchema,
  ActivationRunRequestSchema,
  ForkRequestSchema,
  ForkResultSchema,
} from '../activation';
import { defineMethod, defineNotification, withProgressToken } from './contract';

export const activationMethods = {
  'activations/run': defineMethod('activations/run', {
    description:
      'Runs one activation (one agent turn) of a session in a fresh, throw-away sandbox, exactly as seed 000 orders it: ' +
      'claim the activation id (a committed id returns its stored outcome and runs nothing), take the session lease, ' +
      'check out (a new session starts empty), hydrate into a fresh sandbox, run the activation command (default ' +
      '`maka activate`) with the request as a file, stream its events as `activations/event` notifications ' +
      '(provisional), pack, compare-and-set commit, and only then return the committed outcome. A CAS loser returns ' +
      '`not_committed` with `revision_conflict` and never its output. Refusals (`session_busy`, ' +
      '`activation_in_progress`, …) are errors.',
    params: withProgressToken(ActivationRunRequestSchema),
    result: ActivationResultSchema,
    progress: true,
    example: {
      params: {
        sessionId: 'demo',
        activationId: 'activation-1',
        stimulus: { type: 'message', payload: { text: 'Add a README' } },
        sandbox: { provider: 'local', namespace: 'default', runtime: 'process' },
      },
      result: {
        sessionId: 'demo',
        activationId: 'activation-1',
        commit: 'committed',
        revision: 'r3',
        outcome: {
          protocol: 'maka.activation',
          schemaVersion: 1,
          type: 'outcome',
          activationId: 'activation-1',
          cloudSessionId: 'demo',
          status: 'completed',
          response: 'Added README.md',
        },
        deduplicated: false,
        attempt: 1,
      },
    },
  }),
  'sessions/fork': defineMethod('sessions/fork', {
    description:
      'Forks a session at a named, retained revision (never "latest"): a new session with its own r1, the same ' +
      'agent, `forkedFrom` lineage, no activation records, leases or credentials; the bundle is repacked for the ' +
      'target and its state identity re-keyed. The same `forkId` always yields the same target.',
    params: ForkRequestSchema,
    result: ForkResultSchema,
    example: {
      params: { forkId: 'fork-1', source: { sessionId: 'demo', revision: 'r2' }, targetSessionId: 'demo-experiment' },
      result: {
        forkId: 'fork-1',
        target: { sessionId: 'demo-experiment', revision: 'r1' },
        forkedFrom: { sessionId: 'demo', revision: 'r2' },
        rekey: {
          mediaType: 'application/vnd.maka.session-state-identity+json;version=1',
          changed: true,
          note: 'rewrote makaSessionId',
        },
        deduplicated: false,
      },
    },
  }),
} as const;

export const activationNotifications = {
  'activations/event': defineNotification('activations/event', {
    description: 'One JSONL event of a running activation, as the agent wrote it. Provisional: only the result of `activations/run` says what was committed.',
    params: z.object({ sessionId: z.string(), activationId: z.string(), provisional: z.literal(true), event: ActivationEventSchema }),
    example: {
      sessionId: 'demo',
      activationId: 'activation-1',
      provisional: true,
      event: {
        protocol: 'maka.activation',
        schemaVersion: 1,
        type: 'start',
        activationId: 'activation-1',
        cloudSessionId: 'demo',
        workspaceRoot: '/workspace/8d0c/workspace',
      },
    },
  }),
} as const;
