// Starts and supervises the companion server (vscode-languageclient over stdio) and gives the
// rest of the extension typed requests: params and results are the protocol's zod schemas, and
// results are parsed before use. The server is started by the first request, not at activation:
// the extension activates in every window (see package.json's onStartupFinished) and a window
// that never touches a sandbox or a session runs no server.
import { type ChildProcess, spawn } from 'node:child_process';
import zlib from 'node:zlib';
import * as vscode from 'vscode';
import { LanguageClient, ParameterStructures, ProgressType, RequestType, ResponseError, type ServerOptions, type StreamInfo } from 'vscode-languageclient/node';
import type { z } from 'zod';
import {
  type CompanionErrorCode,
  CompanionErrorDataSchema,
  type CompanionMethodName,
  companionMethods,
  COMPANION_PROTOCOL_VERSION,
  type ProgressValue,
  ProgressValueSchema,
} from '../../protocol/companion';
import { kubeconfigFromSetting } from './kubeconfigSetting';
import { serverLogSink } from './serverLogLines';

export type RequestParams<M extends CompanionMethodName> = z.input<(typeof companionMethods)[M]['params']>;
export type RequestResult<M extends CompanionMethodName> = z.output<(typeof companionMethods)[M]['result']>;

/** A failed companion request, with the protocol's stable code. */
export class CompanionRequestError extends Error {
  override readonly name = 'CompanionRequestError';
  constructor(
    readonly code: CompanionErrorCode | 'transport',
    message: string,
    readonly causeCode?: string,
  ) {
    super(message);
  }
}

export interface RequestOptions {
  token?: vscode.CancellationToken;
  onProgress?: (value: ProgressValue) => void;
}

export const REPOSITORY_PASSWORD_SECRET = 'sandboxSessions.repository.password';

/**
 * The server's environment from settings: the session repository (a folder or a postgres:// URL
 * whose password comes from SecretStorage, never from settings) and its retention, the
 * activation command, and the kubeconfig of the kruntimes provider.
 */
export async function serverEnvironment(context: vscode.ExtensionContext): Promise<NodeJS.ProcessEnv> {
  const config = vscode.workspace.getConfiguration('sandboxSessions');
  const env: NodeJS.ProcessEnv = { ...process.env };
  const repository = config.get<string>('repository', '').trim();
  if (repository !== '') {
    let location = repository;
    if (/^postgres(ql)?:\/\//i.test(repository)) {
      const url = new URL(repository);
      const password = await context.secrets.get(REPOSITORY_PASSWORD_SECRET);
      if (password !== undefined && url.password === '') url.password = password;
      location = url.toString();
    }
    env.SANDBOX_SESSIONS_REPOSITORY = location;
  }
  const keep = config.get<number>('repository.keepRevisions');
  if (keep !== undefined) env.SANDBOX_SESSIONS_KEEP_REVISIONS = String(keep);
  const activation = config.get<string[]>('activation.command', []);
  if (activation.length > 0) env.SANDBOX_SESSIONS_ACTIVATION_COMMAND = JSON.stringify(activation);
  // kruntimes: the kubeconfig files the server reads (empty: inherit KUBECONFIG, else ~/.kube/config).
  const kubeconfig = kubeconfigFromSetting(config.get<string>('kubeconfig', ''));
  if (kubeconfig !== undefined) env.KUBECONFIG = kubeconfig;
  return env;
}

/**
 * How to run the server (`server --stdio` by default, or another of its commands such as `mcp`): a
 * configured Node, else VS Code's own runtime (which must have zstd).
 */
export function serverCommand(context: vscode.ExtensionContext, command: readonly string[] = ['server', '--stdio']): { command: string; args: string[] } {
  const module = context.asAbsolutePath('dist/server.js');
  const configured = vscode.workspace.getConfiguration('sandboxSessions').get<string>('server.nodePath', '').trim();
  if (configured !== '') return { command: configured, args: [module, ...command] };
  if (typeof zlib.createZstdCompress !== 'function') {
    throw new CompanionRequestError(
      'unavailable',
      `VS Code's runtime (Node ${process.versions.node}) has no built-in zstd, which the companion server needs. ` +
        'Set "sandboxSessions.server.nodePath" to a Node.js 22.15 or newer.',
    );
  }
  return { command: process.execPath, args: [module, ...command] };
}

/**
 * Starts the server and hands its stdio to the language client. The process is started here,
 * not by the client, so that its stderr (JSON log lines) reaches the log at each line's level.
 */
function serverOptions(context: vscode.ExtensionContext, log: vscode.LogOutputChannel): ServerOptions {
  return async (): Promise<StreamInfo> => {
    // Read when the server starts: settings changed before then need no restart.
    const env = await serverEnvironment(context);
    const { command, args } = serverCommand(context);
    // VS Code's runtime is Electron on the desktop: run it as plain Node.
    // --clientProcessId: the server exits by itself if this extension host dies without closing stdio.
    const child = spawn(command, [...args, `--clientProcessId=${process.pid}`], { env: { ...env, ELECTRON_RUN_AS_NODE: '1' }, stdio: ['pipe', 'pipe', 'pipe'] });
    const sink = serverLogSink(log);
    child.stderr.on('data', (chunk: Buffer) => sink.write(chunk));
    child.stderr.on('end', () => sink.end());
    child.on('error', (err) => log.error(`the companion server could not be started (${command}): ${err.message}`));
    child.on('exit', (code, signal) => {
      if (code !== 0 && signal !== 'SIGTERM') log.warn(`the companion server exited (code ${code ?? '–'}, signal ${signal ?? '–'})`);
    });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    serverProcesses.add(child);
    child.once('exit', () => serverProcesses.delete(child));
    return { reader: child.stdout, writer: child.stdin };
  };
}

/** Server processes this extension host started; ended when the client stops. */
const serverProcesses = new Set<ChildProcess>();

/** What the extension does when the server has started, or could not start (once per client). */
export interface CompanionStartHooks {
  onStarted(): void;
  onStartFailed(message: string): void;
}

export class CompanionClient implements vscode.Disposable {
  private nextProgress = 0;
  private readonly client: LanguageClient;
  private started: Promise<void> | undefined;

  /** A client whose server starts on the first request (or on start()); nothing runs yet. */
  constructor(
    context: vscode.ExtensionContext,
    log: vscode.LogOutputChannel,
    private readonly hooks: CompanionStartHooks,
  ) {
    this.client = new LanguageClient('sandboxSessions', 'Sandbox Sessions', serverOptions(context, log), {
      documentSelector: [],
      outputChannel: log,
      initializationOptions: { protocolVersion: COMPANION_PROTOCOL_VERSION },
    });
  }

  /** Whether the server was asked to start in this window (it may still be starting). */
  get startRequested(): boolean {
    return this.started !== undefined;
  }

  /**
   * Starts the server once; every later call shares that start. A start that failed stays failed
   * (the language client cannot restart it): requests then fail with code `unavailable`.
   */
  start(): Promise<void> {
    this.started ??= this.client.start().then(
      () => this.hooks.onStarted(),
      (err: unknown) => {
        const message = err instanceof Error ? err.message : String(err);
        this.hooks.onStartFailed(message);
        throw new CompanionRequestError('unavailable', `the companion server did not start: ${message}`);
      },
    );
    return this.started;
  }

  async request<M extends CompanionMethodName>(method: M, params: RequestParams<M>, options: RequestOptions = {}): Promise<RequestResult<M>> {
    const definition = companionMethods[method];
    let progressToken: string | undefined;
    let progressListener: vscode.Disposable | undefined;
    if (options.onProgress && definition.progress) {
      progressToken = `sandbox-sessions-${process.pid}-${++this.nextProgress}`;
      const report = options.onProgress;
      progressListener = this.client.onProgress(new ProgressType<unknown>(), progressToken, (value: unknown) => {
        const parsed = ProgressValueSchema.safeParse(value);
        if (parsed.success) report(parsed.data);
      });
    }
    try {
      await this.start();
      // byName: params travel as one JSON object, never wrapped in an array.
      const type = new RequestType<object, unknown, unknown>(method, ParameterStructures.byName);
      const body = progressToken !== undefined ? { ...(params as object), progressToken } : ((params ?? {}) as object);
      const raw: unknown = await this.client.sendRequest(type, body, options.token);
      const parsed = definition.result.safeParse(raw);
      if (!parsed.success) throw new CompanionRequestError('internal', `the companion server answered ${method} with an unexpected result`);
      return parsed.data as RequestResult<M>;
    } catch (err) {
      throw toRequestError(err);
    } finally {
      progressListener?.dispose();
    }
  }

  onNotification(method: string, handler: (params: unknown) => void): vscode.Disposable {
    return this.client.onNotification(method, handler);
  }

  async dispose(): Promise<void> {
    if (this.started) await this.client.stop().catch(() => undefined);
    // The server exits when its stdin closes; a stuck one is ended.
    for (const child of serverProcesses) if (child.exitCode === null) child.kill('SIGTERM');
  }
}

function toRequestError(err: unknown): CompanionRequestError {
  if (err instanceof CompanionRequestError) return err;
  if (err instanceof ResponseError) {
    const data = CompanionErrorDataSchema.safeParse(err.data);
    if (data.success) return new CompanionRequestError(data.data.code, err.message, data.data.cause);
    return new CompanionRequestError(err.code === -32800 ? 'cancelled' : 'internal', err.message);
  }
  return new CompanionRequestError('transport', `the companion server is not reachable: ${err instanceof Error ? err.message : String(err)}`);
}
