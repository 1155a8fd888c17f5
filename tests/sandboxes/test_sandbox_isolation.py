"""The sandbox has no network, kills the whole tree and does not see the host's environment."""

from sandboxes import result as R
from sandboxes.grading import run_python_tests
from sandboxes.process import Limits
from tests.sandboxes.hostcheck import sandbox_leftovers


def run(program: str, tests: str, **limits):
    return run_python_tests(program, tests, "probe", limits=Limits(**limits) if limits else None)


def test_no_network_interface_but_loopback():
    program = (
        "import socket\n"
        "def probe():\n"
        "    try:\n"
        "        socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
        "        return 'connected'\n"
        "    except OSError as exc:\n"
        "        return 'blocked'\n"
    )
    result = run(program, "def check(candidate):\n    assert candidate() == 'blocked'\n")
    assert result.status == R.OK, result


def test_host_environment_is_not_visible(monkeypatch):
    monkeypatch.setenv("CRUCIBLE_TEST_SECRET", "hunter2")
    program = (
        "import os\ndef probe():\n"
        "    return sorted(k for k in os.environ "
        "if 'SECRET' in k or k.startswith('DJANGO') or k == 'REDIS_URL')\n"
    )
    result = run(program, "def check(candidate):\n    assert candidate() == []\n")
    assert result.status == R.OK, result


def test_deterministic_hash_seed_and_time_zone():
    program = (
        "import os, time\ndef probe():\n"
        "    return (os.environ.get('PYTHONHASHSEED'), time.strftime('%Z'))\n"
    )
    result = run(program, "def check(candidate):\n    assert candidate() == ('0', 'UTC')\n")
    assert result.status == R.OK, result


def test_timeout_kills_detached_grandchildren():
    program = (
        "import os, sys, time\n"
        "def probe():\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            print('grandchild running', flush=True)\n"
        "            while True:\n"
        "                time.sleep(0.1)\n"
        "        os._exit(0)\n"
        "    while True:\n"
        "        time.sleep(0.1)\n"
    )
    result = run(program, "def check(candidate):\n    assert candidate()\n", wall_timeout_s=1.0)
    assert result.status == R.TIMEOUT
    assert "grandchild running" in result.stdout, (
        "the grandchild never ran: the test proves nothing"
    )
    assert sandbox_leftovers() == [], "a grandchild outlived its execution"


def test_workspace_is_fresh_each_time():
    program = (
        "import os\n"
        "def probe():\n"
        "    seen = os.path.exists('left-behind.txt')\n"
        "    open('left-behind.txt', 'w').write('x')\n"
        "    return seen\n"
    )
    tests = "def check(candidate):\n    assert candidate() is False\n"
    assert run(program, tests).status == R.OK
    assert run(program, tests).status == R.OK


KEYRING = (
    "import ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.syscall.restype = ctypes.c_long\n"
    "KEY_SPEC_USER_KEYRING = ctypes.c_long(-4)\n"
)


def test_no_channel_between_executions_through_the_kernel_keyring():
    plant = KEYRING + (
        "def probe():\n"
        "    return libc.syscall(248, b'user', b'crucible-mark', b'secret', ctypes.c_long(6), "
        "KEY_SPEC_USER_KEYRING)\n"
    )
    find = KEYRING + (
        "def probe():\n"
        "    return libc.syscall(250, ctypes.c_long(10), KEY_SPEC_USER_KEYRING, b'user', "
        "b'crucible-mark', ctypes.c_long(0))\n"
    )
    # add_key and keyctl are refused (seccomp): -1 both times, nothing planted, nothing found
    assert run(plant, "def check(candidate):\n    assert candidate() == -1\n").status == R.OK
    assert run(find, "def check(candidate):\n    assert candidate() == -1\n").status == R.OK


def test_no_nested_user_namespace():
    program = (
        "import ctypes, os\n"
        "def probe():\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    return (libc.unshare(0x10000000), ctypes.get_errno())\n"
    )
    result = run(program, "def check(candidate):\n    assert candidate() == (-1, 1)\n")  # EPERM
    assert result.status == R.OK, result


def test_no_channel_between_executions_through_a_socket_left_in_flight():
    # A socket sent into its own queue survives its processes; its abstract name must not be
    # visible to the next execution (each submission's tree has its own network namespace).
    plant = (
        "import array, socket\n"
        "held = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "held.bind('\\0crucible-left-behind')\n"
        "a, b = socket.socketpair()\n"
        "a.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, "
        "array.array('i', [held.fileno(), a.fileno(), b.fileno()]))])\n"
        "def probe():\n"
        "    return 'planted'\n"
    )
    look = (
        "def probe():\n"
        "    return [line.split()[-1] for line in open('/proc/net/unix').read().splitlines()[1:]\n"
        "            if 'crucible-left-behind' in line]\n"
    )
    assert run(plant, "def check(candidate):\n    assert candidate() == 'planted'\n").status == R.OK
    result = run(look, "def check(candidate):\n    assert candidate() == []\n")
    assert result.status == R.OK, result
