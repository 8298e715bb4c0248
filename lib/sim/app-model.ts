// What the simulator needs to know about an application to play it: how fast it steps at a placement
// and what it really consumes. The demo plugs in the profiles fitted from Pollux measurements
// (profiled-app-model.ts), the cluster benchmark the measured tables (measured-app-model.ts); tests plug in
// a model whose numbers they can check by hand.
import type { Placement } from '../model/throughput-model.js';
import type { GradientNoiseTable } from './statistical-efficiency.js';

/** A placement as the simulator knows it: also how many replicas run on each node, in the cluster's node order. */
export interface SimulatedPlacement extends Placement {
  perNode?: readonly number[];
}

export interface SimulatedAppModel {
  /** Whether the app (a job's trainscaler.io/signature) is known; unknown apps cannot be simulated. */
  knows(app: string): boolean;
  /** Peak memory of one replica's training container, bytes; a limit below it gets the container OOM-killed. */
  memoryNeedBytes(app: string): number;
  /** CPU one replica really uses, millicores; a CPU limit below it throttles the step. */
  cpuMillis(app: string): number;
  /** Per-replica batch size a job uses when its manifest declares none. */
  defaultLocalBatchSize(app: string): number;
  /** Samples a job of the app processes before it completes when its manifest declares none. */
  defaultTargetSamples(app: string): number;
  /** True seconds per optimizer step at the placement (the simulator adds measurement noise on top). */
  stepTime(app: string, placement: SimulatedPlacement): number;
  /** The synchronisation part of stepTime, when the app model knows it; reported as a sample's syncTime. */
  syncTime?(app: string, placement: SimulatedPlacement): number;
  /**
   * The app's measured gradient statistics, when known: its jobs then complete on statistical progress
   * (lib/sim/statistical-efficiency.ts), a step at a larger global batch making less than proportionally more.
   * Without them a job completes when it has processed its target samples, whatever its batch.
   */
  statistics?(app: string): GradientNoiseTable | undefined;
}
