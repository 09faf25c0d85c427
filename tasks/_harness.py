"""The test harness that runs inside the sandbox, as source text for `python3 -I -S -c`.

Why it is shaped like this (the channel the solution cannot write):
- The harness gets the tests, the solutions and a fresh random nonce on stdin and reads all of
  it before any solution code runs; the tests are never written into the sandbox's files.
- It marks itself non-dumpable (prctl), so processes of the same uid cannot read its memory or
  its file descriptors through /proc, nor ptrace it. If that fails it refuses to run.
- A solution is imported only in a child process. The child evaluates each test's `call` and
  sends back the value's repr (a Counter, a namedtuple, a dict view first made the plain value it
  equals); the harness parses it as `ast.literal_eval` would, plus `frozenset(...)` (no solution
  code can run there) and compares it with `expected`, which only the harness evaluates. A child
  can lie about its own value, but it never learns the value that would pass, and no reply it
  sends can crash the harness.
- The verdict is one line on the harness's stdout, prefixed by the nonce. Children write to
  their own pipes, never to that stdout, and cannot learn the nonce, so printing "PASSED",
  exiting early or editing files cannot produce a record the host accepts.

Several solutions of one task may be judged in one run (one child each, one after the other);
`roost tasks check` uses that to pay for the sandbox and the harness once per task.
"""

from __future__ import annotations

__all__ = ["CHILD_SOURCE", "HARNESS_SOURCE"]

# No imports beyond builtins and os/sys: every millisecond here is paid per verification.
CHILD_SOURCE = r"""
import os, sys, marshal
from _collections_abc import Mapping, Set  # already imported by os: free
reply = os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)
sys.path.insert(0, os.getcwd())
# Bound here, before the solution runs: its `builtins.repr = ...` then changes what its own code
# sees, not what this process sends.
repr, str, type, isinstance, id, len, dict, list, tuple, set, frozenset, getattr, vars = (
    repr, str, type, isinstance, id, len, dict, list, tuple, set, frozenset, getattr, vars)
eval, exec, BaseException, EOFError, SystemExit = eval, exec, BaseException, EOFError, SystemExit
SCALARS = frozenset((int, float, complex, str, bytes, bool, type(None), type(...)))
# An IntEnum member, a float or str subclass == the plain number or string it holds: send that
# (each base's own slot reads the value, so a subclass's __int__ or __str__ has no say).
SCALAR_BASES = ((int, int.__int__), (float, float.__float__), (str, str.__str__))
def send(i, kind, text):
    reply.write("%d\t%s\t%s\n" % (i, kind, repr(text)[:1000000]))
    reply.flush()
CONTAINERS = frozenset((dict, list, tuple, set, frozenset))
def plain_type(value):
    # The plain type a container equals (==) as; None for anything else.
    if isinstance(value, Mapping):
        return dict
    if isinstance(value, frozenset):
        return frozenset
    if isinstance(value, Set):
        return set
    if isinstance(value, list):
        return list
    return tuple if isinstance(value, tuple) else None
def plain(value, within):
    # A Counter, defaultdict, OrderedDict, namedtuple or dict view == the plain value it holds,
    # but its repr is no literal: send that plain value. `within` holds the containers being
    # converted, so a cycle is left as it is (its repr is no literal) and the depth is bounded.
    kind = type(value)
    if kind in SCALARS or id(value) in within or len(within) > 100:
        return value
    for base, value_of in SCALAR_BASES:
        if isinstance(value, base):
            return value_of(value)
    make = kind if kind in CONTAINERS else plain_type(value)
    if make is None:
        return value
    within.add(id(value))  # no try/finally: an exception ends the conversion, `within` too
    if make is dict:
        out = {plain(k, within): plain(v, within) for k, v in value.items()}
    else:
        out = make([v if type(v) in SCALARS else plain(v, within) for v in value])
    within.discard(id(value))
    return out
try:
    # Compiled from source, never from a __pycache__ file that may be stale or planted.
    path = os.path.join(os.getcwd(), sys.argv[1] + ".py")
    with open(path, encoding="utf-8") as src:
        code = compile(src.read(), path, "exec")
    mod = type(sys)(sys.argv[1])
    mod.__file__ = path
    sys.modules[sys.argv[1]] = mod
    exec(code, mod.__dict__)
    cand = getattr(mod, sys.argv[2])
except BaseException as exc:
    send(-1, "error", "%s: %s" % (type(exc).__name__, str(exc)[:300]))
    raise SystemExit(0)
send(-1, "ok", "")
ns = dict(vars(mod))
ns["candidate"] = cand
stdin = sys.stdin.buffer
while True:
    try:
        i, call, check = marshal.load(stdin)
    except EOFError:
        break
    try:
        if check:
            exec(check, ns)
            send(i, "ok", "")
        else:
            send(i, "value", repr(plain(eval(call, ns), set())))
    except BaseException as exc:
        send(i, "error", "%s: %s" % (type(exc).__name__, str(exc)[:300]))
"""

HARNESS_SOURCE = r"""
# Only builtin or small modules (ast, json and subprocess would double the start-up, paid on
# every verification): replies are parsed by `literal` below, the verdict written by `dump`.
import _ast, ctypes, marshal, math, os, select, sys, time
if ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 0
    sys.exit("harness: cannot make itself non-dumpable")
job = marshal.loads(sys.stdin.buffer.read())
sys.stdin.close()
nonce, tests, limit, module = job["nonce"], job["tests"], float(job["timeout_s"]), job["module"]
path = module + ".py"

def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
        except TypeError:
            return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return a == b

NUMBERS = (int, float, complex)

def literal(text):
    # ast.literal_eval's grammar: constants, tuples, lists, sets, dicts, set(), signed numbers
    # and complex sums. Only parsed, never run: no solution code can execute here.
    return literal_node(compile(text.lstrip(" \t"), "<reply>", "eval", _ast.PyCF_ONLY_AST).body)

def literal_node(node):
    kind = type(node)
    if kind is _ast.Constant:
        return node.value
    if kind is _ast.Tuple:
        return tuple(map(literal_node, node.elts))
    if kind is _ast.List:
        return list(map(literal_node, node.elts))
    if kind is _ast.Set:
        return set(map(literal_node, node.elts))
    if kind is _ast.Dict and None not in node.keys:
        return dict(zip(map(literal_node, node.keys), map(literal_node, node.values)))
    if kind is _ast.Call and type(node.func) is _ast.Name and not node.keywords:
        name, args = node.func.id, node.args
        if name == "set" and not args:
            return set()
        # repr's form of a frozenset (beyond literal_eval's grammar, and still only parsed): a
        # set of frozensets has no other spelling.
        if name == "frozenset" and not args:
            return frozenset()
        if name == "frozenset" and len(args) == 1 and type(args[0]) is _ast.Set:
            return frozenset(map(literal_node, args[0].elts))
    if kind is _ast.UnaryOp and type(node.op) in (_ast.UAdd, _ast.USub):
        number = node.operand.value if type(node.operand) is _ast.Constant else None
        if isinstance(number, NUMBERS):
            return +number if type(node.op) is _ast.UAdd else -number
    if kind is _ast.BinOp and type(node.op) in (_ast.Add, _ast.Sub):
        left, right = literal_node(node.left), node.right
        imaginary = right.value if type(right) is _ast.Constant else None
        if isinstance(left, (int, float)) and isinstance(imaginary, complex):
            return left + imaginary if type(node.op) is _ast.Add else left - imaginary
    raise ValueError("not a plain value")

ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b",
           "\f": "\\f"}

def dump(obj):
    # JSON of the verdict (dicts, lists, strings), ASCII only as json.dumps writes it.
    if isinstance(obj, dict):
        return "{" + ", ".join(dump(k) + ": " + dump(v) for k, v in obj.items()) + "}"
    if isinstance(obj, list):
        return "[" + ", ".join(map(dump, obj)) + "]"
    out = []
    for char in obj:
        code = ord(char)
        if char in ESCAPES:
            out.append(ESCAPES[char])
        elif 32 <= code < 127:
            out.append(char)
        elif code > 0xFFFF:
            code -= 0x10000
            out.append("\\u%04x\\u%04x" % (0xD800 | code >> 10, 0xDC00 | code & 0x3FF))
        else:
            out.append("\\u%04x" % code)
    return '"' + "".join(out) + '"'

UNREADABLE = (None, "error", "unreadable reply")

def parse(line):
    # The child writes the line, and the solution runs in the child: any line must end as the
    # solution's failure, never as an exception here (that would be an evaluation failure).
    parts = line.decode(errors="replace").split("\t", 2)
    try:
        i, kind, payload = int(parts[0]), parts[1], literal(parts[2])
    except Exception:
        return UNREADABLE
    return (i, kind, payload) if type(payload) is str else UNREADABLE

class Child:
    def __init__(self):
        # The pipes are close-on-exec but for the ends placed at the child's 0 and 1.
        child_in, self.stdin = os.pipe()
        self.stdout, child_out = os.pipe()
        try:
            self.pid = os.posix_spawn(
                sys.executable,
                [sys.executable, "-I", "-S", "-B", "-c", job["child"], module, job["entry"]],
                os.environ,
                file_actions=[(os.POSIX_SPAWN_DUP2, child_in, 0),
                              (os.POSIX_SPAWN_DUP2, child_out, 1)])
        except BaseException:
            for fd in (child_in, self.stdin, self.stdout, child_out):
                os.close(fd)
            raise
        os.close(child_in)
        os.close(child_out)
        self.buf = b""
        first = self.read(limit + 5.0)
        # (status, detail) for every test when the solution did not load. A load that timed out
        # or died may be the machine's load or a kill, not the program alone: it must not be
        # `error`, which a reused verdict takes for the program's own (tasks/_reuse.py).
        self.unloaded = None
        if first == "timeout":
            self.unloaded = ("timeout", "the solution did not load within %ss" % (limit + 5.0))
        elif first is None:
            self.unloaded = ("crash", "the solution's process died while loading")
        elif first[1] != "ok":
            self.unloaded = ("error", first[2][:300])

    def read(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.stdout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return "timeout"
            chunk = os.read(fd, 65536)
            if not chunk or len(self.buf) > 2000000:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return parse(line)

    def ask(self, i, test):
        try:
            data = marshal.dumps((i, test.get("call", ""), test.get("check", "")))
            while data:
                data = data[os.write(self.stdin, data):]
        except OSError:
            return None
        return self.read(limit)

    def kill(self):
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        os.close(self.stdin)
        os.close(self.stdout)

def place(source):
    # Never follow a link the solution may have planted where its file goes.
    if os.path.lexists(path):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    # surrogatepass: an answer holding a lone surrogate is written as it is and then fails to
    # load (the agent's error); strict UTF-8 would crash the harness (an evaluation failure).
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as out:
        out.write(source)

def judge():
    results = []
    child = None
    for i, test in enumerate(tests):
        name = test.get("name") or "test_%d" % i
        if child is None:
            try:
                child = Child()
            except (OSError, MemoryError) as exc:
                # The solution used up the sandbox's processes or memory: its failure, and
                # the harness must still give a verdict rather than a traceback.
                detail = "the sandbox's limits stopped the solution: %s" % exc
                results.extend({"name": t.get("name") or "test_%d" % j, "status": "crash",
                                "detail": detail} for j, t in enumerate(tests) if j >= i)
                break
        if child.unloaded is not None:
            results.append({"name": name, "status": child.unloaded[0],
                            "detail": child.unloaded[1]})
            continue
        reply = child.ask(i, test)
        if not isinstance(reply, tuple):
            timeout = reply == "timeout"
            detail = "over %ss" % limit if timeout else "the solution's process died"
            results.append({"name": name, "status": "timeout" if timeout else "crash",
                            "detail": detail})
            child.kill()
            child = None
            continue
        rid, kind, payload = reply
        if rid != i:
            detail = payload if rid is None else "reply out of order"
            results.append({"name": name, "status": "error", "detail": detail})
        elif kind == "error":
            results.append({"name": name, "status": "error", "detail": str(payload)[:300]})
        elif test.get("check"):
            results.append({"name": name, "status": "passed" if kind == "ok" else "failed"})
        else:
            expected = eval(test["expected"], {})
            try:
                got = literal(payload) if kind == "value" else None
            except Exception:  # whatever the child sent: the solution's failure, not ours
                results.append({"name": name, "status": "failed", "detail": "not a plain value"})
                continue
            if kind == "value" and same(got, expected):
                results.append({"name": name, "status": "passed"})
            else:
                detail = "%s = %s" % (test["call"], str(payload)[:100])
                results.append({"name": name, "status": "failed", "detail": detail})
    if child is not None:
        child.kill()
    return results

verdicts = []
for source in job["solutions"]:
    place(source)
    verdicts.append({"tests": judge()})
sys.stdout.write(nonce + " " + dump({"solutions": verdicts}) + "\n")
sys.stdout.flush()
"""
