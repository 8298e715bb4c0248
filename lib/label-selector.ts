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

// Equality-based label selectors as `kubectl get pods -l` accepts them: 'k=v', 'k==v', 'k!=v', 'k', '!k',
// comma-separated (AND). Set-based selectors ('k in (a,b)') are rejected rather than misread.

export type LabelRequirement =
  | { key: string; op: 'equals' | 'notEquals'; value: string }
  | { key: string; op: 'exists' | 'notExists' };

const KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/** Parses a selector; throws a RangeError naming the bad term. An empty selector matches everything. */
export function parseLabelSelector(selector: string | undefined): LabelRequirement[] {
  if (selector === undefined || selector.trim() === '') return [];
  return selector.split(',').map((raw) => {
    const term = raw.trim();
    const notEquals = /^([^!=\s]+)\s*!=\s*(.*)$/.exec(term);
    const equals = /^([^!=\s]+)\s*==?\s*(.*)$/.exec(term);
    let requirement: LabelRequirement;
    if (notEquals)
      requirement = { key: notEquals[1] ?? '', op: 'notEquals', value: (notEquals[2] ?? '').trim() };
    else if (equals) requirement = { key: equals[1] ?? '', op: 'equals', value: (equals[2] ?? '').trim() };
    else if (term.startsWith('!')) requirement = { key: term.slice(1).trim(), op: 'notExists' };
    else requirement = { key: term, op: 'exists' };
    if (!KEY.test(requirement.key)) throw new RangeError(`invalid label selector term '${term}'`);
    if ('value' in requirement && !VALUE.test(requirement.value)) {
      throw new RangeError(`invalid label selector term '${term}'`);
    }
    return requirement;
  });
}

export function matchesLabels(
  requirements: LabelRequirement[],
  labels: Record<string, string> | undefined,
): boolean {
  return requirements.every((r) => {
    const value = labels?.[r.key];
    switch (r.op) {
      case 'equals':
        return value === r.value;
      case 'notEquals':
        return value !== r.value;
      case 'exists':
        return value !== undefined;
      default:
        return value === undefined;
    }
  });
}
