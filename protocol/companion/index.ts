// The companion server's JSON-RPC contract: every method's name, params and result as zod schemas,
// notifications, and one error-code enum. Each feature declares its methods in its own file here; this index
// assembles the one table the server validates each request against (it must implement every entry), that any
// editor (VS Code or a script) can drive the server from alone, and that docs/protocol.md is generated from.
import type { z } from 'zod';
import { activationMethods, activationNotifications } from './activations';
import { agentMethods } from './agents';
import { bundleMethods } from './bundles';
import { fileMethods, fileNotifications } from './files';
import { lifecycleMethods } from './lifecycle';
import { logMethods, logNotifications } from './logs';
import { openingMethods } from './openings';
import { openSandboxMethods } from './opensandbox';
import { portMethods, portNotifications } from './ports';
import { sandboxMethods, sandboxNotifications } from './sandboxes';
import { searchMethods } from './search';
import { sessionMethods } from './sessions';

export {
  COMPANION_PROTOCOL_VERSION,
  CompanionError,
  CompanionErrorCodeSchema,
  CompanionErrorDataSchema,
  JsonRpcErrorNumber,
  ProgressTokenSchema,
  ProgressValueSchema,
  defineMethod,
  defineNotification,
  withProgressToken,
  zodIssues,
  type CompanionErrorCode,
  type CompanionErrorData,
  type MethodDefinition,
  type MethodExample,
  type NotificationDefinition,
  type ProgressValue,
} from './contract';
export {
  DEFAULT_CLIENT_NAME,
  InitializeParamsSchema,
  InitializeResultSchema,
  initializeClient,
  type InitializeParams,
} from './lifecycle';
export { GatewayChangedSchema, type GatewayChanged } from './sandboxes';

export const companionMethods = {
  ...lifecycleMethods,
  ...sandboxMethods,
  ...agentMethods,
  ...openSandboxMethods,
  ...logMethods,
  ...searchMethods,
  ...fileMethods,
  ...bundleMethods,
  ...sessionMethods,
  ...openingMethods,
  ...activationMethods,
  ...portMethods,
} as const;

export type CompanionMethods = typeof companionMethods;
export type CompanionMethodName = keyof CompanionMethods;
export type ParamsOf<M extends CompanionMethodName> = z.infer<CompanionMethods[M]['params']>;
export type ResultOf<M extends CompanionMethodName> = z.infer<CompanionMethods[M]['result']>;

export const companionNotifications = {
  ...activationNotifications,
  ...fileNotifications,
  ...logNotifications,
  ...sandboxNotifications,
  ...portNotifications,
} as const;
