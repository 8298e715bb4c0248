// What Prometheus's HTTP API answers to an instant or range query, for the tests' local Prometheus servers.

/** An HTTP status and a JSON body. */
export interface PrometheusAnswer {
  status: number;
  body: unknown;
}

/** A successful instant query's answer. */
export function vectorAnswer(result: unknown[]): PrometheusAnswer {
  return { status: 200, body: { status: 'success', data: { resultType: 'vector', result } } };
}

/** A successful range query's answer. */
export function matrixAnswer(result: unknown[]): PrometheusAnswer {
  return { status: 200, body: { status: 'success', data: { resultType: 'matrix', result } } };
}
