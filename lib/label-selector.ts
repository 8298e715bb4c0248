// A Kubernetes LabelSelector (metav1.LabelSelector) matched against an object's labels, as the API server
// matches it: every matchLabels pair and every matchExpressions requirement must hold; an empty selector
// matches everything.

export type SelectorOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

export interface LabelSelectorRequirement {
  key: string;
  operator: SelectorOperator;
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

function holds(requirement: LabelSelectorRequirement, labels: Readonly<Record<string, string>>): boolean {
  const present = Object.hasOwn(labels, requirement.key);
  const value = labels[requirement.key];
  const values = requirement.values ?? [];
  switch (requirement.operator) {
    case 'In':
      return present && value !== undefined && values.includes(value);
    case 'NotIn':
      // As in Kubernetes: a missing key satisfies NotIn.
      return !present || value === undefined || !values.includes(value);
    case 'Exists':
      return present;
    case 'DoesNotExist':
      return !present;
  }
}

export function labelSelectorMatches(
  selector: LabelSelector,
  labels: Readonly<Record<string, string>> = {},
): boolean {
  const pairs = Object.entries(selector.matchLabels ?? {});
  if (!pairs.every(([key, value]) => Object.hasOwn(labels, key) && labels[key] === value)) return false;
  return (selector.matchExpressions ?? []).every((r) => holds(r, labels));
}

/** The selector as kubectl prints one (`app=bert,tier in (a,b),!gpu`): for messages. */
export function formatLabelSelector(selector: LabelSelector): string {
  const parts = Object.entries(selector.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const r of selector.matchExpressions ?? []) {
    const values = (r.values ?? []).join(',');
    if (r.operator === 'In') parts.push(`${r.key} in (${values})`);
    else if (r.operator === 'NotIn') parts.push(`${r.key} notin (${values})`);
    else if (r.operator === 'Exists') parts.push(r.key);
    else parts.push(`!${r.key}`);
  }
  return parts.length > 0 ? parts.join(',') : '(every job)';
}
