// Seeded randomness for the simulator: the same seed must replay the same cluster, so nothing in lib/
// may use Math.random. mulberry32 is tiny, fast and good enough for noise (not for cryptography).

export type Prng = () => number;

/** A generator of floats in [0, 1) fully determined by the 32-bit seed. */
export function mulberry32(seed: number): Prng {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Uniform float in [min, max). */
export function uniform(prng: Prng, min: number, max: number): number {
  return min + (max - min) * prng();
}

/**
 * A 32-bit seed for one named stream of a run: the run's seed mixed with the name (FNV-1a), so that streams of
 * different names are independent draws while each stays replayable.
 */
export function streamSeed(seed: number, name: string): number {
  let h = (0x811c9dc5 ^ (seed >>> 0)) >>> 0;
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}
