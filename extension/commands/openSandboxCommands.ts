// OpenSandbox in VS Code: where it is (the machine-scoped `sandboxSessions.opensandbox.domain`
// setting), its API key (in SecretStorage only — "Set OpenSandbox API Key…" — never in settings
// and never logged), both handed to the companion server, which gives them to the local gateway
// daemon (a 0600 file in its state root); and what a new OpenSandbox sandbox asks for (image,
// resources, TTL, allowed egress domains, credential bindings) from the settings. Credential values
// ("Set OpenSandbox Credential…") live in SecretStorage too and reach the companion in memory only.
import * as vscode from 'vscode';
import { OpenSandboxCredentialBindingsSchema, SECRET_NAME, type OpenSandboxCredentialBinding } from '../../protocol/opensandboxCredentials';
import type { SandboxCreateSpec } from '../../protocol/sandboxes';
import type { CompanionClient } from '../companion/companionClient';

export const OPENSANDBOX_API_KEY_SECRET = 'sandboxSessions.opensandbox.apiKey';
export const OPENSANDBOX_RUNTIME = 'opensandbox';
export const SET_OPENSANDBOX_KEY_COMMAND = 'sandboxSessions.setOpenSandboxApiKey';
export const SET_OPENSANDBOX_CREDENTIAL_COMMAND = 'sandboxSessions.setOpenSandboxCredential';
/** SecretStorage key of credential `name`'s value. */
export const credentialSecretKey = (name: string): string => `sandboxSessions.opensandbox.credential.${name}`;

/** The credential bindings setting, or [] with a warning when it does not parse (the create then has none). */
function credentialBindings(log?: vscode.LogOutputChannel): OpenSandboxCredentialBinding[] {
  const raw = vscode.workspace.getConfiguration('sandboxSessions.opensandbox').get<unknown>('credentialBindings', []);
  const parsed = OpenSandboxCredentialBindingsSchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  log?.warn(`sandboxSessions.opensandbox.credentialBindings is ignored: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return [];
}

/** The `opensandbox` part of a create spec, from the settings (only what is set). */
export function openSandboxCreateOptions(): NonNullable<SandboxCreateSpec['opensandbox']> {
  const config = vscode.workspace.getConfiguration('sandboxSessions.opensandbox');
  const image = config.get<string>('image', '').trim();
  const resources = config.get<{ cpu?: unknown; memory?: unknown }>('resources', {});
  const ttl = config.get<number>('timeoutSeconds');
  const egress = config.get<string[]>('allowedEgressDomains', []).map((d) => d.trim()).filter((d) => d !== '');
  const bindings = credentialBindings();
  return {
    ...(bindings.length > 0 ? { credentialBindings: bindings } : {}),
    ...(image ? { image } : {}),
    ...(typeof resources.cpu === 'string' && resources.cpu ? { cpu: resources.cpu } : {}),
    ...(typeof resources.memory === 'string' && resources.memory ? { memory: resources.memory } : {}),
    ...(typeof ttl === 'number' && Number.isInteger(ttl) ? { ttlSeconds: ttl } : {}),
    ...(egress.length > 0 ? { allowedEgressDomains: egress } : {}),
  };
}

function domainSetting(): string {
  return vscode.workspace.getConfiguration('sandboxSessions.opensandbox').get<string>('domain', '').trim();
}

/** Hands the domain and the stored key to the companion server; `clear` also removes an earlier configuration. */
async function pushConnection(context: vscode.ExtensionContext, companion: CompanionClient, log: vscode.LogOutputChannel, clear: boolean): Promise<void> {
  const domain = domainSetting();
  // The values of the secrets the bindings name (the companion keeps them in memory; never logged).
  const credentials: Record<string, string> = {};
  for (const b of credentialBindings(log)) {
    const value = await context.secrets.get(credentialSecretKey(b.secret));
    if (value) credentials[b.secret] = value;
  }
  const hasCredentials = Object.keys(credentials).length > 0;
  if (domain === '' && !clear && !hasCredentials) return; // nothing set here: the daemon keeps what it has (its environment, or another window's)
  const apiKey = await context.secrets.get(OPENSANDBOX_API_KEY_SECRET);
  try {
    const { configured } = await companion.request(
      'opensandbox/configure',
      domain === '' && !clear ? { credentials } : { ...(domain ? { domain } : {}), ...(apiKey ? { apiKey } : {}), credentials },
    );
    log.info(configured ? `OpenSandbox: ${domain} (${apiKey ? 'API key set' : 'no API key'})` : 'OpenSandbox: not configured');
  } catch (err) {
    log.warn(`OpenSandbox: could not configure the local gateway: ${err instanceof Error ? err.message : String(err)}`);
  }
}

export function registerOpenSandboxCommands(deps: { context: vscode.ExtensionContext; companion: CompanionClient; log: vscode.LogOutputChannel }): vscode.Disposable[] {
  const { context, companion, log } = deps;
  // One push at a time, each reading the settings and secrets when its turn comes: a push started by a settings
  // change and one started by Set API Key could otherwise reach the companion server in the other order, and the
  // older, keyless configuration would win (seen: a domain set just before the key, then a create refused with 401).
  let pushes: Promise<void> = Promise.resolve();
  const push = (clear: boolean): Promise<void> => {
    const next = (): Promise<void> => pushConnection(context, companion, log, clear);
    pushes = pushes.then(next, next);
    return pushes;
  };
  void push(false);
  return [
    vscode.commands.registerCommand(SET_OPENSANDBOX_KEY_COMMAND, async (key?: unknown) => {
      if (domainSetting() === '') {
        const domain = await vscode.window.showInputBox({
          title: 'OpenSandbox server',
          prompt: 'Where is your OpenSandbox server? (host:port or a URL; stored in the setting sandboxSessions.opensandbox.domain)',
          placeHolder: 'opensandbox.example.com:8080',
          ignoreFocusOut: true,
          validateInput: (v) => (v.trim() === '' ? 'Name the OpenSandbox server.' : undefined),
        });
        if (!domain) return false;
        await vscode.workspace.getConfiguration('sandboxSessions.opensandbox').update('domain', domain.trim(), vscode.ConfigurationTarget.Global);
      }
      // A test or script may pass the key; a person types it into a password box.
      const value =
        typeof key === 'string'
          ? key
          : await vscode.window.showInputBox({
              title: 'OpenSandbox API Key',
              prompt: `The API key of ${domainSetting()} (kept in VS Code's secret storage; empty removes it)`,
              password: true,
              ignoreFocusOut: true,
            });
      if (value === undefined) return false;
      if (value.trim() === '') await context.secrets.delete(OPENSANDBOX_API_KEY_SECRET);
      else await context.secrets.store(OPENSANDBOX_API_KEY_SECRET, value.trim());
      await push(true);
      return true;
    }),
    vscode.commands.registerCommand(SET_OPENSANDBOX_CREDENTIAL_COMMAND, async (nameArg?: unknown, valueArg?: unknown) => {
      // A test or script may pass name and value; a person picks a secret the bindings name (or types one).
      let name = typeof nameArg === 'string' ? nameArg : undefined;
      if (name === undefined) {
        const named = [...new Set(credentialBindings(log).map((b) => b.secret))];
        const picked = named.length > 0 ? await vscode.window.showQuickPick([...named, 'Another name…'], { title: 'OpenSandbox credential', placeHolder: 'Which secret (as named in sandboxSessions.opensandbox.credentialBindings)?' }) : 'Another name…';
        if (picked === undefined) return false;
        name =
          picked !== 'Another name…'
            ? picked
            : await vscode.window.showInputBox({ title: 'OpenSandbox credential name', prompt: 'The secret name a credential binding uses (uppercase letters, digits, _)', ignoreFocusOut: true, validateInput: (v) => (SECRET_NAME.test(v.trim()) ? undefined : 'Use uppercase letters, digits and _ (e.g. GITHUB_TOKEN).') });
        if (!name) return false;
      }
      name = name.trim();
      if (!SECRET_NAME.test(name)) throw new Error(`"${name}" is not a secret name (uppercase letters, digits and _)`);
      const value = typeof valueArg === 'string' ? valueArg : await vscode.window.showInputBox({ title: `OpenSandbox credential ${name}`, prompt: `The value of ${name} (kept in VS Code's secret storage, put into each new OpenSandbox sandbox's Credential Vault; empty removes it)`, password: true, ignoreFocusOut: true });
      if (value === undefined) return false;
      if (value.trim() === '') await context.secrets.delete(credentialSecretKey(name));
      else await context.secrets.store(credentialSecretKey(name), value.trim());
      await push(false);
      return true;
    }),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('sandboxSessions.opensandbox.domain')) void push(true);
      else if (e.affectsConfiguration('sandboxSessions.opensandbox.credentialBindings')) void push(false);
    }),
  ];
}
