// The companion methods that create, list, open and close sandboxes (session Runs of a provider), and
// the notifications that say a sandbox or its gateway changed: one feature of the method table in index.ts.
import { z } from 'zod';
import { RunSchema, TerminationModeSchema } from '../kruntimes/run';
import {
  DownloadedArtifactSchema,
  ProviderInfoSchema,
  ProviderKindSchema,
  SandboxChangedSchema,
  SandboxConnectionSchema,
  SandboxCreateSpecSchema,
  SandboxRefSchema,
  SandboxSummarySchema,
} from '../sandboxes';
import { defineMethod, defineNotification, withProgressToken } from './contract';

export const sandboxMethods = {
  'providers/list': defineMethod('providers/list', {
    description: 'The sandbox providers, whether each works here (and why not), their contexts, namespaces and runtimes.',
    params: z.object({}),
    result: z.object({ providers: z.array(ProviderInfoSchema) }),
    example: {
      params: {},
      result: {
        providers: [
          {
            kind: 'local',
            label: 'Local',
            available: true,
            contexts: [{ name: 'local', namespaces: ['default'] }],
            runtimes: [
              { name: 'process', isolation: 'no isolation: a new process group per command', available: true },
              { name: 'bubblewrap', isolation: 'Linux namespaces through bwrap', available: false, reason: 'bwrap is not installed' },
            ],
          },
        ],
      },
    },
  }),
  'sandboxes/list': defineMethod('sandboxes/list', {
    description: 'Session Runs of one provider (optionally one context and namespace), with phase, reason and timeouts.',
    params: z.object({ provider: ProviderKindSchema, context: z.string().optional(), namespace: z.string().optional() }),
    result: z.object({ sandboxes: z.array(SandboxSummarySchema) }),
    example: {
      params: { provider: 'local' },
      result: {
        sandboxes: [
          {
            ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' },
            key: 'local.local.default.sbx-7k2p9',
            uid: '0b6f6a8e-2f0e-4c3b-9d51-5d1c7f1e2a10',
            runtime: 'process',
            phase: 'Ready',
            reason: 'SessionRegistered',
            message: 'session registered',
            idleTimeoutSeconds: 1800,
          },
        ],
      },
    },
  }),
  'sandboxes/create': defineMethod('sandboxes/create', {
    description: 'Creates a session Run and, unless `waitForReady` is false, waits until it is Ready (or fails with its reason).',
    params: withProgressToken(
      z.object({ spec: SandboxCreateSpecSchema, waitForReady: z.boolean().default(true), timeoutSeconds: z.number().int().min(1).max(3600).optional() }),
    ),
    result: z.object({ sandbox: SandboxSummarySchema }),
    progress: true,
    example: {
      params: { spec: { provider: 'local', namespace: 'default', runtime: 'process', idleTimeoutSeconds: 1800 } },
      result: {
        sandbox: {
          ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' },
          key: 'local.local.default.sbx-7k2p9',
          runtime: 'process',
          phase: 'Ready',
        },
      },
    },
  }),
  'sandboxes/get': defineMethod('sandboxes/get', {
    description: 'One sandbox: its summary and the full Run object.',
    params: z.object({ ref: SandboxRefSchema }),
    result: z.object({ sandbox: SandboxSummarySchema, run: RunSchema }),
    example: {
      params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' } },
      result: {
        sandbox: {
          ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' },
          key: 'local.local.default.sbx-7k2p9',
          runtime: 'process',
          phase: 'Ready',
        },
        run: {
          apiVersion: 'kruntimes.io/v1alpha1',
          kind: 'Run',
          metadata: { name: 'sbx-7k2p9', namespace: 'default', uid: '0b6f6a8e-2f0e-4c3b-9d51-5d1c7f1e2a10' },
          spec: { runtime: 'process', mode: { session: {} } },
          status: { phase: 'Ready', message: 'session registered' },
        },
      },
    },
  }),
  'sandboxes/open': defineMethod('sandboxes/open', {
    description:
      'What the data plane needs to use a Ready sandbox: its gateway endpoint (and CA bundle), a bearer token, and the ' +
      "gateway's extension capabilities. Refused with the kruntimes SDK messages for a non-session, non-Ready or mismatched Run.",
    params: z.object({ ref: SandboxRefSchema }),
    result: SandboxConnectionSchema,
    example: {
      params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' } },
      result: {
        endpoint: { url: 'http://127.0.0.1:41235/v1/namespaces/default/runtimes/process/sessions/0b6f6a8e-2f0e-4c3b-9d51-5d1c7f1e2a10' },
        token: '<bearer token>',
        capabilities: { rangedReads: true, cancel: true, isolateNetwork: false, backend: 'process' },
      },
    },
  }),
  'sandboxes/release': defineMethod('sandboxes/release', {
    description:
      "Ends this server's hold on a sandbox it opened: the session lease heartbeats stop, so a sandbox created with " +
      '`leaseTimeoutSeconds` expires once no other client holds its lease. The sandbox itself keeps running; `sandboxes/open` ' +
      'holds it again. `released` is false when this server held no lease for it.',
    params: z.object({ ref: SandboxRefSchema }),
    result: z.object({ released: z.boolean() }),
    example: { params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' } }, result: { released: true } },
  }),
  'sandboxes/terminate': defineMethod('sandboxes/terminate', {
    description:
      'Closes a sandbox: `Drain` finishes accepted work and exports its artifacts (ends Succeeded), `Immediate` cancels ' +
      'everything (ends Cancelled). With `wait`, returns when the Run is terminal. A downgrade (Immediate → Drain) is refused.',
    params: withProgressToken(
      z.object({ ref: SandboxRefSchema, mode: TerminationModeSchema, wait: z.boolean().default(true), timeoutSeconds: z.number().int().min(1).max(3600).optional() }),
    ),
    result: z.object({ sandbox: SandboxSummarySchema }),
    progress: true,
    example: {
      params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' }, mode: 'Drain' },
      result: {
        sandbox: {
          ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' },
          key: 'local.local.default.sbx-7k2p9',
          runtime: 'process',
          phase: 'Succeeded',
          reason: 'SessionCompleted',
          message: 'session finalized',
          terminationMode: 'Drain',
        },
      },
    },
  }),
  'sandboxes/delete': defineMethod('sandboxes/delete', {
    description: 'Deletes a sandbox Run and its records (a running one is cancelled first).',
    params: z.object({ ref: SandboxRefSchema }),
    result: z.object({}),
    example: { params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' } }, result: {} },
  }),
  'sandboxes/artifacts/download': defineMethod('sandboxes/artifacts/download', {
    description:
      "Downloads a finished sandbox's exported artifacts into a local folder, verifying each against its sha256 digest; " +
      'directory artifacts arrive as `<name>.tar.gz` and are unpacked when `unpack` is true.',
    params: withProgressToken(
      z.object({ ref: SandboxRefSchema, destination: z.string().min(1), names: z.array(z.string()).optional(), unpack: z.boolean().default(false) }),
    ),
    result: z.object({ artifacts: z.array(DownloadedArtifactSchema) }),
    progress: true,
    example: {
      params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' }, destination: '/home/me/artifacts' },
      result: {
        artifacts: [
          {
            name: 'report.txt',
            path: '/home/me/artifacts/report.txt',
            type: 'file',
            sizeBytes: 14,
            digest: 'sha256:1f2ec52b774368781bed1d1fb140a92e0eb6348090619c9291f9a5a3c8e8d151',
          },
        ],
      },
    },
  }),
} as const;

/** `gateway/changed`: whether a provider's gateway (the local daemon) answers. */
export const GatewayChangedSchema = z.object({
  provider: z.enum(['local', 'kruntimes']),
  reachable: z.boolean(),
  /** Why it is unreachable, in words. */
  message: z.string().optional(),
});
export type GatewayChanged = z.infer<typeof GatewayChangedSchema>;

export const sandboxNotifications = {
  'gateway/changed': defineNotification('gateway/changed', {
    description:
      "A provider's gateway stopped answering — the local gateway daemon exited, so its sandboxes are unreachable until " +
      'it is started again (the next request that needs it starts it) — or answers again.',
    params: GatewayChangedSchema,
    example: { provider: 'local', reachable: false, message: 'the local gateway daemon stopped' },
  }),
  'sandboxes/changed': defineNotification('sandboxes/changed', {
    description: 'A sandbox was created, changed phase, or was removed.',
    params: SandboxChangedSchema,
    example: {
      sandbox: {
        ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' },
        key: 'local.local.default.sbx-7k2p9',
        runtime: 'process',
        phase: 'Finalizing',
        reason: 'Finalizing',
        message: 'session finalization requested',
      },
    },
  }),
} as const;
