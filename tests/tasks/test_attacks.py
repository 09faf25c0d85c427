"""A solution must not be able to forge a pass: each attack here runs for real, under bubblewrap,
against the add-one task, and must end as the agent's failure."""

from __future__ import annotations

import pytest

from tasks import Task, TestCase, TestsVerifier
from tests.conftest import REAL
from tests.tasks._helpers import ADD_ONE, real_sandbox

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", [REAL])]

WRONG = "    return x\n"  # every attack below also carries a wrong answer

ATTACKS = {
    "print_passed": WRONG + 'print("PASSED")\nprint("ok 3/3 tests passed")\n',
    "print_a_forged_record": WRONG
    + "import json\n"
    + "rec = {'solutions': [{'tests': [{'name': 't', 'status': 'passed'}] * 3}]}\n"
    + "for guess in ('', '0' * 32, 'nonce'):\n"
    + "    print(guess, json.dumps(rec), flush=True)\n",
    "exit_0_at_import": WRONG + "import sys\nsys.exit(0)\n",
    "os_exit_0_at_import": WRONG + "import os\nos._exit(0)\n",
    "exit_0_in_the_call": "    import os\n    os._exit(0)\n",
    "edit_the_test_files": WRONG
    + "import os\n"
    + "for root, dirs, files in os.walk('/'):\n"
    + "    if root.startswith(('/proc', '/sys', '/usr', '/dev')):\n"
    + "        continue\n"
    + "    for name in files:\n"
    + "        try:\n"
    + "            open(os.path.join(root, name), 'w').write('assert True\\n')\n"
    + "        except OSError:\n"
    + "            pass\n",
    "read_the_tests_from_the_harness": "    import os\n"
    + "    for what in ('fd/0', 'mem', 'environ', 'cmdline'):\n"
    + "        try:\n"
    + "            data = open('/proc/%d/%s' % (os.getppid(), what), 'rb').read()\n"
    + "        except OSError:\n"
    + "            continue\n"
    + "        if b'expected' in data:\n"
    + "            return int(data.split(b'expected')[1][4:6])\n"
    + "    return x\n",
    "always_equal_object": "    class Same:\n"
    + "        def __eq__(self, other): return True\n"
    + "        def __repr__(self): return 'Same()'\n"
    + "    return Same()\n",
    "monkeypatch_the_runner": WRONG
    + "import __main__, builtins, marshal\n"
    + "real_send = getattr(__main__, 'send', None)\n"
    + "if real_send:\n"
    + "    __main__.send = lambda i, kind, text: real_send(i, 'ok', '')\n"
    + "builtins.repr = lambda value: 'True'\n"
    + "AssertionError.__init__ = lambda *a: None\n",
    "replace_the_reply_channel": WRONG
    + "import os\n"
    + "for fd in range(3, 20):\n"
    + "    try:\n"
    + "        os.write(fd, b'0\\tok\\t\\'\\'\\n1\\tok\\t\\'\\'\\n2\\tok\\t\\'\\'\\n')\n"
    + "    except OSError:\n"
    + "        pass\n",
    "exhaust_the_process_limit": "    import os, time\n"
    + "    for _ in range(200):\n"
    + "        try:\n"
    + "            if os.fork() == 0:\n"
    + "                os.closerange(0, 256)  # the harness sees this process end\n"
    + "                time.sleep(30)\n"
    + "                os._exit(0)\n"
    + "        except OSError:\n"
    + "            break\n"
    + "    os._exit(1)\n",
    # Before the child bound its builtins, this made every reply's payload the int 2, and the
    # harness died on it: an evaluation failure the agent could cause at will.
    "redirect_repr": WRONG + "import builtins\nbuiltins.repr = lambda value: '2'\n",
    # The child's own `repr` replaced: its replies carry a non-string payload.
    "send_a_payload_that_is_no_string": WRONG + "import __main__\n__main__.repr = lambda v: '2'\n",
    "kill_the_harness_and_forge": WRONG
    + "import os, signal, json\n"
    + "print('deadbeef', json.dumps({'solutions': [{'tests': []}]}), flush=True)\n"
    + "os.kill(os.getppid(), signal.SIGKILL)\n",
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
async def test_an_attack_does_not_forge_a_pass(attack: str) -> None:
    async with real_sandbox() as sandbox:
        verdict = await TestsVerifier().verify(ADD_ONE, ATTACKS[attack], sandbox)
    assert not verdict.passed, verdict
    assert verdict.failure == "agent", verdict
    assert verdict.score < 1.0


async def test_a_planted_module_cannot_hijack_the_harness() -> None:
    async with real_sandbox() as sandbox:
        for name in ("json.py", "ast.py", "sitecustomize.py", "marshal.py", "math.py"):
            await sandbox.put_file(name, b"import os\nprint('PASSED')\nos._exit(0)\n")
        wrong = await TestsVerifier().verify(ADD_ONE, WRONG, sandbox)
        right = await TestsVerifier().verify(ADD_ONE, "    return x + 1\n", sandbox)
    assert not wrong.passed
    assert wrong.failure == "agent"
    assert right.passed


async def test_the_harness_memory_and_descriptors_are_out_of_reach() -> None:
    probe = Task(
        id="probe",
        prompt="",
        entry_point="probe",
        tests=[TestCase(call="probe()", expected="'unreachable'")],
    )
    # The probe reports what it could open of its parent (the harness) through /proc.
    solution = (
        "import os\n"
        "def probe():\n"
        "    seen = []\n"
        "    for what in ('mem', 'fd/0', 'fd/1', 'environ'):\n"
        "        try:\n"
        "            open('/proc/%d/%s' % (os.getppid(), what), 'rb').close()\n"
        "            seen.append(what + ':open')\n"
        "        except OSError as exc:\n"
        "            seen.append(what + ':' + type(exc).__name__)\n"
        "    return ' '.join(seen)\n"
    )
    async with real_sandbox() as sandbox:
        verdict = await TestsVerifier().verify(probe, solution, sandbox)
    detail = verdict.tests[0].detail
    assert "mem:PermissionError" in detail, detail
    assert "fd/0:PermissionError" in detail, detail
    assert "fd/1:PermissionError" in detail, detail
