// The companion method that grants a sandbox to agents (the MCP server): one feature of the method table
// in index.ts, apart from the sandbox lifecycle because it changes only who may use a sandbox.
import { z } from 'zod';
import { SandboxRefSchema, SandboxSummarySchema } from '../sandboxes';
import { defineMethod } from './contract';

export const agentMethods = {
  'sandboxes/grantAgents': defineMethod('sandboxes/grantAgents', {
    description:
      'Grants a sandbox to agents (`granted: true`: the label `sandbox-sessions.dev/agents: granted` on its Run, a merge ' +
      'patch of `metadata.labels` as `kubectl label` makes it) or revokes the grant (`false`: the label removed). The MCP ' +
      'server (`sandbox-sessions mcp`) may then use the sandbox, or no longer, from its next call on — it reads the label ' +
      'on every use. Other labels are kept. The result is the sandbox with `grantedToAgents`.',
    params: z.object({ ref: SandboxRefSchema, granted: z.boolean() }),
    result: z.object({ sandbox: SandboxSummarySchema }),
    example: {
      params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' }, granted: true },
      result: {
        sandbox: {
          ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' },
          key: 'local.local.default.sbx-7k2p9',
          runtime: 'bubblewrap',
          phase: 'Ready',
          grantedToAgents: true,
        },
      },
    },
  }),
} as const;
