// Reading and following a sandbox's runtimed log (`sandboxes/logs`, `sandboxes/log`): one feature of the
// method table in index.ts.
import { z } from 'zod';
import { SandboxRefSchema } from '../sandboxes';
import { RunLogQueryFields, SINCE_EXCLUSIVE_MESSAGE, sinceExclusive } from '../kruntimes/runtimedLog';
import { defineMethod, defineNotification } from './contract';

export const logMethods = {
  'sandboxes/logs': defineMethod('sandboxes/logs', {
    description:
      "runtimed's log of the sandbox's Run, read like `kubectl logs`: one JSON line per command output line " +
      '(`stream` stdout|stderr) and one `stream: "audit"` line per mutation (operation, outcome, exit code, duration; ' +
      'never command text, stdin or file contents); `tailLines` applies before `sinceTime`/`sinceSeconds`; ' +
      '`timestamps` prefixes `<RFC3339Nano> `. Without `follow` the result holds the lines. With `follow` (and a ' +
      '`followId`) every line arrives as a `sandboxes/log` notification carrying that id, and the request answers ' +
      '(with no lines) once the Run has ended; `$/cancelRequest` stops following. A kruntimes sandbox\'s lines come from ' +
      'its assigned Runtime Pod\'s runtimed container, filtered to the Run (as the upstream SDKs read them).',
    params: RunLogQueryFields.extend({ ref: SandboxRefSchema, followId: z.string().min(1).max(128).optional() })
      .refine(sinceExclusive, { message: SINCE_EXCLUSIVE_MESSAGE, path: ['sinceSeconds'] })
      .refine((p) => !p.follow || p.followId !== undefined, { message: 'follow needs a followId (it tags the sandboxes/log notifications)', path: ['followId'] }),
    result: z.object({ lines: z.array(z.string()) }),
    example: {
      params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' }, tailLines: 1 },
      result: {
        lines: [
          '{"run_uid":"0b6f6a8e-2f0e-4c3b-9d51-5d1c7f1e2a10","assigned_pod_uid":"5c1e0f3a-8d7b-4e2a-9f61-2b3c4d5e6f70","run_name":"sbx-7k2p9",' +
            '"namespace":"default","runtime":"process","pod":"local-process","stream":"audit","message":"session operation completed",' +
            '"operation":"command","outcome":"failed","exit_code":2,"duration_milliseconds":41}',
        ],
      },
    },
  }),
} as const;

export const logNotifications = {
  'sandboxes/log': defineNotification('sandboxes/log', {
    description: 'New lines of a followed sandbox log (`sandboxes/logs` with `follow`), in order, tagged with its `followId`.',
    params: z.object({ followId: z.string(), lines: z.array(z.string()) }),
    example: {
      followId: 'log-1',
      lines: [
        '{"run_uid":"0b6f6a8e-2f0e-4c3b-9d51-5d1c7f1e2a10","assigned_pod_uid":"5c1e0f3a-8d7b-4e2a-9f61-2b3c4d5e6f70","run_name":"sbx-7k2p9",' +
          '"namespace":"default","runtime":"process","pod":"local-process","stream":"stdout","message":"hello","operation":"command",' +
          '"outcome":"succeeded","exit_code":0,"duration_milliseconds":12}',
      ],
    },
  }),
} as const;
