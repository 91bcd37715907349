// Which sandbox a command acts on: the view item, key or `sandbox:` URI it was invoked on; from
// the palette, the sandbox the user is working in (when its phase fits); else a quick pick.
import * as vscode from 'vscode';
import { parseSandboxKey, type SandboxSummary } from '../../protocol/sandboxes';
import type { CompanionClient } from '../companion/companionClient';
import type { SandboxTreeNode } from '../views/sandboxTree';
import { activeSandboxKey } from './activeSandbox';
import type { SandboxRegistry } from './registry';

/** What a command was invoked on: a view node, a sandbox key (status bar, scripts), or a URI. */
export type SandboxTarget = SandboxTreeNode | string | vscode.Uri | undefined;

const SANDBOX_SCHEME = 'sandbox';

export type SandboxResolver = (target: SandboxTarget, phases?: string[], placeHolder?: string) => Promise<SandboxSummary | undefined>;

export function createSandboxResolver(companion: CompanionClient, registry: SandboxRegistry): SandboxResolver {
  const summaryOf = (target: SandboxTarget): SandboxSummary | undefined => {
    if (target === undefined) return undefined;
    if (typeof target === 'string') return registry.summary(target);
    if (target instanceof vscode.Uri) return target.scheme === SANDBOX_SCHEME ? registry.summary(target.authority) : undefined;
    return target.kind === 'sandbox' ? (registry.summary(target.sandbox.key) ?? target.sandbox) : undefined;
  };

  return async (target, phases, placeHolder = 'Select a sandbox') => {
    const direct = summaryOf(target);
    if (direct) return direct;
    if (typeof target === 'string' || target instanceof vscode.Uri) {
      const ref = parseSandboxKey(typeof target === 'string' ? target : target.authority);
      if (ref) return registry.refresh(ref);
    }
    const active = target === undefined ? activeSandboxKey() : undefined;
    if (active) {
      const ref = parseSandboxKey(active);
      const current = ref ? await registry.refresh(ref).catch(() => undefined) : undefined;
      if (current && (!phases || phases.includes(current.phase ?? 'Pending'))) return current;
    }
    const { providers } = await companion.request('providers/list', {});
    const all: SandboxSummary[] = [];
    const failures: string[] = [];
    for (const p of providers.filter((x) => x.available)) {
      // One provider that cannot list (a cluster that is down, RBAC) does not hide the others' sandboxes.
      try {
        all.push(...(await registry.list(p.kind)));
      } catch (err) {
        failures.push(`${p.label}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    if (failures.length > 0) void vscode.window.showWarningMessage(`Some sandboxes could not be listed — ${failures.join('; ')}`);
    const candidates = all.filter((s) => !phases || phases.includes(s.phase ?? 'Pending'));
    if (candidates.length === 0) {
      void vscode.window.showInformationMessage(phases ? `No sandbox is ${phases.join(' or ')}.` : 'There are no sandboxes yet.');
      return undefined;
    }
    const picked = await vscode.window.showQuickPick(
      candidates.map((s) => ({ label: s.ref.name, description: `${s.phase ?? 'Pending'} · ${s.runtime}`, detail: `${s.ref.provider}/${s.ref.context}/${s.ref.namespace}`, s })),
      { placeHolder },
    );
    return picked?.s;
  };
}
