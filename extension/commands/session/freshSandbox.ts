// Where a fresh sandbox for a revision or an activation goes (Open Revision in New Sandbox, Run Activation):
// shared by both commands so they ask the same way New Sandbox does.
import * as vscode from 'vscode';
import type { SandboxCreateSpec } from '../../../protocol/sandboxes';
import { NewSandboxRefusal, resolveNewSandboxTarget, type NewSandboxArgs } from '../newSandboxTarget';
import { OPENSANDBOX_RUNTIME, openSandboxCreateOptions } from '../openSandboxCommands';
import type { SessionContext } from './context';

/**
 * Where a fresh sandbox for a revision or an activation goes: what the caller named (provider
 * default local), else — when only local sandboxes are possible — a local `process` one, else
 * picked like New Sandbox (provider, context, namespace, Runtime).
 */
export async function freshSandboxSpec(ctx: SessionContext, where: Omit<NewSandboxArgs, 'name' | 'open'>): Promise<SandboxCreateSpec | undefined> {
  const { companion } = ctx;
  const named = where.provider !== undefined || where.runtime !== undefined;
  const { providers } = await companion.request('providers/list', {});
  // OpenSandbox, once set up, is a target of its own (a backend of the local runtime): then ask, as New Sandbox does.
  const openSandbox = providers.some((p) => p.kind === 'local' && p.runtimes.some((r) => r.name === OPENSANDBOX_RUNTIME && r.available));
  if (!named && !openSandbox && !providers.some((p) => p.kind !== 'local' && p.available)) return { provider: 'local', runtime: 'process', namespace: 'default' };
  try {
    const target = await resolveNewSandboxTarget(providers, named ? { provider: 'local', ...where } : {});
    if (!target) return undefined;
    return {
      provider: target.provider.kind,
      namespace: target.namespace,
      runtime: target.runtime,
      ...(target.context ? { context: target.context } : {}),
      // An OpenSandbox sandbox gets the image, limits, TTL and allowed egress of the settings, as from New Sandbox.
      ...(target.provider.kind === 'local' && target.runtime === OPENSANDBOX_RUNTIME ? { opensandbox: openSandboxCreateOptions() } : {}),
    };
  } catch (err) {
    if (err instanceof NewSandboxRefusal) void vscode.window.showErrorMessage(err.message);
    return undefined;
  }
}
