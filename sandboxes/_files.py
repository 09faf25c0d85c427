"""Moving files in and out of a sandbox safely.

Paths are checked twice. First here, statically: a path must be relative, without `..`, empty
parts or NUL bytes. Then inside the sandbox, by the same script on every backend: the path is
resolved with `realpath` *in the sandbox's own view* and must stay inside the work directory, so a
symlink the program planted (`ln -s /etc/passwd x`) is refused rather than followed. No process
can swap the path between the check and the write: execs in a sandbox run one at a time and none
of their processes outlives them.
"""

from __future__ import annotations

import os
import posixpath

from sandboxes._errors import UnsafePathError

#: Linux's limits (PATH_MAX less room for the work directory, NAME_MAX), checked up front: past
#: them the in-sandbox script failed only after `mkdir -p` had made part of the tree, and the
#: error quoted the whole (say 200 KB) path back.
MAX_PATH_BYTES = 3072
MAX_NAME_BYTES = 255

UNSAFE_EXIT = 86
"""Exit status the in-sandbox scripts use to say "this path leads outside"."""

# $1 = work dir, $2 = relative path, $3 = octal mode. The write goes to the resolved path, so a
# symlink further down cannot redirect it.
PUT_SCRIPT = r"""
set -eu
r=$(realpath -m -- "$1/$2")
case "$r" in "$1"/*) ;; *) echo "path $2 resolves to $r, outside $1" >&2; exit 86;; esac
mkdir -p -- "${r%/*}"
cat > "$r"
chmod "$3" -- "$r"
"""

GET_SCRIPT = r"""
set -eu
r=$(realpath -m -- "$1/$2")
case "$r" in "$1"/*) ;; *) echo "path $2 resolves to $r, outside $1" >&2; exit 86;; esac
exec cat -- "$r"
"""


def check_relative_path(path: str) -> str:
    """`path` normalized, if it is a plain relative path inside the work directory.

    :raises UnsafePathError: naming the path and the reason.
    """
    if not isinstance(path, str) or not path:
        raise UnsafePathError(f"path {path!r}: must be a non-empty string")
    if "\0" in path:
        raise UnsafePathError(f"path {_short(path)}: contains a NUL byte")
    try:  # as the backend will encode it for execve; a lone surrogate cannot be
        size = len(os.fsencode(path))
    except UnicodeEncodeError as exc:
        raise UnsafePathError(f"path {_short(path)}: not encodable ({exc.reason})") from None
    if size > MAX_PATH_BYTES:
        raise UnsafePathError(f"path {_short(path)}: {size} bytes, longer than {MAX_PATH_BYTES}")
    longest = max(len(os.fsencode(part)) for part in path.split("/"))
    if longest > MAX_NAME_BYTES:
        raise UnsafePathError(
            f"path {_short(path)}: a name of {longest} bytes, longer than {MAX_NAME_BYTES}"
        )
    if path.startswith("/"):
        raise UnsafePathError(f"path {path!r}: absolute paths are not allowed")
    parts = path.split("/")
    if ".." in parts:
        raise UnsafePathError(f"path {path!r}: '..' is not allowed")
    norm = posixpath.normpath(path)
    if norm in (".", ""):
        raise UnsafePathError(f"path {path!r}: names the work directory itself, not a file")
    return norm


def _short(path: str) -> str:
    """`path` quoted for an error message, cut to a readable length."""
    return repr(path) if len(path) <= 80 else f"{path[:60]!r}... ({len(path)} characters)"
