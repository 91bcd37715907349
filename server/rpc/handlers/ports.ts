// Handlers of protocol/companion/ports.ts: a sandbox's listening ports and this client's forwards to them.
import type { portMethods } from '../../../protocol/companion/ports';
import type { PortForwardService } from '../../ports/portForwardService';
import { portForwardService } from '../../ports/portSubstrates';
import type { RequestContext } from '../companionServer';
import type { HandlersOf, Services } from './context';

export function portHandlers(services: Services): HandlersOf<typeof portMethods> {
  let ports = services.ports;
  const portsOf = (ctx: RequestContext): PortForwardService => (ports ??= portForwardService(services.providers, ctx.log));
  return {
    'ports/list': async (params, ctx) => portsOf(ctx).list(params.ref, ctx.signal),
    'ports/forward': async (params, ctx) => ({
      forward: await portsOf(ctx).forward(params.ref, params.port, params.localPort, (ended) => ctx.notify('ports/ended', ended)),
    }),
    'ports/forwards': async (params, ctx) => ({ forwards: portsOf(ctx).forwardsOf(params.ref) }),
    'ports/stop': async (params, ctx) => ({ stopped: await portsOf(ctx).stop(params.id) }),
  };
}
