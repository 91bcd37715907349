// How each provider's sandbox ports are reached, built in one place for the companion server and
// the `kruntimes` CLI. Kept apart from PortForwardService so that a caller that needs only local
// forwards (the `sandbox` CLI) does not load the Kubernetes client with it.
import type { ProviderKind } from '../../protocol/sandboxes';
import type { Logger } from '../log';
import type { SandboxProvider } from '../sandboxes/provider';
import { KruntimesPortSubstrate, lendsClusters } from './kruntimesPorts';
import { LocalPortSubstrate } from './localPorts';
import { PortForwardService } from './portForwardService';
import type { PortSubstrate } from './portSubstrate';

export function portSubstrates(providers: ReadonlyMap<ProviderKind, SandboxProvider>, log: Logger): Map<ProviderKind, PortSubstrate> {
  const substrates = new Map<ProviderKind, PortSubstrate>();
  for (const [kind, provider] of providers) {
    if (kind === 'local') substrates.set(kind, new LocalPortSubstrate(provider, log));
    else if (kind === 'kruntimes' && lendsClusters(provider)) substrates.set(kind, new KruntimesPortSubstrate(provider, log));
  }
  return substrates;
}

/** A PortForwardService over every provider given. */
export function portForwardService(providers: ReadonlyMap<ProviderKind, SandboxProvider>, log: Logger): PortForwardService {
  return new PortForwardService(providers, log, portSubstrates(providers, log));
}
