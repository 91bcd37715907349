// New Sandbox… and New Sandbox Here: where the sandbox goes (provider, context, namespace, Runtime: picked or
// given), created with the settings' timeouts and lease, then opened.
import * as vscode from 'vscode';
import { z } from 'zod';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { CompanionRequestError } from '../../companion/companionClient';
import { isSandboxTreeNode, type SandboxTreeNode } from '../../views/sandboxTree';
import { NewSandboxArgsSchema, NewSandboxRefusal, resolveNewSandboxTarget, type NewSandboxArgs, type NewSandboxTarget } from '../newSandboxTarget';
import { OPENSANDBOX_RUNTIME, openSandboxCreateOptions } from '../openSandboxCommands';
import { type SandboxCommandContext, errorText, progress } from './context';
import { openFolder } from './openSandbox';

export async function newSandbox(ctx: SandboxCommandContext, raw?: unknown): Promise<SandboxSummary | undefined> {
  const { companion, registry, tree, log } = ctx;
  // The view's **+** is called with the selected row, which says nothing about the new sandbox.
  const parsedArgs = NewSandboxArgsSchema.optional().safeParse(isSandboxTreeNode(raw) ? undefined : raw);
  if (!parsedArgs.success) {
    void vscode.window.showErrorMessage(`New Sandbox was given arguments it cannot use: ${z.prettifyError(parsedArgs.error)}`);
    return;
  }
  const args: NewSandboxArgs = parsedArgs.data ?? {};
  let target: NewSandboxTarget | undefined;
  try {
    const { providers } = await companion.request('providers/list', {});
    target = await resolveNewSandboxTarget(providers, args);
  } catch (err) {
    if (err instanceof NewSandboxRefusal) {
      const action = err.action;
      void vscode.window.showErrorMessage(err.message, ...(action ? [action.label] : [])).then((choice) => {
        if (choice && action) void vscode.commands.executeCommand(action.command, ...(action.args ?? []));
      });
    } else {
      log.error(`new sandbox: ${errorText(err)}`);
      void vscode.window.showErrorMessage(`Could not list the sandbox providers: ${errorText(err)}`, 'Show Logs').then((c) => c && log.show());
    }
    return;
  }
  if (!target) return;
  const { provider, context, namespace, runtime } = target;
  const where = provider.kind === 'kruntimes' ? ` in ${context ?? 'the current context'}/${namespace}` : '';
  try {
    const { sandbox } = await progress(`Creating a ${runtime} sandbox${where}`, (report, token) =>
      companion.request(
        'sandboxes/create',
        {
          spec: {
            provider: provider.kind,
            runtime,
            namespace,
            ...(context ? { context } : {}),
            ...(args.name ? { name: args.name } : {}),
            idleTimeoutSeconds: vscode.workspace.getConfiguration('sandboxSessions').get<number>('sandbox.idleTimeoutSeconds', 3600),
            ...leaseSetting(),
            ...timeoutSetting(),
            ...(provider.kind === 'local' && runtime === OPENSANDBOX_RUNTIME ? { opensandbox: openSandboxCreateOptions() } : {}),
          },
          waitForReady: true,
        },
        { token, onProgress: (v) => v.message && report(v.message) },
      ),
    );
    registry.fireChanged(sandbox);
    tree.refresh();
    log.info(`created sandbox ${sandbox.key}`);
    if (args.open !== false) await openFolder(ctx, sandbox, args.open ?? {});
    return sandbox;
  } catch (err) {
    if (err instanceof CompanionRequestError && err.code === 'cancelled') return;
    log.error(`create a ${provider.kind} sandbox${where} (runtime ${runtime}) failed: ${errorText(err)}`);
    void vscode.window.showErrorMessage(`Could not create a sandbox${where}: ${errorText(err)}`, 'Show Logs').then((c) => c && log.show());
    return;
  }
}

/** "New Sandbox Here" on a namespace (or context) of the Sandboxes view. */
export function newSandboxHere(ctx: SandboxCommandContext, node?: SandboxTreeNode) {
  if (node?.kind === 'namespace') return newSandbox(ctx, { provider: node.provider.kind, context: node.context, namespace: node.namespace });
  if (node?.kind === 'context') return newSandbox(ctx, { provider: node.provider.kind, context: node.context });
  if (node?.kind === 'provider') return newSandbox(ctx, { provider: node.provider.kind });
  return newSandbox(ctx);
}

/** `sandboxSessions.sandbox.timeout` as a spec field (absent when empty). */
function timeoutSetting(): { timeout?: string } {
  const timeout = vscode.workspace.getConfiguration('sandboxSessions').get<string>('sandbox.timeout', '').trim();
  return timeout ? { timeout } : {};
}

/** `sandboxSessions.sandbox.leaseTimeoutSeconds` as a spec field (absent for 0: no lease). */
function leaseSetting(): { leaseTimeoutSeconds?: number } {
  const seconds = Math.floor(vscode.workspace.getConfiguration('sandboxSessions').get<number>('sandbox.leaseTimeoutSeconds', 0));
  return seconds >= 1 ? { leaseTimeoutSeconds: seconds } : {};
}
