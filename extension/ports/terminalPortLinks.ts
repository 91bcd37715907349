// Offers a forward for an address a server prints in a Sandbox terminal — `localhost:PORT`,
// `127.0.0.1:PORT`, `0.0.0.0:PORT` (with or without `http://`), as VS Code does for the terminals
// of a remote window: the address becomes a link whose tooltip says what it does; following it
// forwards the sandbox's port and opens the forwarded address in the browser. Other terminals are
// left to VS Code.
import * as vscode from 'vscode';
import { sandboxTerminalKey } from '../terminal/sandboxPseudoterminal';
import type { PortForwards } from './portForwards';

export interface PortLink extends vscode.TerminalLink {
  key: string;
  port: number;
}

const ADDRESS = /(?:https?:\/\/)?(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1?\]):(\d{1,5})\b(?:\/[^\s)'"]*)?/g;

/** The forwardable addresses in one line of terminal text. */
export function portLinksIn(line: string, key: string, sandboxName: string): PortLink[] {
  const links: PortLink[] = [];
  for (const m of line.matchAll(ADDRESS)) {
    const port = Number(m[1]);
    if (port < 1 || port > 65535) continue;
    links.push({ startIndex: m.index, length: m[0].length, tooltip: `Forward port ${port} of sandbox ${sandboxName} and open it in the browser`, key, port });
  }
  return links;
}

export class TerminalPortLinks implements vscode.TerminalLinkProvider<PortLink> {
  constructor(
    private readonly forwards: PortForwards,
    private readonly nameOf: (key: string) => string,
  ) {}

  provideTerminalLinks(context: vscode.TerminalLinkContext): PortLink[] {
    const key = sandboxTerminalKey(context.terminal);
    return key === undefined ? [] : portLinksIn(context.line, key, this.nameOf(key));
  }

  /** Forwards the link's port (or finds the forward that exists), without opening anything. */
  async forwardLink(link: PortLink) {
    return this.forwards.forward(link.key, link.port);
  }

  async handleTerminalLink(link: PortLink): Promise<void> {
    try {
      const forward = await this.forwardLink(link);
      await this.forwards.openInBrowser(forward);
    } catch (err) {
      void vscode.window.showErrorMessage(`Cannot forward port ${link.port}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}
