"""Moving files in and out of a sandbox safely.

Paths are checked twice. First here, statically: a path must be relative, without `..`, empty
parts or NUL bytes. Then inside the sandbox, by the same script on every backend: the path is
resolved with `realpath` *in the sandbox's own view* and must stay inside the work directory, so a
symlink the program planted (`ln -s /etc/passwd x`) is refused rather than followed. No process
can swap the path between the check and the write: execs in a sandbox run one at a time and none
of their processes outlives them.
"""

from __future__ import annotations

import posixpath

from sandboxes._errors import UnsafePathError

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
        raise UnsafePathError(f"path {path!r}: contains a NUL byte")
    if path.startswith("/"):
        raise UnsafePathError(f"path {path!r}: absolute paths are not allowed")
    parts = path.split("/")
    if ".." in parts:
        raise UnsafePathError(f"path {path!r}: '..' is not allowed")
    norm = posixpath.normpath(path)
    if norm in (".", ""):
        raise UnsafePathError(f"path {path!r}: names the work directory itself, not a file")
    return norm
