// The companion protocol's handshake (`initialize`, `shutdown`): kept apart from the feature methods
// because it is the one part every client — ours, a script, an LSP client — speaks first.
import { z } from 'zod';
import { COMPANION_PROTOCOL_VERSION, defineMethod } from './contract';


/**
 * `initialize` takes our own fields, or the Language Server Protocol's (`clientInfo`, `processId`,
 * `capabilities`…) so that vscode-languageclient — or any LSP client — can start and supervise the
 * server unchanged. Every field is optional, as in LSP's InitializeParams (where `clientInfo` is
 * optional too); a client that names itself neither way is called DEFAULT_CLIENT_NAME.
 */
export const InitializeParamsSchema = z.looseObject({
  clientName: z.string().min(1).optional(),
  clientVersion: z.string().optional(),
  protocolVersion: z.literal(COMPANION_PROTOCOL_VERSION).optional(),
  clientInfo: z.looseObject({ name: z.string().min(1), version: z.string().optional() }).optional(),
  processId: z.number().int().nullable().optional(),
});
export type InitializeParams = z.infer<typeof InitializeParamsSchema>;

/** The name of a client whose `initialize` has neither `clientName` nor LSP `clientInfo.name`. */
export const DEFAULT_CLIENT_NAME = 'unknown client';

/** Who is connecting, for logs: our `clientName`, else LSP `clientInfo.name`, else DEFAULT_CLIENT_NAME. */
export function initializeClient(params: InitializeParams): { name: string; version?: string } {
  const name = params.clientName ?? params.clientInfo?.name ?? DEFAULT_CLIENT_NAME;
  const version = params.clientName !== undefined ? params.clientVersion : params.clientInfo?.version;
  return version !== undefined ? { name, version } : { name };
}

export const InitializeResultSchema = z.object({
  serverVersion: z.string(),
  protocolVersion: z.literal(COMPANION_PROTOCOL_VERSION),
  nodeVersion: z.string(),
  methods: z.array(z.string()),
  /** LSP fields, for clients that speak the LSP lifecycle. */
  serverInfo: z.object({ name: z.string(), version: z.string() }),
  capabilities: z.object({}),
});

export const lifecycleMethods = {
  initialize: defineMethod('initialize', {
    description:
      'Handshake: versions and the methods this server implements. Params are our own fields or LSP ' +
      '`InitializeParams` (`processId`, `clientInfo`, `rootUri`, `capabilities`…); every field is optional, and a ' +
      `client that gives neither \`clientName\` nor \`clientInfo.name\` is logged as "${DEFAULT_CLIENT_NAME}".`,
    params: InitializeParamsSchema,
    result: InitializeResultSchema,
    example: {
      params: { clientName: 'example-client', clientVersion: '1.0.0', protocolVersion: 1 },
      result: {
        serverVersion: '0.1.0',
        protocolVersion: 1,
        nodeVersion: 'v24.18.1',
        methods: ['initialize', 'shutdown'],
        serverInfo: { name: 'sandbox-sessions', version: '0.1.0' },
        capabilities: {},
      },
    },
  }),
  shutdown: defineMethod('shutdown', {
    description:
      'LSP lifecycle: the client is about to send the `exit` notification. Running requests are cancelled; the ' +
      'local gateway daemon and its sandboxes keep running.',
    params: z.union([z.object({}), z.null()]).optional(),
    result: z.null(),
    example: { params: null, result: null },
  }),
} as const;
