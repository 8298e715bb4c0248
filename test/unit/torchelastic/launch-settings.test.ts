// The launch read from a Worker container: the command forms users write, and what is not understood falls back
// (launcher unknown, with why), never an exception in the tick.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type LaunchInput,
  launchSettingsOf,
  parseRdzvConf,
  shellCommands,
} from '../../../lib/torchelastic/launch-settings.js';

function launch(command: unknown[], args: unknown[] = [], more: Partial<LaunchInput> = {}) {
  return launchSettingsOf({ command, args, env: {}, rdzvConf: {}, ...more });
}

describe('launch settings: which launcher', () => {
  it('plain torchrun, its module forms, and trainscaler launcher', () => {
    assert.equal(launch(['torchrun', '--nnodes=1:4', '--nproc-per-node=1', 'train.py']).launcher, 'torchrun');
    assert.equal(launch(['/usr/local/bin/torchrun', 'train.py']).launcher, 'torchrun');
    assert.equal(launch(['python', '-m', 'torch.distributed.run', 'train.py']).launcher, 'torchrun');
    assert.equal(launch(['python3.11', '-u', '-mtorch.distributed.run', 'train.py']).launcher, 'torchrun');
    assert.equal(launch(['python3', '-m', 'trainscaler_hook.launch', 'train.py']).launcher, 'trainscaler');
    assert.equal(launch(['/opt/conda/bin/python', '-m', 'trainscaler_hook.launch']).launcher, 'trainscaler');
    assert.deepEqual(launch(['python', '-W', 'ignore', '-X', 'importtime', '-m', 'torch.distributed.run']), {
      launcher: 'torchrun',
    });
    assert.deepEqual(
      launch(['python3', '-mtrainscaler_hook.launch', '--monitor-interval', '2', 'train.py']),
      {
        launcher: 'trainscaler',
        monitorInterval: 2,
      },
    );
    assert.deepEqual(
      launch(['/usr/bin/env', 'TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1', 'torchrun', 'train.py']),
      {
        launcher: 'torchrun',
        disableShareStore: '1',
      },
    );
  });

  it('reads the command split across command and args', () => {
    const l = launch(
      ['python3', '-m'],
      ['trainscaler_hook.launch', '--rdzv-conf', 'last_call_timeout=2', 'train.py'],
    );
    assert.deepEqual(l, { launcher: 'trainscaler', lastCallTimeout: 2 });
    assert.equal(launch(['torchrun'], ['--nnodes=1:4', 'train.py']).launcher, 'torchrun');
  });

  it('reads a shell line: sh -c, bash -lc, a setup step before, inline env assignments', () => {
    assert.deepEqual(launch(['sh', '-c', 'torchrun --monitor-interval 1 --nnodes=1:4 train.py']), {
      launcher: 'torchrun',
      monitorInterval: 1,
    });
    assert.deepEqual(
      launch(
        ['/bin/bash', '-lc'],
        [
          'pip install -e . && TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 exec torchrun "--rdzv_conf=last_call_timeout=5,join_timeout=900" train.py --lr 0.1',
        ],
      ),
      { launcher: 'torchrun', lastCallTimeout: 5, joinTimeout: 900, disableShareStore: '1' },
    );
    assert.equal(
      launch(['sh', '-c', "python3 -m 'trainscaler_hook.launch' train.py"]).launcher,
      'trainscaler',
    );
  });

  it('a command it does not recognise is unknown, with why; nothing throws', () => {
    const cases: unknown[][] = [
      ['python', 'train.py'],
      ['python', '-m', 'my.trainer'],
      ['python', 'wrapper.py', '-m', 'torch.distributed.run'], // the script's own arguments
      ['deepspeed', 'train.py'],
      [],
      ['sh', '-c', 'torchrun "train.py'],
      ['torchrun', 42],
    ];
    for (const command of cases) {
      const l = launch(command);
      assert.equal(l.launcher, 'unknown', JSON.stringify(command));
      assert.ok(l.unknownWhy && l.unknownWhy.length > 0);
    }
    assert.match(
      launch(['deepspeed', 'train.py']).unknownWhy ?? '',
      /neither torchrun nor .*`deepspeed train\.py`/,
    );
    assert.match(launch([]).unknownWhy ?? '', /entrypoint/);
    assert.match(launch(['sh', '-c', 'torchrun "x']).unknownWhy ?? '', /open quote/);
  });
});

describe('launch settings: the rendezvous settings', () => {
  it('flags with = and with a space, - and _ spellings; the last one given wins', () => {
    for (const flags of [
      ['--rdzv-conf=last_call_timeout=3', '--monitor-interval=2'],
      ['--rdzv_conf', 'last_call_timeout=3', '--monitor_interval', '2'],
      ['--rdzv_conf=last_call_timeout=9', '--rdzv-conf', 'last_call_timeout=3', '--monitor_interval=2'],
    ])
      assert.deepEqual(launch(['torchrun', '--nnodes', '1:4', '--standalone', ...flags, 'train.py']), {
        launcher: 'torchrun',
        lastCallTimeout: 3,
        monitorInterval: 2,
      });
  });

  it("the script's own arguments are not torchrun's", () => {
    assert.deepEqual(
      launch(['torchrun', 'train.py', '--monitor-interval=9', '--rdzv-conf=last_call_timeout=9']),
      {
        launcher: 'torchrun',
      },
    );
  });

  it('flags over the env (PET_MONITOR_INTERVAL), elasticPolicy.rdzvConf over PET_RDZV_CONF in the env', () => {
    const env = { PET_MONITOR_INTERVAL: '5', PET_RDZV_CONF: 'last_call_timeout=7,close_timeout=4' };
    assert.deepEqual(launch(['torchrun', 'train.py'], [], { env }), {
      launcher: 'torchrun',
      monitorInterval: 5,
      lastCallTimeout: 7,
      closeTimeout: 4,
    });
    assert.deepEqual(
      launch(['torchrun', '--monitor-interval=1', 'train.py'], [], {
        env,
        rdzvConf: { last_call_timeout: '2' },
      }),
      { launcher: 'torchrun', monitorInterval: 1, lastCallTimeout: 2 },
    );
    assert.deepEqual(
      launch(['torchrun', '--rdzv-conf=last_call_timeout=1', 'train.py'], [], {
        rdzvConf: { last_call_timeout: '2' },
      }),
      { launcher: 'torchrun', lastCallTimeout: 1 },
    );
  });

  it('TORCH_DISABLE_SHARE_RDZV_TCP_STORE from the env, an inline assignment over it', () => {
    const env = { TORCH_DISABLE_SHARE_RDZV_TCP_STORE: '0' };
    assert.equal(launch(['torchrun', 'train.py'], [], { env }).disableShareStore, '0');
    assert.equal(
      launch(['sh', '-c', 'TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun train.py'], [], { env })
        .disableShareStore,
      '1',
    );
  });

  it('values that are no seconds are left unset (the default then applies)', () => {
    assert.deepEqual(
      launch(['torchrun', '--monitor-interval=fast', '--rdzv-conf=last_call_timeout=-1', 'x.py']),
      {
        launcher: 'torchrun',
      },
    );
    assert.deepEqual(parseRdzvConf('a=1, b = 2,broken,=3'), { a: '1', b: '2' });
  });
});

describe('shellCommands', () => {
  it('splits commands and words, honouring quotes and backslashes', () => {
    assert.deepEqual(shellCommands(`cd /w && a "b c" 'd "e"' f\\ g; h|i`), [
      ['cd', '/w'],
      ['a', 'b c', 'd "e"', 'f g'],
      ['h'],
      ['i'],
    ]);
    assert.deepEqual(shellCommands(`x "" "a\\"b"`), [['x', '', 'a"b']]);
    assert.equal(shellCommands(`x 'open`), undefined);
  });
});
