// What the simulated cluster assumes, in words the README can quote. Keep in step with the code: each
// entry names the behaviour a reader would otherwise have to dig out of simulated-cluster.ts.
import { MEASURED_RESCALE_PAUSE_SECONDS } from '../policies/rendezvous.js';

/** How simulated jobs fail (and what does not make them fail). */
export const SIMULATED_FAILURE_SEMANTICS = [
  "OOM kill: a training container whose memory limit is below its application's memory need is OOMKilled (exit code 137, reason OOMKilled) 60 s after it starts, and restarts in place after a crash-loop back-off (10 s, doubling per restart, at most 300 s) with restartCount + 1, keeping its pod's own resources (pod resources are immutable, as in Kubernetes): a raised limit in the job's template reaches only pods the operator creates anew, e.g. after an eviction.",
  'Backoff limit: a job fails (reason BackoffLimitExceeded) when the restarts summed over its pods exceed spec.runPolicy.backoffLimit (default 3), as the Kubeflow training-operator counts them. Restarts of pods deleted by a scale-down no longer count.',
  'Rendezvous timeout: a job fails (reason PendingTimeout) when one of its pods stays unschedulable for pendingTimeoutSeconds (600 s) while some of its peers run: with a fixed world size the running workers wait in rendezvous for the missing peer and time out. A job none of whose pods runs is queued, not failed.',
  'Preemption and eviction do not fail a job: the pod becomes Failed with status.reason Preempted or Evicted, the operator recreates it (same name, new uid, restartCount 0) and it must be scheduled again; meanwhile the job does not train, and if the new pod cannot be scheduled the rendezvous timeout applies.',
  "Restart budget (elastic PyTorchJobs, torchrun): each pod's container runs one torchrun agent with elasticPolicy.maxRestarts restarts. A re-formed world that lost or restarted a member spends one restart of every agent that survived into it (growth spends none; an agent new to the job starts with all of them); a job whose agent needs a restart past maxRestarts fails (reason MaxRestartsExceeded), as torchrun's agent gives up. The simulated jobs have maxRestarts 100, as the training-operator's elastic examples (lib/sim/training-job-manifests.ts, SIMULATED_MAX_RESTARTS).",
  "A failed job's pods are deleted (cleanPodPolicy Running), returning their resources; a completed job's pods end Succeeded and hold nothing.",
] as const;

/** Every modelling assumption of the simulator, one sentence each. */
export const SIMULATOR_ASSUMPTIONS = [
  'Fixed world size: torchrun is started with nnodes = the current replica count, so a job trains only while every replica of every role it waits for (Worker, Master, Chief, PS; not Evaluator) has a running container. elasticPolicy min/max only bound what an autoscaler may set.',
  "Throughput = K * m / stepTime(app, {replicas: K, nodes, localBatchSize: m, ps}), with stepTime from the simulation's world (simulation-world.ts): the application profiles fitted on the Pollux measurements (app-profiles.ts; the demo's), or the measured Pollux tables themselves (measured-step-times.ts; the cluster benchmark's), which also receive the replicas per node. K counts Worker, Master and Chief replicas; nodes is the number of distinct nodes they run on; m = global batch / K when the job declares trainscaler.io/global-batch-size (kept fixed), else trainscaler.io/local-batch-size, else the application's default.",
  "A job completes when its processed samples reach trainscaler.io/target-samples (else the application's demo target), at the exact instant within a step; JCT = completion time - submission time.",
  `Every re-formed world (worker count change, a pod replaced or its container restarted) costs time without progress, asymmetric as measured on a real elastic PyTorchJob (source: ${MEASURED_RESCALE_PAUSE_SECONDS.source}): scaleUpCostSeconds (${MEASURED_RESCALE_PAUSE_SECONDS.recommended.up} s) when the world only gained members (after their pod start), scaleDownCostSeconds (${MEASURED_RESCALE_PAUSE_SECONDS.recommended.down} s) when it lost or restarted one (the survivors wait for the lost agent's heartbeat to expire). Before that measurement every re-formed world cost a flat 30 s. The first start costs only the pod start (20 s from binding to a running container).`,
  'Measured step times carry uniform +-3% noise (seeded); one step-time sample per job per minute of progress, with the synchronisation part of the step (syncTime, what a DDP communication hook times) from the same profile and noise. Per-worker step times are equal up to the same noise unless a straggler is injected; a straggler slows the whole job by its factor (synchronous training waits for it) until its pod is replaced.',
  'Only limits change how an application runs: memory below the need is OOM-killed (see the failure semantics), a CPU limit below the need slows the step by need / limit. Requests only decide scheduling, so over-requesting wastes capacity and nothing else.',
  'Observed usage for right-sizing: peak memory = need x U(0.9, 1.0) per pod (the limit, for a container that hits it), CPU = need x U(0.85, 1.0) capped by the limit. Parameter servers and evaluators report 0.8 x their requests x the same factors.',
  'Scheduler: pending pods in order of priority, then waiting time; first fit over the nodes in order by requests (GPU, CPU, memory); no gang scheduling, affinity, taints, topology or PodDisruptionBudgets. A pod that fits nowhere preempts lower-priority pods on the node whose most important victim has the lowest priority, then the fewest victims (lowest priority, newest first); victims stop at once (no grace period).',
  'Operators: a pod per missing replica index (PyTorchJob/TFJob <job>-<role>-<i> with the training.kubeflow.org labels, StatefulSet <name>-<i> with apps.kubernetes.io/pod-index); scale-down deletes the highest indices first. The operators react to a spec change at once (the real controllers take milliseconds). A changed Kubeflow pod template reaches new pods only; a StatefulSet rolls its pods one at a time, highest index first, once the others run. OrderedReady StatefulSets start pods one by one.',
  "Pod priority comes from the template's priorityClassName through the configured PriorityClasses (0 when unknown), as the Priority admission plugin resolves it.",
  "The API server: one resourceVersion counter for all objects (like etcd), bumped by every write including the emulated controllers' status changes; JSON Patch applies atomically; a replace or test of /metadata/resourceVersion with another value, or any failed test, is a 409 conflict; an operation on a missing parent, an invalid quantity or a request above its limit is a 422; dry runs validate and store nothing. ConfigMaps: create is 409 when one exists, replace is 409 on a stale resourceVersion, data over 1 MiB is 422.",
  "Time advances in 10 s sub-steps; everything due within a sub-step happens at its start. Nodes never fail and there is no network, storage or image-pull variability beyond what the world's step times contain.",
  ...SIMULATED_FAILURE_SEMANTICS,
] as const;

/** The failure semantics as one Markdown list, for the README and `--help` texts. */
export const SIMULATED_FAILURE_DESCRIPTION: string = SIMULATED_FAILURE_SEMANTICS.map(
  (line) => `- ${line}`,
).join('\n');

/** All simulator assumptions as one Markdown list. */
export const SIMULATOR_ASSUMPTIONS_DESCRIPTION: string = SIMULATOR_ASSUMPTIONS.map(
  (line) => `- ${line}`,
).join('\n');
