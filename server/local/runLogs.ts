// runtimed's log of each local Run (kubelet log format, rotated; an audit line per finished
// mutation, never command text or contents): opened on first use, ended once the Run is terminal
// and its session closed, so a follow of it ends too. A log that cannot be written never fails
// the operation it describes.
import { isTerminalPhase } from '../../protocol/kruntimes/run';
import { ContainerLog, DEFAULT_CONTAINER_LOG_LIMITS, type ContainerLogLimits } from './containerLog';
import { operationLogLines, type CompletedOperation } from './operationAudit';
import { uidOf, type RunEntry } from './runRecords';
import type { StateLayout } from './stateRoot';

export class RunLogs {
  constructor(
    private readonly layout: StateLayout,
    private readonly limits: ContainerLogLimits = DEFAULT_CONTAINER_LOG_LIMITS,
    private readonly log: (line: string) => void,
  ) {}

  /** The Run's log, opened (and already finished, for a Run that ended before) on first use. */
  of(entry: RunEntry): ContainerLog {
    if (!entry.log) {
      entry.log = new ContainerLog(this.layout.runLogFile(uidOf(entry)), this.limits);
      if (entry.logEnded || (isTerminalPhase(entry.run.status?.phase) && !entry.session)) entry.log.finish();
    }
    return entry.log;
  }

  /** No more lines will come. */
  end(entry: RunEntry): void {
    entry.logEnded = true;
    entry.log?.finish();
  }

  /** Writes runtimed's lines for one finished mutation. */
  writeOperation(entry: RunEntry, op: CompletedOperation): void {
    const run = entry.run;
    try {
      const log = this.of(entry);
      const lines = operationLogLines(
        {
          runUid: uidOf(entry),
          ...(run.status?.assignedPodUID ? { assignedPodUid: run.status.assignedPodUID } : {}),
          runName: run.metadata.name ?? '',
          namespace: run.metadata.namespace ?? 'default',
          runtime: run.spec.runtime,
          pod: run.status?.assignedPod ?? `local-${run.spec.runtime}`,
        },
        op,
      );
      for (const line of lines) log.write(line);
    } catch (err) {
      this.log(`run ${run.metadata.namespace}/${run.metadata.name}: writing its runtimed log: ${(err as Error).message}`);
    }
  }
}
