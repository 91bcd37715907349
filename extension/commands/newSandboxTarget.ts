// Where a new sandbox goes: its provider, context, namespace and runtime — taken from the
// command's arguments when given (scripts, tests, "New Sandbox Here" on a namespace), otherwise
// picked. For kruntimes: the kubeconfig context (current first), the namespace (the context's
// first, another one can be typed) and the Runtime (the listed Runtimes where they apply, else
// typed and checked as kruntimes checks it).
import * as vscode from 'vscode';
import { z } from 'zod';
import { RunRuntimeNameSchema } from '../../protocol/kruntimes/run';
import { ProviderKindSchema, type ProviderInfo, type ProviderKind } from '../../protocol/sandboxes';
import { OPENSANDBOX_RUNTIME, SET_OPENSANDBOX_KEY_COMMAND } from './openSandboxCommands';
import { machineSettingLink } from './settingLink';

/** Arguments of `sandboxSessions.newSandbox`; every field is optional and skips its prompt. */
export const NewSandboxArgsSchema = z.object({
  provider: ProviderKindSchema.optional(),
  /** kruntimes: a kubeconfig context (default: picked, the current one first). */
  context: z.string().min(1).optional(),
  namespace: z.string().optional(),
  runtime: z.string().min(1).optional(),
  name: z.string().min(1).optional(),
  /** false: create only; else how to open it (default: ask). */
  open: z
    .union([z.literal(false), z.object({ mode: z.enum(['add', 'newWindow']).optional(), openTerminal: z.boolean().optional() })])
    .optional(),
});
export type NewSandboxArgs = z.infer<typeof NewSandboxArgsSchema>;

export interface NewSandboxTarget {
  provider: ProviderInfo;
  context: string | undefined;
  namespace: string;
  runtime: string;
}

type ContextInfo = ProviderInfo['contexts'][number];

/** A Kubernetes namespace name (an RFC 1123 label). */
const NAMESPACE_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export function namespaceProblem(value: string): string | undefined {
  if (value.length > 63) return `"${value}" is longer than 63 characters, the limit of a namespace name.`;
  if (!NAMESPACE_PATTERN.test(value)) {
    return `"${value}" is not a namespace name: use lowercase letters, digits and "-", starting and ending with a letter or digit.`;
  }
  return undefined;
}

/** Why `value` cannot name a kruntimes Runtime (the Run CRD's own rule), or undefined. */
export function runtimeProblem(value: string): string | undefined {
  const parsed = RunRuntimeNameSchema.safeParse(value);
  if (parsed.success) return undefined;
  return `"${value}" is not a Runtime name: 1–63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit.`;
}

/** A user-facing refusal of the command's arguments or of what the provider offers. */
export class NewSandboxRefusal extends Error {
  override readonly name = 'NewSandboxRefusal';
  constructor(
    message: string,
    /** A button that helps: label and the command it runs. */
    readonly action?: { label: string; command: string; args?: unknown[] },
  ) {
    super(message);
  }
}

/** Opens the kubeconfig setting on the Settings tab that has it (Remote in a remote window). */
const KUBECONFIG_SETTINGS = { label: 'Open Settings', ...machineSettingLink('sandboxSessions.kubeconfig') };

/** The contexts with kubeconfig's current one first (otherwise kubeconfig's order). */
function orderedContexts(provider: ProviderInfo): ContextInfo[] {
  return [...provider.contexts].sort((a, b) => Number(b.current === true) - Number(a.current === true));
}

/** The namespaces of a context with its own namespace first. */
export function orderedNamespaces(context: ContextInfo): string[] {
  const own = context.namespace;
  const rest = context.namespaces.filter((n) => n !== own);
  return own ? [own, ...rest] : rest;
}

/** OpenSandbox is a backend of the local runtime, offered as a target of its own. */
const OPENSANDBOX_SETUP = { label: 'Set OpenSandbox API Key…', command: SET_OPENSANDBOX_KEY_COMMAND };

function openSandboxRefusal(reason: string | undefined): NewSandboxRefusal {
  return new NewSandboxRefusal(`OpenSandbox cannot be used yet: ${reason ?? 'unavailable'}`, OPENSANDBOX_SETUP);
}

async function pickProvider(providers: ProviderInfo[], kind: ProviderKind | undefined): Promise<{ provider: ProviderInfo; runtime?: string } | undefined> {
  if (kind) {
    const provider = providers.find((p) => p.kind === kind);
    if (!provider) throw new NewSandboxRefusal(`The companion server has no ${kind} provider.`);
    // kruntimes may be unusable in the current context yet work in another one.
    if (!provider.available && provider.contexts.length === 0) {
      throw new NewSandboxRefusal(
        `${provider.label} cannot be used here: ${provider.reason ?? 'unavailable'}`,
        provider.kind === 'kruntimes' ? KUBECONFIG_SETTINGS : undefined,
      );
    }
    return { provider };
  }
  const usable = providers.filter((p) => p.available);
  if (usable.length === 0) {
    throw new NewSandboxRefusal(`No sandbox provider works here: ${providers.map((p) => `${p.label}: ${p.reason ?? 'unavailable'}`).join('; ')}`);
  }
  const local = providers.find((p) => p.kind === 'local');
  const openSandbox = local?.runtimes.find((r) => r.name === OPENSANDBOX_RUNTIME);
  // A single usable provider is taken without asking, unless OpenSandbox is set up as a second target.
  if (usable.length === 1 && openSandbox?.available !== true) return { provider: usable[0] as ProviderInfo };
  type Item = vscode.QuickPickItem & { p: ProviderInfo; runtime?: string; unavailable?: string };
  const items: Item[] = usable.map((p) => ({ label: p.label, description: p.kind === 'local' ? 'on this machine' : 'session Runs on Kubernetes', p }));
  if (local && openSandbox) {
    items.push({
      label: 'OpenSandbox',
      description: openSandbox.available ? 'sandboxes on an OpenSandbox server' : `not set up: ${openSandbox.reason ?? 'unavailable'}`,
      p: local,
      runtime: OPENSANDBOX_RUNTIME,
      ...(openSandbox.available ? {} : { unavailable: openSandbox.reason ?? 'unavailable' }),
    });
  }
  const picked = await vscode.window.showQuickPick(items, { title: 'New Sandbox', placeHolder: 'Where should the sandbox run?' });
  if (picked?.unavailable !== undefined) throw openSandboxRefusal(picked.unavailable);
  return picked ? { provider: picked.p, ...(picked.runtime ? { runtime: picked.runtime } : {}) } : undefined;
}

async function pickContext(provider: ProviderInfo, requested: string | undefined): Promise<ContextInfo | undefined> {
  const contexts = orderedContexts(provider);
  if (requested !== undefined) {
    const found = contexts.find((c) => c.name === requested);
    if (!found) {
      throw new NewSandboxRefusal(
        `The kubeconfig has no context "${requested}" (contexts: ${contexts.map((c) => c.name).join(', ') || 'none'}).`,
        KUBECONFIG_SETTINGS,
      );
    }
    return found;
  }
  if (contexts.length === 0) throw new NewSandboxRefusal(`${provider.label} lists no kubeconfig contexts.`, KUBECONFIG_SETTINGS);
  if (contexts.length === 1) return contexts[0];
  const picked = await vscode.window.showQuickPick(
    contexts.map((c) => ({
      label: c.name,
      description: [c.current ? 'current' : undefined, c.namespace ? `namespace ${c.namespace}` : undefined].filter(Boolean).join(' · '),
      c,
    })),
    { title: 'New Sandbox', placeHolder: 'Kubernetes context (from your kubeconfig)' },
  );
  return picked?.c;
}

interface NamespaceItem extends vscode.QuickPickItem {
  namespace?: string;
}

/** The context's namespaces (its own first); typing a name that is not listed offers it. */
function pickNamespace(context: ContextInfo): Promise<string | undefined> {
  const known = orderedNamespaces(context);
  const listed: NamespaceItem[] = known.map((namespace) => ({
    label: namespace,
    ...(namespace === context.namespace ? { description: "the context's namespace" } : {}),
    namespace,
  }));
  const qp = vscode.window.createQuickPick<NamespaceItem>();
  qp.title = `New Sandbox in ${context.name}`;
  qp.placeholder = 'Namespace (or type the name of another one)';
  qp.items = listed;
  qp.onDidChangeValue((raw) => {
    const value = raw.trim();
    if (value === '' || known.includes(value)) {
      qp.items = listed;
      return;
    }
    const problem = namespaceProblem(value);
    const typed: NamespaceItem = problem
      ? { label: `$(error) ${value}`, description: problem, alwaysShow: true }
      : { label: value, description: 'another namespace', alwaysShow: true, namespace: value };
    qp.items = [typed, ...listed];
  });
  return new Promise<string | undefined>((resolve) => {
    qp.onDidAccept(() => {
      const namespace = qp.selectedItems[0]?.namespace;
      if (namespace === undefined) return; // an invalid typed name: keep the pick open
      resolve(namespace);
      qp.hide();
    });
    qp.onDidHide(() => {
      resolve(undefined);
      qp.dispose();
    });
    qp.show();
  });
}

function typeRuntime(context: string, namespace: string, why: string): Thenable<string | undefined> {
  return vscode.window.showInputBox({
    title: `New Sandbox in ${context}/${namespace}`,
    prompt: `${why} Name the kruntimes Runtime that runs the sandbox.`,
    placeHolder: 'Runtime name, e.g. bash',
    ignoreFocusOut: true,
    validateInput: (value) => (value.trim() === '' ? 'Name a Runtime.' : runtimeProblem(value.trim())),
  }).then((v) => v?.trim());
}

async function pickKruntimesRuntime(provider: ProviderInfo, context: ContextInfo, namespace: string): Promise<string | undefined> {
  // providers/list lists the Runtimes of the current context's own namespace only.
  const listedHere = context.current === true && namespace === context.namespace;
  if (!listedHere) {
    return typeRuntime(context.name, namespace, `Runtimes are listed only for the current context's namespace.`);
  }
  if (provider.runtimes.length === 0) {
    return typeRuntime(context.name, namespace, `No Runtimes are listed in ${namespace}${provider.reason ? ` (${provider.reason})` : ''}.`);
  }
  const other = { label: '$(edit) Another Runtime…', runtime: undefined };
  const picked = await vscode.window.showQuickPick(
    [...provider.runtimes.map((r) => ({ label: r.name, description: r.available ? r.isolation : `unavailable: ${r.reason ?? ''}`, runtime: r.name as string | undefined })), other],
    { title: `New Sandbox in ${context.name}/${namespace}`, placeHolder: 'kruntimes Runtime for the sandbox' },
  );
  if (!picked) return undefined;
  return picked.runtime ?? typeRuntime(context.name, namespace, 'Runtimes not listed can still be named.');
}

async function pickLocalRuntime(provider: ProviderInfo): Promise<string | undefined> {
  const picked = await vscode.window.showQuickPick(
    provider.runtimes.map((r) => ({ label: r.name, description: r.available ? r.isolation : `unavailable: ${r.reason ?? ''}`, runtime: r })),
    { title: 'New Sandbox', placeHolder: 'Runtime (backend) for the sandbox' },
  );
  if (!picked) return undefined;
  if (!picked.runtime.available && picked.label === OPENSANDBOX_RUNTIME) throw openSandboxRefusal(picked.runtime.reason);
  if (!picked.runtime.available) throw new NewSandboxRefusal(`${picked.label} cannot run here: ${picked.runtime.reason ?? 'unavailable'}`);
  return picked.label;
}

/**
 * Resolves where a new sandbox goes, asking only for what `args` leaves open. Undefined when the
 * user dismissed a pick; `NewSandboxRefusal` for arguments or providers that cannot work.
 */
export async function resolveNewSandboxTarget(providers: ProviderInfo[], args: NewSandboxArgs): Promise<NewSandboxTarget | undefined> {
  const pickedProvider = await pickProvider(providers, args.provider);
  if (!pickedProvider) return undefined;
  const provider = pickedProvider.provider;
  if (args.namespace !== undefined) {
    const problem = namespaceProblem(args.namespace);
    if (problem) throw new NewSandboxRefusal(problem);
  }

  if (provider.kind === 'local') {
    if (args.runtime === OPENSANDBOX_RUNTIME) {
      const info = provider.runtimes.find((r) => r.name === OPENSANDBOX_RUNTIME);
      if (info && !info.available) throw openSandboxRefusal(info.reason);
    }
    const runtime = args.runtime ?? pickedProvider.runtime ?? (await pickLocalRuntime(provider));
    if (!runtime) return undefined;
    return { provider, context: args.context ?? provider.contexts[0]?.name, namespace: args.namespace ?? 'default', runtime };
  }

  if (args.runtime !== undefined) {
    const problem = runtimeProblem(args.runtime);
    if (problem) throw new NewSandboxRefusal(problem);
  }
  const context = await pickContext(provider, args.context);
  if (!context) return undefined;
  const namespace = args.namespace ?? (await pickNamespace(context));
  if (!namespace) return undefined;
  const runtime = args.runtime ?? (await pickKruntimesRuntime(provider, context, namespace));
  if (!runtime) return undefined;
  return { provider, context: context.name, namespace, runtime };
}
