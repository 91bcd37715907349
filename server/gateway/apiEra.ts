// Which upstream era of the Runtime access API a local gateway daemon serves (spec §10.1, §10.2).
// `era-c` (the default): every route of §2.5 plus the local extensions (ranged reads, the
// cancel route, `capabilities` in the status body). `era-d`: only what a kruntimes era-D
// Console serves — status, `operations:ws`, `files`, `files/{path}` — so a client's era probe
// and its era-D transport can be tested locally. `operations:ws` speaks era D in both modes.
import { z } from 'zod';
import type { AccessRoute } from './accessApi';

export const GatewayApiSchema = z.enum(['era-c', 'era-d']);
export type GatewayApi = z.infer<typeof GatewayApiSchema>;

export const DEFAULT_GATEWAY_API: GatewayApi = 'era-c';

const ERA_D_ROUTES: ReadonlySet<AccessRoute['kind']> = new Set(['status', 'ws', 'list', 'read']);

/** False when `api` has no such route: the request gets 404 `endpoint not found` (era D's catch-all). */
export function servesRoute(api: GatewayApi, kind: AccessRoute['kind']): boolean {
  return api === 'era-c' || ERA_D_ROUTES.has(kind);
}
