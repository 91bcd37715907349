// The backends this machine knows, by the name a Run's `spec.runtime` uses.
import type { Backend } from './backend';
import { BubblewrapBackend } from './bubblewrapBackend';
import { ProcessBackend } from './processBackend';

export type BackendRegistry = ReadonlyMap<string, Backend>;

export function defaultBackends(): BackendRegistry {
  const list: Backend[] = [new ProcessBackend(), new BubblewrapBackend()];
  return new Map(list.map((b) => [b.name, b]));
}
