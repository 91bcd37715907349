// Which operation API a gateway serves (spec §10.10): era C takes commands and file mutations
// over HTTP (`operations:execute`, `operations:stream`); era D serves them only over the
// `operations:ws` socket and answers every other operation path with 404 `endpoint not found`
// from its catch-all — before Run lookup and authorization, so the answer has no side effects.
// The decision rests on that exact answer (a 404 with another body, e.g. `Session Run not
// found`, a 401 or a 405 all come from a gateway that has the route: era C), and is remembered
// per gateway base URL (the Console's origin and path prefix before `/v1/`) for the whole
// process, so the clients of all its sandboxes ask at most once.
import { ErrorBodySchema, GatewayMessages } from './gateway';
import { GatewayError } from './gatewayErrors';

export type GatewayEra = 'C' | 'D';

/** True for era D's catch-all answer: status 404 with the JSON body `{"error":"endpoint not found"}`. */
export function isEndpointNotFound(status: number, body: string): boolean {
  if (status !== 404) return false;
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return false;
  }
  const parsed = ErrorBodySchema.safeParse(value);
  return parsed.success && parsed.data.error === GatewayMessages.endpointNotFound;
}

/** The same answer, already turned into a GatewayError by a client. */
export function isEndpointNotFoundError(err: unknown): boolean {
  return err instanceof GatewayError && err.status === 404 && err.message === GatewayMessages.endpointNotFound;
}

/** The era an answer to `GET|POST P/operations:execute` shows: D for the catch-all 404, C for anything else. */
export function eraFromExecuteAnswer(status: number, body: string): GatewayEra {
  return isEndpointNotFound(status, body) ? 'D' : 'C';
}

const known = new Map<string, GatewayEra>();

/** The gateway base of a session endpoint URL: its origin and any path prefix before `/v1/`. */
export function gatewayBaseOf(endpointUrl: string): string {
  const url = new URL(endpointUrl);
  const at = url.pathname.indexOf('/v1/');
  return url.origin + (at === -1 ? url.pathname.replace(/\/+$/, '') : url.pathname.slice(0, at));
}

/** The era last seen for a session endpoint's gateway, if any call has shown it. */
export function knownGatewayEra(endpointUrl: string): GatewayEra | undefined {
  return known.get(gatewayBaseOf(endpointUrl));
}

export function rememberGatewayEra(endpointUrl: string, era: GatewayEra): void {
  known.set(gatewayBaseOf(endpointUrl), era);
}

/** Forgets every remembered era (tests; a process that wants to look again). */
export function forgetGatewayEras(): void {
  known.clear();
}
