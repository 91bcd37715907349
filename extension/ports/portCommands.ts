// The port commands and their registration: Forward a Port… (offers the ports the sandbox listens
// on, or takes a typed one — a sandbox busy with a running command cannot be listed, and the pick
// says so), Open in Browser, Copy Address and Stop Forwarding on a forwarded port, the Ports
// section of the Sandboxes view, and the link provider of Sandbox terminals.
import * as vscode from 'vscode';
import type { ListeningPort, PortForward } from '../../protocol/ports';
import { parseSandboxKey } from '../../protocol/sandboxes';
import type { CompanionClient } from '../companion/companionClient';
import type { SandboxRegistry } from '../sandboxes/registry';
import type { SandboxResolver, SandboxTarget } from '../sandboxes/sandboxPicker';
import { PortForwards } from './portForwards';
import { isPortNode, type PortsTreeNode, PortsTreeProvider } from './portsTree';
import { TerminalPortLinks } from './terminalPortLinks';

export interface PortsDeps {
  companion: CompanionClient;
  registry: SandboxRegistry;
  resolveSandbox: SandboxResolver;
  log: vscode.LogOutputChannel;
  /** Where this window remembers its forwards across a reload (workspaceState). */
  state?: vscode.Memento;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

type PortItem = vscode.QuickPickItem & { port: number };

/** A pick of the detected ports that also takes a typed port number. */
async function pickPort(detected: Promise<{ ports: ListeningPort[]; note?: string }>, sandbox: string): Promise<number | undefined> {
  const qp = vscode.window.createQuickPick<PortItem>();
  qp.title = `Forward a port of ${sandbox}`;
  qp.placeholder = 'Type a port number, or pick one the sandbox listens on';
  qp.busy = true;
  let listed: PortItem[] = [];
  const typed = (): PortItem[] => {
    const n = Number(qp.value.trim());
    return Number.isInteger(n) && n >= 1 && n <= 65535 && !listed.some((i) => i.port === n) ? [{ label: `$(plug) Forward port ${n}`, port: n, alwaysShow: true }] : [];
  };
  const refresh = () => (qp.items = [...typed(), ...listed]);
  detected.then(
    ({ ports, note }) => {
      listed = ports.map((p) => ({ label: `${p.port}`, description: `listening on ${p.address}`, port: p.port }));
      if (note) qp.placeholder = `Type a port number, or pick one — ${note}`;
      qp.busy = false;
      refresh();
    },
    (err: unknown) => {
      qp.placeholder = `Type the port number (${message(err)})`;
      qp.busy = false;
    },
  );
  qp.onDidChangeValue(refresh);
  return new Promise<number | undefined>((resolve) => {
    qp.onDidAccept(() => {
      resolve(qp.selectedItems[0]?.port);
      qp.hide();
    });
    qp.onDidHide(() => {
      resolve(undefined);
      qp.dispose();
    });
    qp.show();
  });
}

export function registerPorts(deps: PortsDeps): { forwards: PortForwards; links: TerminalPortLinks; tree: PortsTreeProvider; disposables: vscode.Disposable[] } {
  const { companion, registry, resolveSandbox, log } = deps;
  const forwards = new PortForwards(companion, registry, log, deps.state);
  const tree = new PortsTreeProvider(forwards);
  const links = new TerminalPortLinks(forwards, (key) => registry.summary(key)?.ref.name ?? parseSandboxKey(key)?.name ?? key);
  const forwardOf = (node: unknown): PortForward | undefined => (isPortNode(node) ? node.forward : undefined);

  const announce = async (forward: PortForward) => {
    const choice = await vscode.window.showInformationMessage(`Port ${forward.sandboxPort} of ${forward.ref.name}: ${forward.url}`, 'Open in Browser', 'Copy Address');
    if (choice === 'Open in Browser') await forwards.openInBrowser(forward);
    if (choice === 'Copy Address') await forwards.copyAddress(forward);
  };

  const disposables: vscode.Disposable[] = [
    forwards,
    tree,
    vscode.window.registerTreeDataProvider<PortsTreeNode>('sandboxSessions.ports', tree),
    vscode.window.registerTerminalLinkProvider(links),
    vscode.commands.registerCommand('sandboxSessions.forwardPort', async (target?: SandboxTarget, port?: number): Promise<PortForward | undefined> => {
      const sandbox = await resolveSandbox(target, ['Ready'], 'Select a Ready sandbox to forward a port of');
      if (!sandbox) return undefined;
      const chosen = port ?? (await pickPort(companion.request('ports/list', { ref: sandbox.ref }), sandbox.ref.name));
      if (chosen === undefined) return undefined;
      try {
        const forward = await forwards.forward(sandbox.key, chosen);
        void announce(forward);
        return forward;
      } catch (err) {
        void vscode.window.showErrorMessage(`Cannot forward port ${chosen} of ${sandbox.ref.name}: ${message(err)}`);
        return undefined;
      }
    }),
    vscode.commands.registerCommand('sandboxSessions.openForwardedPort', async (node?: PortsTreeNode) => {
      const f = forwardOf(node);
      if (f) await forwards.openInBrowser(f);
    }),
    vscode.commands.registerCommand('sandboxSessions.copyForwardedPortAddress', async (node?: PortsTreeNode) => {
      const f = forwardOf(node);
      if (!f) return undefined;
      const text = await forwards.copyAddress(f);
      void vscode.window.setStatusBarMessage(`Copied ${text}`, 3000);
      return text;
    }),
    vscode.commands.registerCommand('sandboxSessions.stopForwardedPort', async (node?: PortsTreeNode) => {
      const f = forwardOf(node);
      if (!f) return;
      try {
        await forwards.stop(f);
      } catch (err) {
        void vscode.window.showErrorMessage(`Cannot stop the forward of port ${f.sandboxPort}: ${message(err)}`);
      }
    }),
  ];
  return { forwards, links, tree, disposables };
}
